// What the API server would check before it stored a Service, EndpointSlice,
// Node or ServiceCIDR, for the fields the proxy reads: in standalone mode
// (--manifests) there is no API server, so this is the gate. An object with
// any error is rejected whole, with every error named by its field path in
// upstream's words ("spec.ports[1].port: Invalid value: 70000: must be
// between 1 and 65535, inclusive"). Fields the proxy never reads are not
// looked at (a Deployment's worth of extra fields does no harm).
//
// Deliberately stricter than the API server in one way: the API server
// allocates ClusterIPs and NodePorts, nobody does here, so a Service must
// carry them (spec.clusterIP; nodePort for NodePort Services).

import { invalid, notSupported, type BadValue, type FieldError } from '../config/field.js';
import { parseCIDR, parseIP } from '../ip.js';
import { LABEL_SERVICE_NAME } from '../api.js';

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const required = (field: string, detail: string): FieldError => ({ type: 'Required', field, value: null, detail });
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A value as field errors show it (objects and arrays as JSON). */
function shown(v: unknown): BadValue {
  if (v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
  return JSON.stringify(v) ?? 'undefined';
}

/** Collects errors for one object; every check names its path. */
class Checker {
  readonly errors: FieldError[] = [];

  obj(v: unknown, field: string, must = false): Obj | null {
    if (v === undefined || v === null) {
      if (must) this.errors.push(required(field, 'must be an object'));
      return null;
    }
    if (!isObj(v)) {
      this.errors.push(invalid(field, shown(v), 'must be an object'));
      return null;
    }
    return v;
  }
  list(v: unknown, field: string): unknown[] {
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v)) {
      this.errors.push(invalid(field, shown(v), 'must be a list'));
      return [];
    }
    return v;
  }
  str(v: unknown, field: string): string | null {
    if (v === undefined || v === null) return null;
    if (typeof v !== 'string') {
      this.errors.push(invalid(field, shown(v), 'must be a string'));
      return null;
    }
    return v;
  }
  bool(v: unknown, field: string): void {
    if (v !== undefined && v !== null && typeof v !== 'boolean')
      this.errors.push(invalid(field, shown(v), 'must be true or false'));
  }
  oneOf(v: unknown, field: string, allowed: readonly string[]): void {
    if (v === undefined || v === null) return;
    if (typeof v !== 'string' || !allowed.includes(v)) this.errors.push(notSupported(field, String(shown(v)), allowed));
  }
  port(v: unknown, field: string, min = 1): number | null {
    if (v === undefined || v === null) return null;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > 65535) {
      this.errors.push(invalid(field, shown(v), `must be between ${min} and 65535, inclusive`));
      return null;
    }
    return v;
  }
  ip(v: unknown, field: string): string | null {
    if (typeof v !== 'string' || !parseIP(v)) {
      this.errors.push(invalid(field, shown(v), 'must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)'));
      return null;
    }
    return v;
  }
  cidr(v: unknown, field: string): void {
    if (typeof v !== 'string' || !parseCIDR(v))
      this.errors.push(invalid(field, shown(v), 'must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)'));
  }
  name(v: unknown, field: string, re: RegExp, what: string): void {
    if (typeof v !== 'string' || v === '') {
      this.errors.push(required(field, 'name is required'));
      return;
    }
    if (v.length > 63 || !re.test(v)) this.errors.push(invalid(field, v, `a lowercase RFC 1123 ${what}`));
  }
  labels(v: unknown, field: string): void {
    const m = this.obj(v, field);
    for (const [k, val] of Object.entries(m ?? {})) this.str(val, `${field}[${k}]`);
  }
}

function checkMeta(c: Checker, meta: unknown, nameRule: 'dns1035' | 'dns1123subdomain', cluster = false): void {
  const m = c.obj(meta, 'metadata', true);
  if (!m) return;
  if (nameRule === 'dns1035') c.name(m['name'], 'metadata.name', DNS1035_LABEL, 'label that starts with a letter');
  else if (typeof m['name'] !== 'string' || m['name'] === '')
    c.errors.push(required('metadata.name', 'name is required'));
  else if (m['name'].length > 253 || !DNS1123_SUBDOMAIN.test(m['name']))
    c.errors.push(invalid('metadata.name', m['name'], 'a lowercase RFC 1123 subdomain'));
  if (!cluster && m['namespace'] !== undefined) c.name(m['namespace'], 'metadata.namespace', DNS1123_LABEL, 'label');
  c.labels(m['labels'], 'metadata.labels');
}

const SERVICE_TYPES = ['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName'];
const PROTOCOLS = ['TCP', 'UDP', 'SCTP'];
const POLICIES = ['Cluster', 'Local'];

