// The registry of datapath modes: one driver per mode (./driver.ts says what
// a driver does), and the few things that are about all modes at once. The
// rest of the program asks `modeDriver(mode)` and never branches on a mode's
// name. Adding a mode: write its driver beside these and list it in MODES
// (docs/architecture.md, "add a mode").
import type { Dataplane, IPFamily, ProxyMode } from '../../core/types.js';
import { ProxyError } from '../../core/errors.js';
import type { CommandRunner } from '../../platform/exec.js';
import type { Logger } from '../../platform/logger.js';
import { ipv6Supported } from '../../platform/netinfo.js';
import type { CleanupOptions, DataplaneDeps, ModeDriver } from './driver.js';
import { ebpfDriver } from './ebpf/driver.js';
import { iptablesDriver } from './iptables/driver.js';
import { ipvsDriver } from './ipvs/driver.js';
import { nftablesDriver } from './nftables/driver.js';
import { userspaceDriver } from './userspace/driver.js';

export type { CleanupOptions, DataplaneDeps, ModeDriver } from './driver.js';

export const MODES: Readonly<Record<ProxyMode, ModeDriver>> = {
  iptables: iptablesDriver,
  ipvs: ipvsDriver,
  nftables: nftablesDriver,
  userspace: userspaceDriver,
  ebpf: ebpfDriver,
};

export const SUPPORTED_MODES = Object.keys(MODES) as readonly ProxyMode[];

/**
 * The order in which modes are told apart in a live kernel: IPVS mode before
 * iptables mode (it writes iptables chains too), the table-based modes next,
 * ebpf's pinned maps last. Cleanups run in the same order, so IPVS mode's rules that
 * match its ipsets are gone before iptables' cleanup and the sets.
 */
export const DETECTION_ORDER: readonly ModeDriver[] = [
  ipvsDriver,
  iptablesDriver,
  nftablesDriver,
  userspaceDriver,
  ebpfDriver,
];

/**
 * The order in which a saved file's kind is told (`explain --from`): the
 * formats that cannot be mistaken first (ebpf's JSON, a listing with the
 * userspace table), then an IPVS bundle before plain iptables-save output,
 * which it contains.
 */
export const DUMP_ORDER: readonly ModeDriver[] = [
  ebpfDriver,
  userspaceDriver,
  ipvsDriver,
  iptablesDriver,
  nftablesDriver,
];

export function modeDriver(mode: string): ModeDriver {
  const d = (MODES as Record<string, ModeDriver | undefined>)[mode];
  if (d === undefined)
    throw new ProxyError(
      'KPT_UNSUPPORTED',
      `proxy mode ${JSON.stringify(mode)} is not available in this build (supported: ${SUPPORTED_MODES.join(', ')})`,
    );
  return d;
}

/**
 * What the proxy says when no mode was chosen (RunCommand.modeDefaulted): a
 * warning in the log and a Warning Event on the Node, action StartKubeProxy,
 * as upstream does since 1.37 (KEP-5343, kubernetes PR #139957). The reason
 * string is ours: upstream's merged server_linux.go could not be read here
 * (docs/compatibility.md says so).
 */
export const MODE_DEFAULTED = {
  reason: 'ProxyModeDefaulted',
  note:
    'No proxy mode was set, so iptables was picked by default. Kubernetes 1.40 makes nftables the default: ' +
    'set mode (or --proxy-mode) to iptables to keep iptables, or to nftables to move now.',
} as const;

export function createDataplane(mode: ProxyMode, d: DataplaneDeps): Promise<Dataplane> {
  return modeDriver(mode).create(d);
}

/**
 * IP families to proxy, primary first (upstream: the node IP's family is
 * primary; the other family is added when the platform supports it, e.g.
 * ip6tables works and the kernel has IPv6).
 */
export async function familiesFor(mode: ProxyMode, primary: IPFamily): Promise<IPFamily[]> {
  const secondary: IPFamily = primary === 'IPv4' ? 'IPv6' : 'IPv4';
  const ok = !(secondary === 'IPv6' && !ipv6Supported()) && (await modeDriver(mode).familyWorks(secondary));
  return ok ? [primary, secondary] : [primary];
}

/** The mode whose state the host (or namespace) holds for a family, or null. */
export async function detectMode(run: CommandRunner, family: IPFamily, pinRoot: string): Promise<ProxyMode | null> {
  for (const d of DETECTION_ORDER) if (await d.detect(run, family, pinRoot)) return d.mode;
  return null;
}

/** --cleanup: every mode's state. Returns the number of failed steps. */
export async function cleanupAll(log: Logger, o: CleanupOptions = {}): Promise<number> {
  let errors = 0;
  for (const d of DETECTION_ORDER) errors += await d.cleanup(log, o);
  log.info({ errors }, 'Cleanup finished');
  return errors;
}
