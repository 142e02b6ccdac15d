// Upstream iptables chain names (pkg/proxy/iptables/proxier.go portProtoHash,
// servicePortPolicyClusterChain & co., servicePortEndpointChainName).
// KUBE-SVC/SVL/EXT/FW share one hash of servicePortName + lower(protocol);
// KUBE-SEP adds the endpoint's "ip:port" ("[ip]:port" for IPv6). The hash is
// the first 16 characters of base32(sha256(...)), so names are <= 28 chars.

import { base32, sha256 } from '../../core/hash.js';
import type { Protocol } from '../../core/types.js';

export const SERVICE_CHAIN_PREFIX = 'KUBE-SVC-';
export const LOCAL_CHAIN_PREFIX = 'KUBE-SVL-';
export const EXTERNAL_CHAIN_PREFIX = 'KUBE-EXT-';
export const FIREWALL_CHAIN_PREFIX = 'KUBE-FW-';
export const ENDPOINT_CHAIN_PREFIX = 'KUBE-SEP-';

// Chain names are recomputed for every service port on every sync (partial
// syncs too, to know the active chains), so hashes are memoised. The cache is
// bounded: it is dropped whole when it grows past MAX_CACHED (a cluster of
// that size simply re-hashes once).
const MAX_CACHED = 262144;
const cache = new Map<string, string>();

function hash16(s: string): string {
  let h = cache.get(s);
  if (h === undefined) {
    h = base32(sha256(s)).slice(0, 16);
    if (cache.size >= MAX_CACHED) cache.clear();
    cache.set(s, h);
  }
  return h;
}

/** `spn` is servicePortNameString ("ns/svc:port" or "ns/svc"). */
export function servicePortChainHash(spn: string, protocol: Protocol | string): string {
  return hash16(spn + protocol.toLowerCase());
}

export const serviceChainName = (spn: string, p: Protocol | string) => SERVICE_CHAIN_PREFIX + servicePortChainHash(spn, p);
export const localChainName = (spn: string, p: Protocol | string) => LOCAL_CHAIN_PREFIX + servicePortChainHash(spn, p);
export const externalChainName = (spn: string, p: Protocol | string) => EXTERNAL_CHAIN_PREFIX + servicePortChainHash(spn, p);
export const firewallChainName = (spn: string, p: Protocol | string) => FIREWALL_CHAIN_PREFIX + servicePortChainHash(spn, p);

/** `endpoint` is Endpoint.key: "ip:port" or "[ip]:port". */
export function endpointChainName(spn: string, protocol: Protocol | string, endpoint: string): string {
  return ENDPOINT_CHAIN_PREFIX + hash16(spn + protocol.toLowerCase() + endpoint);
}

const SERVICE_CHAIN_PREFIXES = [SERVICE_CHAIN_PREFIX, LOCAL_CHAIN_PREFIX, EXTERNAL_CHAIN_PREFIX, FIREWALL_CHAIN_PREFIX, ENDPOINT_CHAIN_PREFIX];

/** Upstream isServiceChainName: a per-service or per-endpoint chain we own. */
export function isServiceChainName(chain: string): boolean {
  return SERVICE_CHAIN_PREFIXES.some((p) => chain.startsWith(p));
}
