// Service intake (upstream proxyutil.ShouldSkipService + serviceport.go
// newBaseServiceInfo): untrusted Service JSON -> the ServicePorts of one IP
// family. Nothing here throws on bad input: invalid entries are dropped and
// reported through the SkipReporter, and the rest of the Service survives.

import type { Service } from './api.js';
import { LABEL_SERVICE_PROXY_NAME } from './api.js';
import { parseCIDR, parseIP, specialIPReason } from './ip.js';
import type { IPFamily, Protocol, ServicePort, ServicePortName } from './types.js';
import { namespacedName, servicePortNameString } from './types.js';
import { isLbAlgorithm, LB_ALGORITHMS, type LbAlgorithm } from './lbalgorithm.js';

/** Receives one reason per dropped entry; `key` is the Service key when known. */
export type SkipReporter = (key: string, reason: string) => void;

export const noSkipReporter: SkipReporter = () => {};

/** Upstream default for sessionAffinityConfig.clientIP.timeoutSeconds. */
export const DEFAULT_STICKY_MAX_AGE_SECONDS = 10800;
const MAX_STICKY_MAX_AGE_SECONDS = 86400;

const PROTOCOLS: readonly Protocol[] = ['TCP', 'UDP', 'SCTP'];

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

function isPort(x: unknown): x is number {
  return typeof x === 'number' && Number.isInteger(x) && x >= 1 && x <= 65535;
}

function asArray(x: unknown): unknown[] {
  return Array.isArray(x) ? x : [];
}

/** A DNS-label-ish name: what the API server allows for namespaces and names. */
/** A Kubernetes object name (DNS-1123 subdomain: lower case, at most 253 characters). */
export function isObjectName(x: unknown): x is string {
  return typeof x === 'string' && x.length > 0 && x.length <= 253 && /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(x);
}

/**
 * "ns/name" of an object, or null when its metadata is unusable. Shared by
 * every intake path so that keys are built in one way.
 */
export function objectKey(obj: unknown): string | null {
  if (!isRecord(obj) || !isRecord(obj['metadata'])) return null;
  const md = obj['metadata'];
  if (!isObjectName(md['namespace']) || !isObjectName(md['name'])) return null;
  return namespacedName(md['namespace'], md['name']);
}

/**
 * Upstream ShouldSkipService: headless (clusterIP "" / "None"), ExternalName,
 * and Services claimed by another proxy (service-proxy-name label; normally
 * filtered server-side). Returns the reason, or null when the Service is used.
 */
/**
 * Why the proxy ignores this Service, or null. `proxyName` is this proxy's
 * service-proxy-name: "" (upstream) ignores every labelled Service; a name
 * (side-by-side trials) serves only Services labelled with exactly it.
 */
export function shouldSkipService(svc: Service, proxyName = ''): string | null {
  const spec = isRecord(svc.spec) ? svc.spec : {};
  if (spec.type === 'ExternalName') return 'type ExternalName';
  const cip = spec.clusterIP;
  if (cip === undefined || cip === '' || cip === 'None') return 'headless or no clusterIP';
  const labels = svc.metadata?.labels;
  const claimedBy =
    isRecord(labels) && LABEL_SERVICE_PROXY_NAME in labels ? String(labels[LABEL_SERVICE_PROXY_NAME]) : null;
  if (proxyName === '' && claimedBy !== null) return 'claimed by another service proxy';
  if (proxyName !== '' && claimedBy !== proxyName) return `not labelled ${LABEL_SERVICE_PROXY_NAME}=${proxyName}`;
  return null;
}

