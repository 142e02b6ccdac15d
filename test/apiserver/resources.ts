// The resources the test API server serves, with the REST facts the real one
// has for them: group/version path, kind, scope, the field labels its field
// selector accepts, and whether `status` is a separate subresource.

export interface ResourceDef {
  /** Plural resource name as it appears in the URL. */
  readonly plural: string;
  readonly kind: string;
  /** "v1" or "group/version". */
  readonly apiVersion: string;
  /** "/api/v1" or "/apis/<group>/<version>". */
  readonly prefix: string;
  readonly namespaced: boolean;
  /** Field labels the field selector accepts (metadata.name/namespace always). */
  readonly fields: readonly string[];
  /** Writes to the main resource keep the stored status; /status writes only status. */
  readonly statusSubresource: boolean;
}

const META_FIELDS = ['metadata.name', 'metadata.namespace'];

export const RESOURCES: readonly ResourceDef[] = [
  {
    plural: 'services',
    kind: 'Service',
    apiVersion: 'v1',
    prefix: '/api/v1',
    namespaced: true,
    fields: [...META_FIELDS, 'spec.clusterIP', 'spec.type'],
    statusSubresource: true,
  },
  {
    plural: 'endpointslices',
    kind: 'EndpointSlice',
    apiVersion: 'discovery.k8s.io/v1',
    prefix: '/apis/discovery.k8s.io/v1',
    namespaced: true,
    fields: [...META_FIELDS, 'addressType'],
    statusSubresource: false,
  },
  {
    plural: 'nodes',
    kind: 'Node',
    apiVersion: 'v1',
    prefix: '/api/v1',
    namespaced: false,
    fields: [...META_FIELDS, 'spec.unschedulable'],
    statusSubresource: true,
  },
  {
    plural: 'events',
    kind: 'Event',
    apiVersion: 'events.k8s.io/v1',
    prefix: '/apis/events.k8s.io/v1',
    namespaced: true,
    fields: [...META_FIELDS, 'reason', 'type', 'reportingController', 'regarding.name', 'regarding.kind'],
    statusSubresource: false,
  },
  {
    plural: 'servicecidrs',
    kind: 'ServiceCIDR',
    apiVersion: 'networking.k8s.io/v1',
    prefix: '/apis/networking.k8s.io/v1',
    namespaced: false,
    fields: META_FIELDS,
    statusSubresource: true,
  },
];

export function resourceByPlural(plural: string): ResourceDef | undefined {
  return RESOURCES.find((r) => r.plural === plural);
}

/** The groups (besides core v1) for /apis discovery. */
export function apiGroups(served: readonly ResourceDef[]): Array<{ name: string; version: string }> {
  const out = new Map<string, string>();
  for (const r of served) {
    if (r.prefix === '/api/v1') continue;
    const [group, version] = r.apiVersion.split('/');
    out.set(group!, version!);
  }
  return [...out].map(([name, version]) => ({ name, version }));
}
