// What the userspace mode needs for one SyncState: which listeners (one per
// service port and endpoint set) must exist with which endpoints, and where
// each portal (ClusterIP, externalIPs, LB VIPs, NodePort) sends new flows.
// Pure, per service port (planServicePort, which the driver asks per Service)
// or for the whole state (planUserspace); the platform side opens the
// listeners and rules.ts writes the redirect elements.
//
// A listener cannot learn which address a redirected flow was sent to (Node
// has no SO_ORIGINAL_DST), so traffic that must use a different endpoint set
// gets a different listener: internal traffic (ClusterIP) uses the local set
// under internalTrafficPolicy Local, external traffic (NodePort, externalIPs,
// LB VIPs) under externalTrafficPolicy Local, everything else the cluster set.
// Two portals that use the same set share one listener.
import type { CategorizedEndpoints, Endpoint, Protocol, ServicePort, SyncState } from '../../core/types.js';

export type EndpointSetKind = 'cluster' | 'local';

export interface ListenerSpec {
  /** `${servicePortKey}/${protocol}/${set}`: stable across syncs, so the listener (and its port) survives endpoint changes. */
  readonly key: string;
  readonly servicePortKey: string;
  readonly serviceKey: string;
  readonly protocol: 'TCP' | 'UDP';
  readonly set: EndpointSetKind;
  /** Non-empty; sorted by key (SyncState order). */
  readonly endpoints: readonly Endpoint[];
  /** ClientIP affinity timeout; 0 = none. */
  readonly stickyMs: number;
}

/** Where new flows to a portal go: a listener, or refused (no endpoints) / dropped (none under a Local policy). */
export type PortalTarget =
  { readonly kind: 'listener'; readonly listener: string } | { readonly kind: 'reject' } | { readonly kind: 'drop' };

export interface PortalSpec {
  readonly servicePortKey: string;
  readonly protocol: 'TCP' | 'UDP';
  readonly port: number;
  readonly clusterIP: string;
  readonly internal: PortalTarget;
  /** externalIPs then LB VIPs (ipMode VIP), this family only. */
  readonly externalIPs: readonly string[];
  /** 0 when none. */
  readonly nodePort: number;
  /** Target of externalIPs, LB VIPs and the NodePort; null when the port is not externally accessible. */
  readonly external: PortalTarget | null;
}

export interface UserspacePlan {
  readonly listeners: ReadonlyMap<string, ListenerSpec>;
  readonly portals: readonly PortalSpec[];
  /** Service ports this mode cannot serve, with the reason (e.g. SCTP: Node has no SCTP sockets). */
  readonly skipped: ReadonlyArray<{ readonly servicePortKey: string; readonly reason: string }>;
}

export function listenerKey(spKey: string, protocol: Protocol, set: EndpointSetKind): string {
  return `${spKey}/${protocol}/${set}`;
}

/** What one service port needs: its listeners (0-2) and its portal; or why it cannot be served. */
export type ServicePortPlan =
  | { readonly listeners: readonly ListenerSpec[]; readonly portal: PortalSpec; readonly skipped?: undefined }
  | { readonly skipped: string };

/** Build the plan. Never throws on odd input; unsupported ports land in `skipped`. */
export function planUserspace(state: SyncState): UserspacePlan {
  const listeners = new Map<string, ListenerSpec>();
  const portals: PortalSpec[] = [];
  const skipped: Array<{ servicePortKey: string; reason: string }> = [];
  for (const [key, sp] of state.services) {
    const p = planServicePort(sp, state.categorized.get(key));
    if (p.skipped !== undefined) {
      skipped.push({ servicePortKey: key, reason: p.skipped });
      continue;
    }
    for (const l of p.listeners) listeners.set(l.key, l);
    portals.push(p.portal);
  }
  return { listeners, portals, skipped };
}

/** One service port's part of the plan (the driver asks per Service, planUserspace for all). */
export function planServicePort(sp: ServicePort, cat: CategorizedEndpoints | undefined): ServicePortPlan {
  if (sp.protocol !== 'TCP' && sp.protocol !== 'UDP')
    return { skipped: `protocol ${sp.protocol} is not supported by the userspace relay` };
  const listeners: ListenerSpec[] = [];
  const internal = portalTarget(sp, sp.protocol, cat, sp.internalPolicyLocal, listeners);
  // The same policy means the same endpoint set, hence the same target (and listener).
  const external = !sp.externallyAccessible
    ? null
    : sp.externalPolicyLocal === sp.internalPolicyLocal
      ? internal
      : portalTarget(sp, sp.protocol, cat, sp.externalPolicyLocal, listeners);
  const portal: PortalSpec = {
    servicePortKey: sp.key,
    protocol: sp.protocol,
    port: sp.port,
    clusterIP: sp.clusterIP,
    internal,
    externalIPs:
      sp.loadBalancerVIPs.length === 0
        ? sp.externalIPs
        : sp.externalIPs.length === 0
          ? sp.loadBalancerVIPs
          : [...sp.externalIPs, ...sp.loadBalancerVIPs],
    nodePort: sp.nodePort,
    external,
  };
  return { listeners, portal };
}

const REJECT: PortalTarget = Object.freeze({ kind: 'reject' });
const DROP: PortalTarget = Object.freeze({ kind: 'drop' });

/** Where the portals of one traffic policy send new flows; a listener target adds its listener to `listeners`. */
function portalTarget(
  sp: ServicePort,
  protocol: 'TCP' | 'UDP',
  cat: CategorizedEndpoints | undefined,
  local: boolean,
  listeners: ListenerSpec[],
): PortalTarget {
  if (!(cat?.hasAnyEndpoints ?? false)) return REJECT;
  const eps = (local ? cat?.localEndpoints : cat?.clusterEndpoints) ?? [];
  if (eps.length === 0) return local ? DROP : REJECT;
  const spec = listenerFor(sp, protocol, local ? 'local' : 'cluster', eps);
  listeners.push(spec);
  return { kind: 'listener', listener: spec.key };
}

function listenerFor(
  sp: ServicePort,
  protocol: 'TCP' | 'UDP',
  set: EndpointSetKind,
  endpoints: readonly Endpoint[],
): ListenerSpec {
  return {
    key: listenerKey(sp.key, protocol, set),
    servicePortKey: sp.key,
    serviceKey: sp.serviceKey,
    protocol,
    set,
    endpoints,
    stickyMs: sp.stickyMaxAgeSeconds * 1000,
  };
}
