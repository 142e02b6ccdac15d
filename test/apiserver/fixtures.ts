// Object fixtures for tests against the test API server (fixed address ranges:
// ClusterIPs in 172.30.0.0/16, pods in 10.180.0.0/16).

import { LABEL_HEADLESS, LABEL_SERVICE_NAME, LABEL_SERVICE_PROXY_NAME } from '../../src/core/api.js';

export function svc(ns: string, name: string, ip: string, extra: { labels?: Record<string, string> } = {}): object {
  return {
    metadata: { namespace: ns, name, ...(extra.labels ? { labels: extra.labels } : {}) },
    spec: {
      type: 'ClusterIP',
      clusterIP: ip,
      clusterIPs: ip === 'None' ? ['None'] : [ip],
      ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }],
    },
  };
}

export function proxyNameSvc(ns: string, name: string, ip: string): object {
  return svc(ns, name, ip, { labels: { [LABEL_SERVICE_PROXY_NAME]: 'other-proxy' } });
}

export function slice(
  ns: string,
  name: string,
  service: string,
  ips: string[],
  extra: { headless?: boolean } = {},
): object {
  return {
    metadata: {
      namespace: ns,
      name,
      labels: { [LABEL_SERVICE_NAME]: service, ...(extra.headless ? { [LABEL_HEADLESS]: '' } : {}) },
    },
    addressType: 'IPv4',
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: 'node-a' })),
    ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
  };
}

export function node(name: string, ip: string): object {
  return {
    metadata: { name, labels: { 'kubernetes.io/hostname': name } },
    spec: { podCIDR: '10.180.0.0/24' },
    status: { addresses: [{ type: 'InternalIP', address: ip }] },
  };
}

export function serviceCIDR(name: string, cidrs: string[]): object {
  return { metadata: { name }, spec: { cidrs } };
}