function checkServicePorts(c: Checker, spec: Obj, type: unknown): void {
  const ports = c.list(spec['ports'], 'spec.ports');
  if (ports.length === 0 && type !== 'ExternalName' && spec['clusterIP'] !== 'None')
    c.errors.push(required('spec.ports', 'at least one port is required'));
  const names = new Set<string>();
  const needsNodePort =
    type === 'NodePort' || (type === 'LoadBalancer' && spec['allocateLoadBalancerNodePorts'] !== false);
  ports.forEach((raw, i) => {
    const f = `spec.ports[${i}]`;
    const p = c.obj(raw, f, true);
    if (!p) return;
    const name = c.str(p['name'], `${f}.name`);
    if (ports.length > 1 && !name)
      c.errors.push(required(`${f}.name`, 'when more than one port is given, each needs a name'));
    if (name) {
      if (names.has(name))
        c.errors.push({ type: 'Invalid', field: `${f}.name`, value: name, detail: 'duplicate port name' });
      names.add(name);
    }
    if (p['port'] === undefined) c.errors.push(required(`${f}.port`, 'port is required'));
    c.port(p['port'], `${f}.port`);
    c.oneOf(p['protocol'], `${f}.protocol`, PROTOCOLS);
    if (p['nodePort'] === undefined || p['nodePort'] === 0) {
      if (needsNodePort)
        c.errors.push(
          required(`${f}.nodePort`, `a ${String(type)} Service needs one; standalone mode has no allocator`),
        );
    } else c.port(p['nodePort'], `${f}.nodePort`);
    const tp = p['targetPort'];
    if (typeof tp === 'number') c.port(tp, `${f}.targetPort`);
    else if (
      tp !== undefined &&
      (typeof tp !== 'string' || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(tp) || tp.length > 15)
    )
      c.errors.push(invalid(`${f}.targetPort`, shown(tp), 'must be a port number or an IANA service name'));
  });
}

export function validateService(svc: unknown): FieldError[] {
  const c = new Checker();
  const s = c.obj(svc, '', true);
  if (!s) return c.errors;
  checkMeta(c, s['metadata'], 'dns1035');
  const spec = c.obj(s['spec'], 'spec', true);
  if (!spec) return c.errors;
  const type = spec['type'] ?? 'ClusterIP';
  c.oneOf(type, 'spec.type', SERVICE_TYPES);
  if (type !== 'ExternalName') {
    const cip = spec['clusterIP'];
    if (cip === undefined || cip === null || cip === '')
      c.errors.push(required('spec.clusterIP', 'standalone mode has no API server to allocate one; give the address'));
    else if (cip !== 'None') c.ip(cip, 'spec.clusterIP');
    const ips = c.list(spec['clusterIPs'], 'spec.clusterIPs');
    ips.forEach((ip, i) => (ip === 'None' ? undefined : c.ip(ip, `spec.clusterIPs[${i}]`)));
    if (ips.length > 0 && cip !== undefined && ips[0] !== cip)
      c.errors.push(invalid('spec.clusterIPs[0]', shown(ips[0]), 'must match spec.clusterIP'));
  }
  c.list(spec['ipFamilies'], 'spec.ipFamilies').forEach((f, i) =>
    c.oneOf(f, `spec.ipFamilies[${i}]`, ['IPv4', 'IPv6']),
  );
  checkServicePorts(c, spec, type);
  c.list(spec['externalIPs'], 'spec.externalIPs').forEach((ip, i) => c.ip(ip, `spec.externalIPs[${i}]`));
  c.list(spec['loadBalancerSourceRanges'], 'spec.loadBalancerSourceRanges').forEach((r, i) =>
    c.cidr(typeof r === 'string' ? r.trim() : r, `spec.loadBalancerSourceRanges[${i}]`),
  );
  c.oneOf(spec['externalTrafficPolicy'], 'spec.externalTrafficPolicy', POLICIES);
  c.oneOf(spec['internalTrafficPolicy'], 'spec.internalTrafficPolicy', POLICIES);
  c.oneOf(spec['sessionAffinity'], 'spec.sessionAffinity', ['None', 'ClientIP']);
  const t = c.obj(
    c.obj(spec['sessionAffinityConfig'], 'spec.sessionAffinityConfig')?.['clientIP'],
    'spec.sessionAffinityConfig.clientIP',
  )?.['timeoutSeconds'];
  if (t !== undefined && (typeof t !== 'number' || !Number.isInteger(t) || t < 1 || t > 86400))
    c.errors.push(
      invalid('spec.sessionAffinityConfig.clientIP.timeoutSeconds', shown(t), 'must be between 1 and 86400, inclusive'),
    );
  c.port(spec['healthCheckNodePort'], 'spec.healthCheckNodePort');
  c.str(spec['trafficDistribution'], 'spec.trafficDistribution');
  const ingress = c.list(
    c.obj(c.obj(s['status'], 'status')?.['loadBalancer'], 'status.loadBalancer')?.['ingress'],
    'status.loadBalancer.ingress',
  );
  ingress.forEach((raw, i) => {
    const ing = c.obj(raw, `status.loadBalancer.ingress[${i}]`, true);
    if (ing?.['ip'] !== undefined) c.ip(ing['ip'], `status.loadBalancer.ingress[${i}].ip`);
    c.oneOf(ing?.['ipMode'], `status.loadBalancer.ingress[${i}].ipMode`, ['VIP', 'Proxy']);
  });
  return c.errors;
}

