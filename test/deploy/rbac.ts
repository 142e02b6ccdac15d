// RBAC arithmetic for the deploy tests: turn an API server's request log into
// the (apiGroup, resource, verb) triples an authorizer would check, as the
// API server's RequestInfoResolver does, and expand a ClusterRole's rules into
// the same triples.

export interface RequestRecord {
  readonly method: string;
  readonly path: string;
  readonly query: Readonly<Record<string, string>>;
}

/** "group/resource:verb"; the core group is "". */
export type Permission = string;

export function permission(group: string, resource: string, verb: string): Permission {
  return `${group}/${resource}:${verb}`;
}

const CORE = /^\/api\/v1\/(?:namespaces\/([^/]+)\/)?([^/]+)(?:\/([^/]+))?(?:\/([^/]+))?$/;
const GROUP = /^\/apis\/([^/]+)\/[^/]+\/(?:namespaces\/([^/]+)\/)?([^/]+)(?:\/([^/]+))?(?:\/([^/]+))?$/;

/**
 * The permission one request needs, or null for a non-resource URL (discovery,
 * /version), which every authenticated user may GET.
 */
export function requestPermission(r: RequestRecord): Permission | null {
  let group: string;
  let resource: string;
  let name: string | undefined;
  let sub: string | undefined;
  const core = CORE.exec(r.path);
  const grp = core ? null : GROUP.exec(r.path);
  if (core) {
    [group, resource, name, sub] = ['', core[2]!, core[3], core[4]];
  } else if (grp) {
    [group, resource, name, sub] = [grp[1]!, grp[3]!, grp[4], grp[5]];
  } else {
    return null;
  }
  const watch = r.query['watch'] === 'true' || r.query['watch'] === '1';
  const verb = verbOf(r.method, name !== undefined, watch);
  return permission(group, sub ? `${resource}/${sub}` : resource, verb);
}

function verbOf(method: string, named: boolean, watch: boolean): string {
  switch (method.toUpperCase()) {
    case 'GET':
    case 'HEAD':
      return watch ? 'watch' : named ? 'get' : 'list';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return named ? 'delete' : 'deletecollection';
    default:
      return method.toLowerCase();
  }
}

export interface PolicyRule {
  readonly apiGroups?: readonly string[];
  readonly resources?: readonly string[];
  readonly verbs: readonly string[];
  readonly resourceNames?: readonly string[];
  readonly nonResourceURLs?: readonly string[];
}

/** Every permission a ClusterRole grants. Wildcards are refused: a role for the proxy must list what it grants. */
export function grantedPermissions(rules: readonly PolicyRule[]): Set<Permission> {
  const out = new Set<Permission>();
  for (const rule of rules) {
    const all = [...(rule.apiGroups ?? []), ...(rule.resources ?? []), ...rule.verbs];
    if (all.includes('*')) throw new Error(`wildcard in rule ${JSON.stringify(rule)}`);
    if (rule.resourceNames?.length || rule.nonResourceURLs?.length)
      throw new Error(`unexpected narrowing in rule ${JSON.stringify(rule)}`);
    for (const g of rule.apiGroups ?? [])
      for (const r of rule.resources ?? []) for (const v of rule.verbs) out.add(permission(g, r, v));
  }
  return out;
}
