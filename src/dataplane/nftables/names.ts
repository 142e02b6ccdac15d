// Upstream's nftables object names (pkg/proxy/nftables/proxier.go). Operators
// and tools see these, so they are kept byte-for-byte: the table, the static
// chains, sets and maps, and the hashed per-service chain names.
import type { IPFamily, ServicePortName } from '../../core/types.js';
import { base32, sha256 } from '../../core/hash.js';

export const TABLE_NAME = 'kube-proxy';
/** Upstream's table comment, byte for byte (nft list shows it; tools match on it). */
export const TABLE_COMMENT = 'rules for kube-proxy';

export type NftFamily = 'ip' | 'ip6';
export function nftFamily(family: IPFamily): NftFamily {
  return family === 'IPv4' ? 'ip' : 'ip6';
}

// Static chains.
export const SERVICES_CHAIN = 'services';
export const MASQUERADING_CHAIN = 'masquerading';
export const CLUSTER_IPS_CHECK_CHAIN = 'cluster-ips-check';
export const SERVICE_ENDPOINTS_CHECK_CHAIN = 'service-endpoints-check';
export const NODEPORT_ENDPOINTS_CHECK_CHAIN = 'nodeport-endpoints-check';
export const FIREWALL_CHECK_CHAIN = 'firewall-check';
export const REJECT_CHAIN = 'reject-chain';

// Sets and maps.
export const CLUSTER_IPS_SET = 'cluster-ips';
export const NODEPORT_IPS_SET = 'nodeport-ips';
export const HAIRPIN_CONNECTIONS_SET = 'hairpin-connections';
export const SERVICE_IPS_MAP = 'service-ips';
export const SERVICE_NODEPORTS_MAP = 'service-nodeports';
export const NO_ENDPOINT_SERVICES_MAP = 'no-endpoint-services';
export const NO_ENDPOINT_NODEPORTS_MAP = 'no-endpoint-nodeports';
export const FIREWALL_IPS_MAP = 'firewall-ips';

// Prefixes of per-service objects.
export const SERVICE_CHAIN_PREFIX = 'service-';
export const LOCAL_CHAIN_PREFIX = 'local-';
export const EXTERNAL_CHAIN_PREFIX = 'external-';
export const FIREWALL_CHAIN_PREFIX = 'firewall-';
export const ENDPOINT_CHAIN_PREFIX = 'endpoint-';
export const AFFINITY_SET_PREFIX = 'affinity-';
/**
 * The 'maps' layout's per-policy-chain endpoint map (not an upstream object):
 * `endpoints-<policy chain name>`, e.g. endpoints-service-ULMVA6XW-ns1/svc1/tcp/p80.
 */
export const ENDPOINTS_MAP_PREFIX = 'endpoints-';

/** Longest base name; leaves room for the longest prefix within nft's 256-char limit. */
export const CHAIN_NAME_BASE_LENGTH_MAX = 240;

/** The kernel keeps at most 128 bytes of a comment (knftables CommentLengthMax); nft refuses longer ones. */
export const COMMENT_LENGTH_MAX = 128;

/** UTF-8 length of a string, without node:buffer (this layer is pure). */
export function utf8Length(s: string): number {
  let n = 0;
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    n += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  }
  return n;
}

/**
 * A comment cut to COMMENT_LENGTH_MAX bytes, keeping its start, as upstream
 * does for the service-port names in element comments since 1.37 (kubernetes
 * PR #139516): "<namespace>/<name>:<port>" reaches 143 bytes with the longest
 * valid names, and one over-long comment failed the whole transaction. Never
 * cuts inside a character (names are ASCII, so this only matters in theory).
 */
export function truncateComment(s: string): string {
  if (utf8Length(s) <= COMMENT_LENGTH_MAX) return s;
  let out = '';
  let n = 0;
  for (const ch of s) {
    const len = utf8Length(ch);
    if (n + len > COMMENT_LENGTH_MAX) break;
    out += ch;
    n += len;
  }
  return out;
}

/** base32(sha256(name))[:8] + "-" + name, cut to 240 chars with a "..." suffix. */
export function hashAndTruncate(name: string): string {
  const full = `${base32(sha256(name)).slice(0, 8)}-${name}`;
  return full.length > CHAIN_NAME_BASE_LENGTH_MAX ? `${full.slice(0, CHAIN_NAME_BASE_LENGTH_MAX - 3)}...` : full;
}

/** nft protocol keyword: tcp, udp or sctp. */
export function nftProtocol(spn: Pick<ServicePortName, 'protocol'>): string {
  // One string per protocol: element keys hold it for as long as they live (100k of them in a big table).
  return NFT_PROTOCOLS[spn.protocol] ?? spn.protocol.toLowerCase();
}
const NFT_PROTOCOLS: Readonly<Record<string, string>> = { TCP: 'tcp', UDP: 'udp', SCTP: 'sctp' };

/** "ns/svc/proto/portName", hashed (upstream servicePortChainNameBase). */
export function servicePortChainNameBase(spn: ServicePortName): string {
  return hashAndTruncate(`${spn.namespace}/${spn.name}/${nftProtocol(spn)}/${spn.port}`);
}

/**
 * "ns/svc/proto/portName__IP/port", hashed; IPv6 colons become dots because
 * ':' is not allowed in chain names (upstream servicePortEndpointChainNameBase).
 */
export function servicePortEndpointChainNameBase(spn: ServicePortName, ip: string, port: number): string {
  const host = ip.replaceAll(':', '.');
  return hashAndTruncate(`${spn.namespace}/${spn.name}/${nftProtocol(spn)}/${spn.port}__${host}/${port}`);
}

/** Service chains are the only chain names containing '/' (upstream isServiceChainName). */
export function isServiceChainName(name: string): boolean {
  return name.includes('/');
}

/** The 'maps' layout's endpoint maps carry their policy chain's name. */
export function isEndpointsMapName(name: string): boolean {
  return name.startsWith(ENDPOINTS_MAP_PREFIX) && name.includes('/');
}

/** Affinity sets carry the endpoint base name, which also contains '/'. */
export function isAffinitySetName(name: string): boolean {
  return name.startsWith(AFFINITY_SET_PREFIX) && name.includes('/');
}
