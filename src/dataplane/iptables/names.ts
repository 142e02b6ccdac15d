// Upstream iptables chain names (pkg/proxy/iptables/proxier.go portProtoHash,
// servicePortPolicyClusterChain & co., servicePortEndpointChainName).
// KUBE-SVC/SVL/EXT/FW share one hash of servicePortName + lower(protocol);
// KUBE-SEP adds the endpoint's "ip:port" ("[ip]:port" for IPv6). The hash is
// the first 16 characters of base32(sha256(...)), so names are <= 28 chars.

import { flat } from '../../core/flat.js';
import { base32, sha256 } from '../../core/hash.js';
import type { Protocol } from '../../core/types.js';

export const SERVICE_CHAIN_PREFIX = 'KUBE-SVC-';
export const LOCAL_CHAIN_PREFIX = 'KUBE-SVL-';
export const EXTERNAL_CHAIN_PREFIX = 'KUBE-EXT-';
export const FIREWALL_CHAIN_PREFIX = 'KUBE-FW-';
export const ENDPOINT_CHAIN_PREFIX = 'KUBE-SEP-';

// ASCII names (Service names are DNS labels, endpoint keys are IPs and ports)
// are encoded into one reused buffer instead of a TextEncoder allocation per hash.
let scratch = new Uint8Array(256);

// base32 encodes 5-byte groups independently, so the first 16 characters are
// exactly base32 of the first 10 digest bytes (no padding): the rest is not encoded.
function hash16(s: string): string {
  const n = s.length;
  if (n > scratch.length) scratch = new Uint8Array(n * 2);
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c > 127) return base32(sha256(s).subarray(0, 10));
    scratch[i] = c;
  }
  return base32(sha256(scratch.subarray(0, n)).subarray(0, 10));
}

/** `spn` is servicePortNameString ("ns/svc:port" or "ns/svc"). */
export function servicePortChainHash(spn: string, protocol: Protocol | string): string {
  return hash16(spn + protocol.toLowerCase());
}

export const serviceChainName = (spn: string, p: Protocol | string) =>
  SERVICE_CHAIN_PREFIX + servicePortChainHash(spn, p);
export const localChainName = (spn: string, p: Protocol | string) => LOCAL_CHAIN_PREFIX + servicePortChainHash(spn, p);
export const externalChainName = (spn: string, p: Protocol | string) =>
  EXTERNAL_CHAIN_PREFIX + servicePortChainHash(spn, p);
export const firewallChainName = (spn: string, p: Protocol | string) =>
  FIREWALL_CHAIN_PREFIX + servicePortChainHash(spn, p);

/** `endpoint` is Endpoint.key: "ip:port" or "[ip]:port". */
export function endpointChainName(spn: string, protocol: Protocol | string, endpoint: string): string {
  return ENDPOINT_CHAIN_PREFIX + hash16(spn + protocol.toLowerCase() + endpoint);
}

const SERVICE_CHAIN_PREFIXES = [
  SERVICE_CHAIN_PREFIX,
  LOCAL_CHAIN_PREFIX,
  EXTERNAL_CHAIN_PREFIX,
  FIREWALL_CHAIN_PREFIX,
  ENDPOINT_CHAIN_PREFIX,
];

/** Upstream isServiceChainName: a per-service or per-endpoint chain we own. */
export function isServiceChainName(chain: string): boolean {
  return SERVICE_CHAIN_PREFIXES.some((p) => chain.startsWith(p));
}

/** Every chain name of one service port; endpoint chain names by Endpoint.key. */
export interface ServicePortChainNames {
  readonly cluster: string;
  readonly local: string;
  readonly external: string;
  readonly firewall: string;
  endpoint(endpointKey: string): string;
}

/**
 * The chain names of each ServicePort object, remembered for as long as the
 * object lives: unchanged services keep their object across syncs
 * (src/core/snapshot.ts), and a deleted or updated Service's object is
 * released, so the memory never outgrows the live services. One per
 * IptablesDriver, which owns it like the memo. A port's
 * endpoint names are reset when they outgrow MAX_ENDPOINTS_PER_PORT (endpoint
 * churn on a long-lived Service).
 */
export class ChainNamer {
  private readonly byServicePort = new WeakMap<object, ServicePortChainNames>();

  of(sp: { readonly key: string; readonly protocol: Protocol | string }): ServicePortChainNames {
    let n = this.byServicePort.get(sp);
    if (n === undefined) {
      n = new PortChainNames(sp.key, sp.protocol);
      this.byServicePort.set(sp, n);
    }
    return n;
  }
}

const MAX_ENDPOINTS_PER_PORT = 4096;

/**
 * One port's names. There is one of these per live service port (110k in the
 * hostile-objects flood, 60k at 10k Services), so it holds only the shared
 * hash: the four service-chain names are built when asked (a render asks a
 * few times), and the endpoint-name map is made on the first endpoint, so a
 * port without endpoints carries neither. It keeps the port's own key string
 * (shared with the ServicePort) for the endpoint hashes.
 */
class PortChainNames implements ServicePortChainNames {
  private readonly hash: string;
  private eps: Map<string, string> | null = null;

  constructor(
    private readonly spn: string,
    private readonly protocol: Protocol | string,
  ) {
    this.hash = servicePortChainHash(spn, protocol);
  }

  get cluster(): string {
    return SERVICE_CHAIN_PREFIX + this.hash;
  }
  get local(): string {
    return LOCAL_CHAIN_PREFIX + this.hash;
  }
  get external(): string {
    return EXTERNAL_CHAIN_PREFIX + this.hash;
  }
  get firewall(): string {
    return FIREWALL_CHAIN_PREFIX + this.hash;
  }

  endpoint(endpointKey: string): string {
    let name = this.eps?.get(endpointKey);
    if (name === undefined) {
      name = flat(endpointChainName(this.spn, this.protocol, endpointKey));
      if (this.eps === null || this.eps.size >= MAX_ENDPOINTS_PER_PORT) this.eps = new Map();
      this.eps.set(endpointKey, name);
    }
    return name;
  }
}
