// One place that knows which datapath class serves which --proxy-mode.
//
// Only the chosen mode's platform modules are loaded (dynamic import() in
// createDataplane): the other modes' code would sit in the resident process's
// memory unused. Type-only imports cost nothing at run time.
import { access } from 'node:fs/promises';
import type { ResolvedConfig } from '../core/config/types.js';
import type { Dataplane, DataplaneConfig, IPFamily, ProxyMode } from '../core/types.js';
import { DEFAULT_ENDPOINT_LAYOUT, ENDPOINT_LAYOUTS, type EndpointLayout } from '../dataplane/nftables/static.js';
import type { Clock } from '../core/clock.js';
import { hostRunner } from '../platform/exec.js';
import type { Logger } from '../platform/logger.js';
import type { ProxyMetrics } from '../platform/metrics.js';
import { ipv6Supported } from '../platform/netinfo.js';
import type { EbpfFlags } from './options.js';
import { availableParallelism } from 'node:os';
import type { ConntrackTable } from '../platform/conntrack.js';
import type { IpvsModeOptions } from '../platform/ipvs/dataplane.js';
import type { DrainBounds } from '../platform/ipvs/graceful.js';
import { BugError, ProxyError } from '../core/errors.js';

export interface DataplaneDeps {
  readonly config: DataplaneConfig;
  readonly resolved: ResolvedConfig;
  readonly clock: Clock;
  readonly log: Logger;
  readonly metrics: ProxyMetrics;
  readonly syncPeriodMs: number;
  /** Our --ebpf-* flags (ebpf mode). */
  readonly ebpf?: EbpfFlags;
  /** The conntrack table the proxy reconciles (ipvs mode flushes deleted UDP real servers through it). */
  readonly conntrack?: ConntrackTable;
}

export const SUPPORTED_MODES = ['iptables', 'ipvs', 'nftables', 'userspace', 'ebpf'] as const;

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

/**
 * The ebpf mode's connection map holds two entries per connection; it is
 * sized like the kernel's connection table upstream asks for
 * (conntrack.maxPerCore x CPUs, at least conntrack.min; 131072 connections
 * when those are left unset).
 */
export function ebpfConnectionEntries(resolved: ResolvedConfig): number {
  const ct = resolved.linux.conntrack;
  const perCore = ct.maxPerCore ?? 0;
  const flows = perCore > 0 ? Math.max(perCore * availableParallelism(), ct.min ?? 0) : 131072;
  return 2 * Math.min(flows, 1 << 21);
}

/**
 * The nftables endpoint layout: DEFAULT_ENDPOINT_LAYOUT unless
 * KPT_NFTABLES_LAYOUT names another (an experiment switch for tests and
 * benchmarks, not a flag). The only place that reads it. An unknown value
 * is reported through `warn` and ignored.
 */
export function nftablesLayout(
  env: Readonly<Record<string, string | undefined>> = process.env,
  warn: (msg: string) => void = () => {},
): EndpointLayout {
  const v = env['KPT_NFTABLES_LAYOUT'];
  if (v === undefined || v === '') return DEFAULT_ENDPOINT_LAYOUT;
  const layout = ENDPOINT_LAYOUTS.find((l) => l === v);
  if (layout === undefined)
    warn(`KPT_NFTABLES_LAYOUT=${v} is not one of ${ENDPOINT_LAYOUTS.join(', ')}; using ${DEFAULT_ENDPOINT_LAYOUT}`);
  return layout ?? DEFAULT_ENDPOINT_LAYOUT;
}

/**
 * How long IPVS mode lets an unwanted real server drain before deleting it:
 * undefined (IPVS mode's DEFAULT_DRAIN_BOUNDS) unless KPT_IPVS_DRAIN_TIMEOUT
 * gives seconds (for both TCP and UDP). Like KPT_NFTABLES_LAYOUT an
 * environment switch, read only here.
 */
export function ipvsDrainBounds(
  env: Readonly<Record<string, string | undefined>> = process.env,
  warn: (msg: string) => void = () => {},
): DrainBounds | undefined {
  const v = env['KPT_IPVS_DRAIN_TIMEOUT'];
  if (v === undefined || v === '') return undefined;
  const s = Number(v);
  if (!Number.isFinite(s) || s < 0) {
    warn(`KPT_IPVS_DRAIN_TIMEOUT=${v} is not a number of seconds; using the defaults`);
    return undefined;
  }
  return { tcpMs: s * 1000, udpMs: s * 1000 };
}

const seconds = (ns: number) => Math.round(ns / 1e9);

/** The --ipvs-* settings as IPVS mode takes them (timeouts in seconds). */
export function ipvsModeOptions(resolved: ResolvedConfig): IpvsModeOptions {
  const v = resolved.ipvs;
  return {
    scheduler: v.scheduler,
    excludeCIDRs: v.excludeCIDRs,
    strictARP: v.strictARP,
    tcpTimeout: seconds(v.tcpTimeout),
    tcpFinTimeout: seconds(v.tcpFinTimeout),
    udpTimeout: seconds(v.udpTimeout),
  };
}