/** The ClusterIP of `family` from clusterIPs (falling back to clusterIP), normalised. */
function clusterIPForFamily(
  spec: Record<string, unknown>,
  family: IPFamily,
  report: (r: string) => void,
): string | null {
  const candidates = [...asArray(spec['clusterIPs'])];
  if (candidates.length === 0) candidates.push(spec['clusterIP']);
  for (const c of candidates) {
    const ip = parseIP(c);
    const special = ip && specialIPReason(ip);
    if (!ip || special) {
      report(`invalid clusterIP ${JSON.stringify(c)}${special ? ` (${special})` : ''}`);
      continue;
    }
    if (ip.family === family) return ip.text;
  }
  return null;
}

/** Addresses of `family`, normalised and de-duplicated; invalid ones reported. */
function ipsOfFamily(list: unknown, family: IPFamily, what: string, report: (r: string) => void): string[] {
  const out: string[] = [];
  for (const raw of asArray(list)) {
    const ip = parseIP(raw);
    const special = ip && specialIPReason(ip);
    if (!ip || special) {
      report(`invalid ${what} ${JSON.stringify(raw)}${special ? ` (${special})` : ''}`);
      continue;
    }
    if (ip.family === family && !out.includes(ip.text)) out.push(ip.text);
  }
  return out;
}

/** LB ingress IPs in VIP mode (ipMode unset or VIP); hostname-only entries are ignored. */
function loadBalancerVIPs(svc: Service, family: IPFamily, report: (r: string) => void): string[] {
  const status = isRecord(svc.status) ? svc.status : {};
  const lb = isRecord(status.loadBalancer) ? status.loadBalancer : {};
  const ips: unknown[] = [];
  for (const ing of asArray(lb.ingress)) {
    if (!isRecord(ing)) continue;
    if (ing['ip'] === undefined || ing['ip'] === '') continue;
    const mode = ing['ipMode'];
    if (mode !== undefined && mode !== null && mode !== 'VIP') continue;
    ips.push(ing['ip']);
  }
  return ipsOfFamily(ips, family, 'loadBalancer ingress IP', report);
}

/** Trimmed CIDRs of `family`; a zero CIDR of the family empties the list (allow all). */
function sourceRanges(list: unknown, family: IPFamily, report: (r: string) => void): string[] {
  const out: string[] = [];
  let allowAll = false;
  for (const raw of asArray(list)) {
    const c = typeof raw === 'string' ? parseCIDR(raw.trim()) : null;
    if (!c) {
      report(`invalid loadBalancerSourceRange ${JSON.stringify(raw)}`);
      continue;
    }
    if (c.family !== family) continue;
    if (c.prefix === 0) allowAll = true;
    if (!out.includes(c.text)) out.push(c.text);
  }
  return allowAll ? [] : out;
}

function stickyMaxAge(spec: Record<string, unknown>, report: (r: string) => void): number {
  if (spec['sessionAffinity'] !== 'ClientIP') return 0;
  const cfg = spec['sessionAffinityConfig'];
  const client = isRecord(cfg) ? cfg['clientIP'] : undefined;
  const t = isRecord(client) ? client['timeoutSeconds'] : undefined;
  if (t === undefined || t === null) return DEFAULT_STICKY_MAX_AGE_SECONDS;
  if (typeof t === 'number' && Number.isInteger(t) && t >= 1 && t <= MAX_STICKY_MAX_AGE_SECONDS) return t;
  report(`invalid sessionAffinity timeoutSeconds ${JSON.stringify(t)}; using ${DEFAULT_STICKY_MAX_AGE_SECONDS}`);
  return DEFAULT_STICKY_MAX_AGE_SECONDS;
}

/** Fields shared by every port of one Service in one family. */
interface ServiceCommon {
  readonly namespace: string;
  readonly name: string;
  readonly serviceKey: string;
  readonly clusterIP: string;
  readonly externalIPs: readonly string[];
  readonly loadBalancerVIPs: readonly string[];
  readonly loadBalancerSourceRanges: readonly string[];
  readonly stickyMaxAgeSeconds: number;
  readonly externalPolicyLocal: boolean;
  readonly internalPolicyLocal: boolean;
  readonly healthCheckNodePort: number;
  readonly trafficDistribution: string;
  readonly lbAlgorithm: LbAlgorithm | undefined;
}