export function validateEndpointSlice(slice: unknown): FieldError[] {
  const c = new Checker();
  const s = c.obj(slice, '', true);
  if (!s) return c.errors;
  checkMeta(c, s['metadata'], 'dns1123subdomain');
  const labels = isObj(s['metadata']) && isObj(s['metadata']['labels']) ? s['metadata']['labels'] : {};
  if (typeof labels[LABEL_SERVICE_NAME] !== 'string' || labels[LABEL_SERVICE_NAME] === '')
    c.errors.push(required(`metadata.labels[${LABEL_SERVICE_NAME}]`, 'names the Service these endpoints belong to'));
  const at = s['addressType'];
  if (at === undefined) c.errors.push(required('addressType', 'one of IPv4, IPv6, FQDN'));
  c.oneOf(at, 'addressType', ['IPv4', 'IPv6', 'FQDN']);
  c.list(s['endpoints'], 'endpoints').forEach((raw, i) => {
    const f = `endpoints[${i}]`;
    const ep = c.obj(raw, f, true);
    if (!ep) return;
    const addrs = c.list(ep['addresses'], `${f}.addresses`);
    if (addrs.length === 0) c.errors.push(required(`${f}.addresses`, 'at least one address is required'));
    addrs.forEach((a, j) => {
      if (at !== 'IPv4' && at !== 'IPv6') return void c.str(a, `${f}.addresses[${j}]`);
      const ip = c.ip(a, `${f}.addresses[${j}]`);
      if (ip && parseIP(ip)!.family !== at)
        c.errors.push(invalid(`${f}.addresses[${j}]`, ip, `must be an ${at} address`));
    });
    const cond = c.obj(ep['conditions'], `${f}.conditions`);
    for (const k of ['ready', 'serving', 'terminating']) c.bool(cond?.[k], `${f}.conditions.${k}`);
    c.str(ep['nodeName'], `${f}.nodeName`);
    c.str(ep['zone'], `${f}.zone`);
    const hints = c.obj(ep['hints'], `${f}.hints`);
    for (const k of ['forZones', 'forNodes'])
      c.list(hints?.[k], `${f}.hints.${k}`).forEach((h, j) =>
        c.str(c.obj(h, `${f}.hints.${k}[${j}]`, true)?.['name'], `${f}.hints.${k}[${j}].name`),
      );
  });
  c.list(s['ports'], 'ports').forEach((raw, i) => {
    const p = c.obj(raw, `ports[${i}]`, true);
    if (!p) return;
    c.str(p['name'], `ports[${i}].name`);
    c.port(p['port'], `ports[${i}].port`);
    c.oneOf(p['protocol'], `ports[${i}].protocol`, PROTOCOLS);
  });
  return c.errors;
}

const ADDRESS_TYPES = ['InternalIP', 'ExternalIP', 'Hostname', 'InternalDNS', 'ExternalDNS'];

export function validateNode(node: unknown): FieldError[] {
  const c = new Checker();
  const n = c.obj(node, '', true);
  if (!n) return c.errors;
  checkMeta(c, n['metadata'], 'dns1123subdomain', true);
  const spec = c.obj(n['spec'], 'spec');
  if (spec?.['podCIDR'] !== undefined && spec['podCIDR'] !== '') c.cidr(spec['podCIDR'], 'spec.podCIDR');
  c.list(spec?.['podCIDRs'], 'spec.podCIDRs').forEach((p, i) => c.cidr(p, `spec.podCIDRs[${i}]`));
  c.list(spec?.['taints'], 'spec.taints').forEach((t, i) =>
    c.str(c.obj(t, `spec.taints[${i}]`, true)?.['key'], `spec.taints[${i}].key`),
  );
  c.list(c.obj(n['status'], 'status')?.['addresses'], 'status.addresses').forEach((raw, i) => {
    const a = c.obj(raw, `status.addresses[${i}]`, true);
    if (!a) return;
    c.oneOf(a['type'], `status.addresses[${i}].type`, ADDRESS_TYPES);
    if (a['type'] === 'InternalIP' || a['type'] === 'ExternalIP') c.ip(a['address'], `status.addresses[${i}].address`);
    else c.str(a['address'], `status.addresses[${i}].address`);
  });
  return c.errors;
}

export function validateServiceCIDR(obj: unknown): FieldError[] {
  const c = new Checker();
  const o = c.obj(obj, '', true);
  if (!o) return c.errors;
  checkMeta(c, o['metadata'], 'dns1123subdomain', true);
  const cidrs = c.list(c.obj(o['spec'], 'spec', true)?.['cidrs'], 'spec.cidrs');
  if (cidrs.length === 0 || cidrs.length > 2)
    c.errors.push(invalid('spec.cidrs', shown(cidrs), 'must hold one CIDR, or two of different families'));
  cidrs.forEach((x, i) => c.cidr(x, `spec.cidrs[${i}]`));
  return c.errors;
}
