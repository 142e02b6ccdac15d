// What the installed iptables and kernel support, decided once per dataplane
// (upstream: getIPTablesVersion / RandomFully check, nfacct.New + Ensure,
// sysctl nf_conntrack_tcp_be_liberal).
import type { IptablesOptions } from '../../dataplane/iptables/renderer.js';
import { DEFAULT_IPTABLES_OPTIONS } from '../../dataplane/iptables/renderer.js';
import type { Iptables } from './iptables.js';
import { isNftBackend } from './restore.js';
import type { CommandRunner } from '../exec.js';
import type { Sysctl } from './sysctl.js';

export const CT_INVALID_COUNTER = 'ct_state_invalid_dropped_pkts';
export const LOCALHOST_NP_COUNTER = 'localhost_nps_accepted_pkts';

export interface IptablesFeatures {
  readonly version: [number, number, number] | null;
  /** nf_tables backend: the whole-table cache request of restore.ts applies. */
  readonly nftBackend: boolean;
  readonly options: IptablesOptions;
}

/** "iptables v1.8.9 (nf_tables)" -> [1, 8, 9]. */
export function parseIptablesVersion(text: string): [number, number, number] | null {
  const m = /v(\d+)\.(\d+)\.(\d+)/.exec(text);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : null;
}

/** Upstream: MASQUERADE --random-fully needs iptables >= 1.6.2. */
export function supportsRandomFully(v: readonly [number, number, number] | null): boolean {
  if (v === null) return false;
  const [a, b, c] = v;
  return a > 1 || (a === 1 && (b > 6 || (b === 6 && c >= 2)));
}

/**
 * Upstream creates its nfacct counters over netlink. We have no netlink
 * client, so we use the `nfacct` tool when it is installed: a counter is
 * usable when `nfacct add NAME` succeeds or `nfacct get NAME` finds it.
 * Without the tool the rules are written without `-m nfacct` (upstream does
 * the same when Ensure fails); only the two nfacct-based metrics are lost.
 */
export async function ensureNfacct(run: CommandRunner, name: string): Promise<boolean> {
  try {
    const add = await run('nfacct', ['add', name], { allowFailure: true });
    if (add.code === 0) return true;
    const get = await run('nfacct', ['get', name], { allowFailure: true });
    return get.code === 0;
  } catch {
    return false; // tool missing
  }
}

export async function detectFeatures(ipt: Iptables, run: CommandRunner, sysctl: Sysctl): Promise<IptablesFeatures> {
  const text = await ipt.versionString();
  const version = parseIptablesVersion(text);
  const [ctInvalid, localhostNp] = await Promise.all([
    ensureNfacct(run, CT_INVALID_COUNTER),
    ensureNfacct(run, LOCALHOST_NP_COUNTER),
  ]);
  const beLiberal = (await sysctl.get('net/netfilter/nf_conntrack_tcp_be_liberal')) === '1';
  return {
    version,
    nftBackend: isNftBackend(text),
    options: {
      ...DEFAULT_IPTABLES_OPTIONS,
      randomFully: supportsRandomFully(version),
      nfacct: { ctStateInvalidDropped: ctInvalid, localhostNodePortsAccepted: localhostNp },
      beLiberal,
    },
  };
}