export async function createDataplane(mode: ProxyMode, d: DataplaneDeps): Promise<Dataplane> {
  const onEvent = (level: 'debug' | 'info' | 'warn' | 'error', fields: Record<string, unknown>, msg: string) =>
    d.log[level](fields, msg);
  switch (mode) {
    case 'iptables': {
      const { IptablesDataplane, procSysctl } = await import('../platform/iptables/index.js');
      return new IptablesDataplane({
        config: d.config,
        run: hostRunner,
        sysctl: procSysctl,
        clock: d.clock,
        syncPeriodMs: d.syncPeriodMs,
        onEvent,
      });
    }
    case 'nftables': {
      const { NftablesDataplane } = await import('../platform/nftables/dataplane.js');
      return new NftablesDataplane({
        config: d.config,
        clock: d.clock,
        layout: nftablesLayout(process.env, (msg) => d.log.warn(msg)),
        onEvent,
        // The transaction text is built only for this log line.
        ...(d.log.isLevelEnabled('trace')
          ? {
              onTransaction: (family: IPFamily, script: string, partial: boolean, via: string) =>
                d.log.trace({ family, partial, via, script }, 'nftables transaction'),
            }
          : {}),
      });
    }
    case 'ipvs': {
      const [{ IpvsDataplane }, { openKernel }, { procSysctl }, { Conntrack, flushUDPFlows }] = await Promise.all([
        import('../platform/ipvs/dataplane.js'),
        import('../platform/ipvs/kernel.js'),
        import('../platform/iptables/index.js'),
        import('../platform/conntrack.js'),
      ]);
      const ct = d.conntrack ?? new Conntrack();
      const drainBounds = ipvsDrainBounds(process.env, (msg) => d.log.warn(msg));
      return new IpvsDataplane({
        config: d.config,
        ipvs: ipvsModeOptions(d.resolved),
        kernel: () => openKernel(hostRunner, procSysctl),
        run: hostRunner,
        clock: d.clock,
        syncPeriodMs: d.syncPeriodMs,
        ...(drainBounds ? { drainBounds } : {}),
        flushUDP: async (family, deleted) => {
          const r = await flushUDPFlows(
            ct,
            family,
            deleted.map(({ vs, rs }) => ({
              origDst: vs.address,
              origDstPort: vs.port,
              replySrc: rs.address,
              replySrcPort: rs.port,
            })),
          );
          for (const err of r.errors) d.log.warn({ err }, 'conntrack delete failed');
        },
        onEvent,
      });
    }
    case 'userspace': {
      const { UserspaceDataplane } = await import('../platform/userspace/dataplane.js');
      return new UserspaceDataplane({
        config: d.config,
        clock: d.clock,
        onEvent,
        onTransaction: (family, script) => d.log.trace({ family, script }, 'nft transaction'),
      });
    }
    case 'ebpf': {
      if (!d.ebpf) throw new BugError('ebpf mode needs its options');
      const { EbpfDataplane } = await import('../platform/ebpf/dataplane.js');
      return new EbpfDataplane({
        config: d.config,
        ebpf: { ...d.ebpf, ctEntries: ebpfConnectionEntries(d.resolved) },
        onEvent,
      });
    }
    default:
      throw new ProxyError(
        'KPT_UNSUPPORTED',
        `proxy mode ${JSON.stringify(mode)} is not available in this build (supported: ${SUPPORTED_MODES.join(', ')})`,
      );
  }
}

async function works(cmd: string, args: string[]): Promise<boolean> {
  try {
    await hostRunner(cmd, args);
    return true;
  } catch {
    return false;
  }
}

/**
 * IP families to proxy, primary first (upstream: the node IP's family is
 * primary; the other family is added when the platform supports it, e.g.
 * ip6tables works and the kernel has IPv6).
 */
export async function familiesFor(mode: ProxyMode, primary: IPFamily): Promise<IPFamily[]> {
  const secondary: IPFamily = primary === 'IPv4' ? 'IPv6' : 'IPv4';
  let secondaryOK: boolean;
  if (secondary === 'IPv6' && !ipv6Supported()) secondaryOK = false;
  else if (mode === 'iptables' || mode === 'ipvs')
    secondaryOK = await works(secondary === 'IPv6' ? 'ip6tables' : 'iptables', [
      '-w',
      '-t',
      'nat',
      '-S',
      'POSTROUTING',
    ]);
  else
    secondaryOK = await access('/proc/net/if_inet6').then(
      () => true,
      () => secondary === 'IPv4',
    );
  return secondaryOK ? [primary, secondary] : [primary];
}