/** Our per-Service choice of endpoint selection for the nftables and ebpf modes. */
export const LB_ALGORITHM_ANNOTATION = 'kube-proxy-ts/lb-algorithm';

function lbAlgorithm(svc: Service, report: (r: string) => void): LbAlgorithm | undefined {
  const a = (svc.metadata as { annotations?: Record<string, unknown> }).annotations?.[LB_ALGORITHM_ANNOTATION];
  if (a === undefined) return undefined;
  if (isLbAlgorithm(a)) return a;
  report(
    `invalid ${LB_ALGORITHM_ANNOTATION} annotation ${JSON.stringify(a)} (${LB_ALGORITHMS.join(', ')}); using the default`,
  );
  return undefined;
}

function serviceCommon(
  svc: Service,
  key: string,
  clusterIP: string,
  family: IPFamily,
  report: (r: string) => void,
  allowExternalIPs: boolean,
): ServiceCommon {
  const spec = svc.spec as unknown as Record<string, unknown>;
  const [namespace, name] = key.split('/') as [string, string];
  const type = spec['type'];
  const externalIPs = allowExternalIPs ? ipsOfFamily(spec['externalIPs'], family, 'externalIP', report) : [];
  // Upstream apiservice.ExternallyAccessible: judged on the whole spec, not the family.
  const specExternal = type === 'LoadBalancer' || type === 'NodePort' || asArray(spec['externalIPs']).length > 0;
  const etpLocal = spec['externalTrafficPolicy'] === 'Local';
  let hc = 0;
  if (type === 'LoadBalancer' && etpLocal && spec['healthCheckNodePort'] !== undefined) {
    if (isPort(spec['healthCheckNodePort'])) hc = spec['healthCheckNodePort'];
    else report(`invalid healthCheckNodePort ${JSON.stringify(spec['healthCheckNodePort'])}`);
  }
  const td = spec['trafficDistribution'];
  return {
    namespace,
    name,
    serviceKey: key,
    clusterIP,
    externalIPs,
    loadBalancerVIPs: loadBalancerVIPs(svc, family, report),
    loadBalancerSourceRanges: sourceRanges(spec['loadBalancerSourceRanges'], family, report),
    stickyMaxAgeSeconds: stickyMaxAge(spec, report),
    externalPolicyLocal: specExternal && etpLocal,
    internalPolicyLocal: spec['internalTrafficPolicy'] === 'Local',
    healthCheckNodePort: hc,
    trafficDistribution: typeof td === 'string' ? td : '',
    lbAlgorithm: lbAlgorithm(svc, report),
  };
}

function makeServicePort(
  c: ServiceCommon,
  family: IPFamily,
  portName: string,
  protocol: Protocol,
  port: number,
  nodePort: number,
): ServicePort {
  const name: ServicePortName = { namespace: c.namespace, name: c.name, port: portName, protocol };
  const externallyAccessible = nodePort !== 0 || c.loadBalancerVIPs.length > 0 || c.externalIPs.length > 0;
  return {
    name,
    key: servicePortNameString(name),
    serviceKey: c.serviceKey,
    family,
    clusterIP: c.clusterIP,
    port,
    protocol,
    nodePort,
    externalIPs: c.externalIPs,
    loadBalancerVIPs: c.loadBalancerVIPs,
    loadBalancerSourceRanges: c.loadBalancerSourceRanges,
    stickyMaxAgeSeconds: c.stickyMaxAgeSeconds,
    externalPolicyLocal: c.externalPolicyLocal,
    internalPolicyLocal: c.internalPolicyLocal,
    healthCheckNodePort: c.healthCheckNodePort,
    trafficDistribution: c.trafficDistribution,
    ...(c.lbAlgorithm ? { lbAlgorithm: c.lbAlgorithm } : {}),
    externallyAccessible,
    usesClusterEndpoints: !c.internalPolicyLocal || externallyAccessible,
    usesLocalEndpoints: c.internalPolicyLocal || (c.externalPolicyLocal && externallyAccessible),
  };
}

