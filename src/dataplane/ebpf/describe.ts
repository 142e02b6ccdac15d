// One map entry as a line of text, for the Fake's dump, `diff` and
// `explain`: the decoded key, then the decoded value.
import * as L from './layout.js';

const hostPort = (ip: string, port: number) => (ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`);

function flagNames(n: number, names: ReadonlyArray<readonly [number, string]>): string {
  const out = names.filter(([bit]) => (n & bit) !== 0).map(([, name]) => name);
  return out.length ? out.join('|') : '0';
}

export const SVC_FLAG_NAMES = [
  [L.SVC_NO_ENDPOINTS, 'no-endpoints'],
  [L.SVC_LOCAL_POLICY, 'local-policy'],
  [L.SVC_SOURCE_RANGES, 'source-ranges'],
] as const;
export const ADDR_FLAG_NAMES = [
  [L.ADDR_LOCAL, 'local'],
  [L.ADDR_NODEPORT, 'nodeport'],
  [L.ADDR_SERVICE, 'service'],
  [L.ADDR_CLUSTER_IP, 'cluster-ip'],
] as const;
export const CFG_FLAG_NAMES = [
  [L.CFG_ENABLED, 'enabled'],
  [L.CFG_DETECT_CIDR, 'detect-cidr'],
  [L.CFG_DETECT_IFACE, 'detect-iface'],
  [L.CFG_MASQ_ALL, 'masquerade-all'],
  [L.CFG_TRAFFIC, 'traffic'],
  [L.CFG_DSR, 'dsr'],
] as const;
export const CT_FLAG_NAMES = [
  [L.CT_REPLY, 'reply'],
  [L.CT_AT_EGRESS, 'at-egress'],
  [L.CT_MASQ, 'masq'],
  [L.CT_SEEN_ACK, 'seen-ack'],
  [L.CT_VIA_LO, 'via-lo'],
  [L.CT_SNAT, 'snat'],
  [L.CT_DSR, 'dsr'],
] as const;

export function keyText(map: L.MapName, k: Uint8Array): string {
  switch (map) {
    case 'svc': {
      const d = L.decodeSvcKey(k);
      return `${hostPort(d.addr, d.port)}/${d.proto}`;
    }
    case 'addrs':
      return L.decodeAddrKey(k);
    case 'sets':
    case 'maglev':
      return `set ${L.decodeU32(k)}`;
    case 'eps': {
      const d = L.decodeEpKey(k);
      return `set ${d.setId} slot ${d.slot}`;
    }
    case 'members': {
      const d = L.decodeMemberKey(k);
      return `set ${d.setId} ${hostPort(d.addr, d.port)}`;
    }
    case 'affinity': {
      const d = L.decodeAffKey(k);
      return `${d.client} svc ${d.svcId}`;
    }
    case 'lbSrc': {
      const d = L.decodeLpmSvcKey(k);
      return `svc ${d.svcId} ${d.addr}/${d.prefix}`;
    }
    case 'podCidrs':
    case 'svcCidrs': {
      const d = L.decodeLpmKey(k);
      return `${d.addr}/${d.prefix}`;
    }
    case 'ifaces': {
      const d = L.decodeIfaceKey(k);
      return `ifindex ${d.ifindex} ${d.family}`;
    }
    case 'cfg':
      return L.decodeU32(k) === 0 ? 'IPv4' : 'IPv6';
    case 'names':
    case 'traffic':
      return `svc ${L.decodeU32(k)}`;
    case 'ct': {
      const d = L.decodeCtKey(k);
      return `${d.proto} ${hostPort(d.saddr, d.sport)} -> ${hostPort(d.daddr, d.dport)}`;
    }
    default:
      return L.hex(k);
  }
}

export function valueText(map: L.MapName, v: Uint8Array): string {
  switch (map) {
    case 'svc': {
      const d = L.decodeSvcValue(v);
      const aff = d.affinitySecs ? ` affinity ${d.affinitySecs}s` : '';
      return `svc ${d.svcId} ${d.kind} cluster-set ${d.clusterSet} local-set ${d.localSet} ${d.algo} ${flagNames(d.flags, SVC_FLAG_NAMES)}${aff}`;
    }
    case 'addrs':
      return flagNames(L.decodeU32(v), ADDR_FLAG_NAMES);
    case 'sets': {
      // rr_next: the round-robin turn the programs hand out next (0 as the proxy writes a set).
      const d = L.decodeSetValue(v);
      return `count ${d.count}${d.rrNext ? ` rr-next ${d.rrNext}` : ''}`;
    }
    case 'eps': {
      const d = L.decodeEpValue(v);
      return hostPort(d.addr, d.port);
    }
    case 'members':
      return `slot ${L.decodeU32(v)}`;
    case 'maglev': {
      const t = L.decodeMaglev(v);
      const counts = new Map<number, number>();
      for (const s of t) counts.set(s, (counts.get(s) ?? 0) + 1);
      return `${t.length} entries: ${[...counts]
        .sort((a, b) => a[0] - b[0])
        .map(([s, n]) => `slot ${s} x${n}`)
        .join(', ')}`;
    }
    case 'affinity': {
      const d = L.decodeAffValue(v);
      return `${hostPort(d.addr, d.port)} at ${d.lastNs}`;
    }
    case 'ifaces':
      return L.decodeU32(v) & L.IFACE_POD ? 'pod' : '0';
    case 'cfg': {
      const d = L.decodeCfgValue(v);
      return `mark 0x${d.mark.toString(16)} ${flagNames(d.flags, CFG_FLAG_NAMES)} netns ${d.netnsCookie}`;
    }
    case 'ct': {
      const d = L.decodeCtValue(v);
      const nat = d.nat ? ` nat ${d.nat}` : '';
      return `${hostPort(d.addr, d.port)}${nat} svc ${d.svcId} ${flagNames(d.flags, CT_FLAG_NAMES)}`;
    }
    case 'names':
      return L.decodeName(v);
    case 'traffic': {
      const d = L.decodeTrafficValue(v);
      return `conns ${d.conns} bytes ${d.bytes}`;
    }
    case 'lbSrc':
    case 'podCidrs':
    case 'svcCidrs':
      return '';
    default:
      return L.hex(v);
  }
}

export function entryText(map: L.MapName, k: Uint8Array, v: Uint8Array): string {
  const vt = valueText(map, v);
  return vt ? `${keyText(map, k)} => ${vt}` : keyText(map, k);
}
