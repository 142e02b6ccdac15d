// `explain --from FILE`: saved state instead of the kernel, what a support
// engineer takes from a broken node and traces elsewhere. A file holds one of:
//   - iptables-save / ip6tables-save output, or the nftables kube-proxy table
//     listing plus its `nft -j` form (explainrules.ts);
//   - the userspace table (`nft list ruleset` or `nft list table ip
//     kube-proxy-userspace`);
//   - an IPVS mode bundle: ipvsadm -Sn, ipset save, iptables-save and
//     ip -o addr output in one file (ipvslive.ts);
//   - ebpf mode's maps as JSON, written by `explain --save` (explainebpf.ts):
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
import { ebpfFromDump, ebpfServiceAddresses, explainEbpfMaps, isEbpfDump } from './explainebpf.js';
import { explainIpvsFake } from './explainipvs.js';
import { rulesFromDump, traceRules, type LoadedRules } from './explainrules.js';
import { rulesSource, statusAddresses, type ServiceSource } from './explainservice.js';
import { explainUserspaceListing } from './explainuserspace.js';
import type { Explanation } from './explainview.js';
import { ipvsFromBundle, isIpvsBundle } from './ipvslive.js';

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

/** Which mode's state a dump holds: --mode if given, else told from the content. */
function modeOf(text: string, mode: DumpMode): 'userspace' | 'ipvs' | 'ebpf' | 'rules' {
  if (mode === 'userspace' || mode === 'ipvs' || mode === 'ebpf') return mode;
  if (mode !== null) return 'rules';
  if (isEbpfDump(text)) return 'ebpf';
  if (/^table ip6? kube-proxy-userspace \{/m.test(text)) return 'userspace';
  return isIpvsBundle(text) ? 'ipvs' : 'rules';
}

function rulesOf(text: string, family: IPFamily, file: string, mode: DumpMode): LoadedRules {
  const rules = rulesFromDump(text, family, file);
  if (mode !== null && rules.mode !== mode)
    throw new ProxyError('KPT_INPUT_INVALID', `${file} holds ${rules.mode} rules, not ${mode}`);
  return rules;
}

const NO_STATUS = 'the saved state names no Service; add --status FILE (kube-proxy-ts status -o json from that node)';

/** Walk one packet through a dump; `localIPs` null = the dump's own addresses (ipvs, ebpf) or none. */
export function explainFromDump(
  file: string,
  mode: DumpMode,
  family: IPFamily,
  packet: TracePacket,
  localIPs: readonly string[] | null,
  status: StatusAnswer | null,
  sport: number | null = null,
): Explanation {
  const text = readDump(file);
  switch (modeOf(text, mode)) {
    case 'ebpf': {
      const saved = ebpfFromDump(text, file);
      return explainEbpfMaps(saved.maps, packet, localIPs ?? saved.localIPs, { sport, ifindexOf: saved.ifindexOf });
    }
    case 'userspace': {
      const why = status?.error ?? 'a saved dump has only the table; add --status FILE or run explain on the node';
      return explainUserspaceListing(text, family, packet, localIPs ?? [], status?.doc ?? null, why);
    }
    case 'ipvs': {
      const bundle = ipvsFromBundle(text, family, file);
      return explainIpvsFake(bundle.fake, packet, localIPs ?? bundle.localIPs);
    }
    case 'rules':
      return traceRules(rulesOf(text, family, file, mode), packet, localIPs ?? []);
  }
}

/** The --service source of a dump, with the node addresses to trace node ports with. */
export function serviceSourceFromDump(
  file: string,
  mode: DumpMode,
  family: IPFamily,
  localIPs: readonly string[] | null,
  status: StatusAnswer | null,
): { source: ServiceSource; localIPs: readonly string[] } {
  const text = readDump(file);
  const kind = modeOf(text, mode);
  if (kind === 'rules') return { source: rulesSource(rulesOf(text, family, file, mode)), localIPs: localIPs ?? [] };
  if (kind === 'ebpf') {
    const saved = ebpfFromDump(text, file);
    const source: ServiceSource = {
      mode: 'ebpf',
      addresses: (service, fam) => ebpfServiceAddresses(saved.maps, service, fam),
      trace: (p, l) => explainEbpfMaps(saved.maps, p, l, { ifindexOf: saved.ifindexOf }),
    };
    return { source, localIPs: localIPs ?? saved.localIPs };
  }
  const doc = status?.doc ?? null;
  if (doc === null) throw new ProxyError('KPT_INPUT_INVALID', `${file}: ${status?.error ?? NO_STATUS}`);
  const addresses = (service: string, fam: IPFamily) => statusAddresses(doc, service, fam);
  if (kind === 'ipvs') {
    const bundle = ipvsFromBundle(text, family, file);
    return {
      source: { mode: 'ipvs', addresses, trace: (p, l) => explainIpvsFake(bundle.fake, p, l) },
      localIPs: localIPs ?? bundle.localIPs,
    };
  }
  return {
    source: {
      mode: 'userspace',
      addresses,
      trace: (p, l) => explainUserspaceListing(text, family, p, l, doc, null),
    },
    localIPs: localIPs ?? [],
  };
}