function isPortName(x: string): boolean {
  return x.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(x);
}

/** One spec.ports entry -> a ServicePort, or null (reported) when it is unusable. */
function intakePort(c: ServiceCommon, family: IPFamily, raw: unknown, report: (r: string) => void): ServicePort | null {
  if (!isRecord(raw)) {
    report('port entry is not an object');
    return null;
  }
  const portName = raw['name'] === undefined || raw['name'] === null ? '' : raw['name'];
  // A DNS label, as the API server validates it: rule comments and chain names are built from it, and an
  // 8 KiB name made iptables-restore refuse the whole sync ("Parameter too long") for every Service.
  if (typeof portName !== 'string' || (portName !== '' && !isPortName(portName))) {
    report(`invalid port name ${JSON.stringify(raw['name'])}`);
    return null;
  }
  const protocol = raw['protocol'] === undefined ? 'TCP' : raw['protocol'];
  if (!PROTOCOLS.includes(protocol as Protocol)) {
    report(`port ${JSON.stringify(portName)}: invalid protocol ${JSON.stringify(protocol)}`);
    return null;
  }
  if (!isPort(raw['port'])) {
    report(`port ${JSON.stringify(portName)}: invalid port ${JSON.stringify(raw['port'])}`);
    return null;
  }
  let nodePort = 0;
  const np = raw['nodePort'];
  if (np !== undefined && np !== null && np !== 0) {
    if (isPort(np)) nodePort = np;
    else report(`port ${JSON.stringify(portName)}: invalid nodePort ${JSON.stringify(np)}; ignored`);
  }
  return makeServicePort(c, family, portName, protocol as Protocol, raw['port'], nodePort);
}

/**
 * The ServicePorts of one Service for one family (upstream serviceToServiceMap),
 * keyed by ServicePort.key. An empty map means the family's proxier ignores
 * the Service (skipped, no ClusterIP of this family, or no valid port).
 */
export function serviceToServicePorts(
  svc: unknown,
  family: IPFamily,
  onSkip: SkipReporter = noSkipReporter,
  proxyName = '',
  /** Feature gate AllowServiceExternalIPs (KEP-5707): false drops spec.externalIPs for every mode. */
  allowExternalIPs = true,
): Map<string, ServicePort> {
  const out = new Map<string, ServicePort>();
  const key = objectKey(svc);
  if (key === null) {
    onSkip('', 'service has no valid metadata.namespace/name');
    return out;
  }
  if (key.split('/').some((part) => part.length > 63)) {
    // Namespace and Service names are DNS labels (63 each): longer ones cannot come from an API server,
    // and rule comments ("ns/name:port") must stay within iptables' 256 bytes.
    onSkip(key, 'service namespace or name longer than 63 characters');
    return out;
  }
  const s = svc as Service;
  if (!isRecord(s.spec)) {
    onSkip(key, 'service has no spec');
    return out;
  }
  if (shouldSkipService(s, proxyName) !== null) return out; // a normal skip, not bad input
  const report = (r: string) => onSkip(key, r);
  const clusterIP = clusterIPForFamily(s.spec as unknown as Record<string, unknown>, family, report);
  if (clusterIP === null) return out;
  const common = serviceCommon(s, key, clusterIP, family, report, allowExternalIPs);
  for (const raw of asArray(s.spec.ports)) {
    const sp = intakePort(common, family, raw, report);
    if (!sp) continue;
    if (out.has(sp.key)) {
      report(`duplicate port name ${JSON.stringify(sp.name.port)}; later entry dropped`);
      continue;
    }
    out.set(sp.key, sp);
  }
  return out;
}
