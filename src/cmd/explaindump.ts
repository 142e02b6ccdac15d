// `explain --from FILE`: saved state instead of the kernel, what a support
// engineer takes from a broken node and traces elsewhere. A file holds one of:
//   - iptables-save / ip6tables-save output, or the nftables kube-proxy table
//     listing plus its `nft -j` form (explainrules.ts);
//   - the userspace table (`nft list ruleset` or `nft list table ip
//     kube-proxy-userspace`);
//   - an IPVS mode bundle: ipvsadm -Sn, ipset save, iptables-save and
//     ip -o addr output in one file (modes/ipvs/live.ts);
//   - ebpf mode's maps as JSON, written by `explain --save` (modes/ebpf/explain.ts):
//     maps have no text form of their own.
// The mode is told from the file's content unless --mode says it. What lives
// only in the proxy process (which addresses a Service has in ipvs and
// userspace mode, which endpoints a userspace listener relays to) comes from
// a saved `kube-proxy-ts status -o json` of the same node (--status FILE).
import { readFileSync } from 'node:fs';
import { ProxyError } from '../core/errors.js';
import type { IPFamily } from '../core/types.js';
import type { TracePacket } from '../dataplane/trace.js';
import type { StatusDoc } from '../engine/statusview.js';
import type { ServiceSource } from './explainservice.js';
import type { Explanation } from './explainview.js';
import type { ModeDriver } from './modes/driver.js';
import { DUMP_ORDER, modeDriver } from './modes/index.js';

export type DumpMode = Explanation['mode'] | null;

/** The proxy's status document, or null and the reason it could not be had. */
export interface StatusAnswer {
  readonly doc: StatusDoc | null;
  readonly error: string | null;
}

export function readDump(file: string, what = '--from'): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new ProxyError('KPT_INPUT_INVALID', `${what}: cannot read ${file}: ${(err as Error).message}`);
  }
}

/** A saved `kube-proxy-ts status -o json` (--status FILE). */
export function statusFromFile(file: string): StatusAnswer {
  let doc: StatusDoc;
  try {
    doc = JSON.parse(readDump(file, '--status')) as StatusDoc;
  } catch (err) {
    return { doc: null, error: err instanceof ProxyError ? err.message : `--status: ${file} is not JSON` };
  }
  if (!Array.isArray(doc?.servicePorts))
    return { doc: null, error: `--status: ${file} is not the output of kube-proxy-ts status -o json` };
  return { doc, error: null };
}

/** The driver whose state a dump holds: --mode's if given (it must hold it), else told from the content. */
function driverOf(text: string, mode: DumpMode, file: string): ModeDriver {
  const holder = DUMP_ORDER.find((d) => d.holdsDump(text));
  if (mode === null) {
    if (holder === undefined)
      throw new ProxyError(
        'KPT_INPUT_INVALID',
        `${file}: neither iptables-save output nor an nft listing of the kube-proxy table, nor a saved state of another mode`,
      );
    return holder;
  }
  const forced = modeDriver(mode);
  if (!forced.holdsDump(text))
    throw new ProxyError(
      'KPT_INPUT_INVALID',
      holder === undefined ? `${file} holds no ${mode} state` : `${file} holds ${holder.mode} rules, not ${mode}`,
    );
  return forced;
}

/** Walk one packet through a dump; `localIPs` null = the dump's own addresses (ipvs, ebpf) or none. */
export async function explainFromDump(
  file: string,
  mode: DumpMode,
  family: IPFamily,
  packet: TracePacket,
  localIPs: readonly string[] | null,
  status: StatusAnswer | null,
  sport: number | null = null,
): Promise<Explanation> {
  const text = readDump(file);
  const dump = await driverOf(text, mode, file).fromDump({ text, file, family, status, service: null, sport });
  return dump.source.trace(packet, localIPs ?? dump.localIPs ?? []);
}

/** The --service source of a dump, with the node addresses to trace node ports with. */
export async function serviceSourceFromDump(
  file: string,
  mode: DumpMode,
  family: IPFamily,
  localIPs: readonly string[] | null,
  status: StatusAnswer | null,
  service: string,
): Promise<{ source: ServiceSource; localIPs: readonly string[] }> {
  const text = readDump(file);
  const dump = await driverOf(text, mode, file).fromDump({ text, file, family, status, service, sport: null });
  return { source: dump.source, localIPs: localIPs ?? dump.localIPs ?? [] };
}
