// The proxy's status as one JSON-safe document: what /statusz?format=json
// serves, what its HTML page and `kube-proxy-ts status` render. Built from
// the last SyncState each family's datapath accepted (so it shows what is
// programmed, not what is pending) and the sync history.
//
// The document is the wire format between the server and the `status`
// command: add fields freely, never rename or remove one.

import { explainEndpointUse, serviceAddresses, SKIP_REASON_TEXT, type ServiceAddress } from '../core/endpointuse.js';
import { LABEL_TOPOLOGY_ZONE } from '../core/api.js';
import type { IPFamily, NodeInfo, SyncState } from '../core/types.js';
import { servicePortNameString } from '../core/types.js';
import type { FamilySyncStatus } from './syncstatus.js';
import { isCanaryServiceKey } from '../core/canary.js';
import { joinHostPort } from '../core/ip.js';
import type { CanaryStatus } from './canary.js';

export interface StatusViewInput {
  readonly mode: string;
  readonly version: string;
  /** Epoch ms of the process start. */
  readonly startTime: number;
  /** Epoch ms. */
  readonly now: number;
  readonly node: NodeInfo;
  /** Services and EndpointSlices are both listed (nothing is programmed before). */
  readonly initialized: boolean;
  readonly syncs: readonly FamilySyncStatus[];
  /** The last accepted SyncState per family (null before its first sync). */
  readonly states: ReadonlyMap<IPFamily, SyncState | null>;
  /** The datapath canary of each family that has one (--datapath-canary). */
  readonly canaries?: ReadonlyMap<IPFamily, CanaryStatus>;
}

/** The datapath canary of a family: is traffic getting through what the proxy programmed. */
export interface CanaryDoc {
  /** The canary's ClusterIP:port and its endpoint ip:port (the proxy's listener). */
  readonly service: string;
  readonly endpoint: string;
  readonly healthy: boolean;
  readonly reason: string;
  readonly since: string | null;
  readonly consecutiveFailures: number;
  readonly probes: number;
  readonly failures: number;
  /** Probes that overlapped a sync, started late (starved loop) or found no route: not counted either way. */
  readonly discarded: number;
  /** The last probe found no route from the node to the canary's ClusterIP, so the canary cannot see anything. */
  readonly noRoute: boolean;
  readonly lastFailure: { readonly time: string; readonly error: string } | null;
}

export interface FamilyStatusDoc {
  readonly family: IPFamily;
  readonly lastSync: { readonly time: string; readonly durationSeconds: number; readonly full: boolean } | null;
  readonly lastError: { readonly time: string; readonly message: string } | null;
  readonly failuresSinceSuccess: number;
  readonly servicePorts: number;
  /** Repairs after another actor changed the datapath, and the last one (reason: a stable code). */
  readonly repairs: number;
  readonly lastRepair: {
    readonly time: string;
    readonly reason: string;
    readonly detail: string;
    readonly seconds: number;
  } | null;
  /** null when the family has no canary (turned off, or not in this mode). */
  readonly canary?: CanaryDoc | null;
}

export interface EndpointDoc {
  readonly endpoint: string;
  readonly node: string;
  readonly zone: string;
  readonly local: boolean;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
  readonly usedFor: readonly string[];
  /** reason: stable code; text: its words; detail: the facts behind it. */
  readonly skipped: ReadonlyArray<{ traffic: string; reason: string; text: string; detail: string }>;
}

export interface ServicePortDoc {
  /** "namespace/name:port" (upstream ServicePortName). */
  readonly servicePort: string;
  readonly namespace: string;
  readonly name: string;
  readonly port: string;
  readonly family: IPFamily;
  readonly protocol: string;
  readonly addresses: readonly ServiceAddress[];
  readonly traffic: ReadonlyArray<{
    traffic: string;
    policy: string;
    verdict: string;
    endpoints: readonly string[];
    detail: string;
  }>;
  readonly sessionAffinitySeconds: number;
  readonly loadBalancerSourceRanges: readonly string[];
  /** '' | 'PreferSameZone' | 'PreferSameNode': topology hints in force for cluster-policy traffic. */
  readonly topology: string;
  readonly endpoints: readonly EndpointDoc[];
}

export interface StatusDoc {
  readonly mode: string;
  readonly version: string;
  readonly startTime: string;
  readonly uptimeSeconds: number;
  readonly now: string;
  readonly node: {
    readonly name: string;
    readonly zone: string;
    readonly ips: Readonly<Partial<Record<IPFamily, string>>>;
    readonly podCIDRs: readonly string[];
  };
  readonly initialized: boolean;
  readonly families: readonly FamilyStatusDoc[];
  readonly servicePorts: readonly ServicePortDoc[];
}

const iso = (ms: number) => new Date(ms).toISOString();
const roundMicros = (seconds: number) => Math.round(seconds * 1e6) / 1e6;

function canaryDoc(c: CanaryStatus | undefined, state: SyncState | null): CanaryDoc | null {
  if (!c) return null;
  const sp = [...(state?.services.values() ?? [])].find((x) => isCanaryServiceKey(x.serviceKey));
  const ep = sp ? state?.endpoints.get(sp.key)?.[0] : undefined;
  return {
    service: sp ? joinHostPort(sp.clusterIP, sp.port) : '',
    endpoint: ep?.key ?? '',
    healthy: c.healthy,
    reason: c.reason,
    since: c.since === null ? null : iso(c.since),
    consecutiveFailures: c.consecutiveFailures,
    probes: c.probes,
    failures: c.failures,
    discarded: c.discarded,
    noRoute: c.noRoute,
    lastFailure: c.lastFailure ? { time: iso(c.lastFailure.at), error: c.lastFailure.error } : null,
  };
}

/** User service ports only: the canary is the proxy's own, and shown under its family instead. */
function userPorts(state: SyncState | null): number {
  let n = 0;
  for (const sp of state?.services.values() ?? []) if (!isCanaryServiceKey(sp.serviceKey)) n++;
  return n;
}

function familyDoc(s: FamilySyncStatus, state: SyncState | null, canary: CanaryStatus | undefined): FamilyStatusDoc {
  return {
    family: s.family,
    lastSync: s.lastSync
      ? {
          time: iso(s.lastSync.at),
          durationSeconds: roundMicros(s.lastSync.durationSeconds),
          full: !s.lastSync.partial,
        }
      : null,
    lastError: s.lastError ? { time: iso(s.lastError.at), message: s.lastError.message } : null,
    failuresSinceSuccess: s.failuresSinceSuccess,
    servicePorts: userPorts(state),
    repairs: s.repairs,
    lastRepair: s.lastRepair
      ? {
          time: iso(s.lastRepair.at),
          reason: s.lastRepair.reason,
          detail: s.lastRepair.detail,
          seconds: roundMicros(s.lastRepair.seconds),
        }
      : null,
    canary: canaryDoc(canary, state),
  };
}

function servicePortDocs(state: SyncState): ServicePortDoc[] {
  const out: ServicePortDoc[] = [];
  for (const [key, sp] of state.services) {
    if (isCanaryServiceKey(sp.serviceKey)) continue;
    const eps = state.endpoints.get(key) ?? [];
    const cat = state.categorized.get(key);
    if (!cat) continue;
    const use = explainEndpointUse(eps, sp, cat, state.node.name, state.node.labels);
    out.push({
      servicePort: servicePortNameString(sp.name),
      namespace: sp.name.namespace,
      name: sp.name.name,
      port: sp.name.port,
      family: sp.family,
      protocol: sp.protocol,
      addresses: serviceAddresses(sp),
      traffic: use.traffic.map((t) => ({
        traffic: t.traffic,
        policy: t.policy,
        verdict: t.verdict,
        endpoints: t.endpoints.map((e) => e.key),
        detail: t.detail,
      })),
      sessionAffinitySeconds: sp.stickyMaxAgeSeconds,
      loadBalancerSourceRanges: sp.loadBalancerSourceRanges,
      topology: use.topology,
      endpoints: use.endpoints.map((u) => ({
        endpoint: u.endpoint.key,
        node: u.endpoint.nodeName,
        zone: u.endpoint.zone,
        local: u.endpoint.isLocal,
        ready: u.endpoint.ready,
        serving: u.endpoint.serving,
        terminating: u.endpoint.terminating,
        usedFor: u.usedFor,
        skipped: u.skipped.map((s) => ({
          traffic: s.traffic,
          reason: s.reason,
          text: SKIP_REASON_TEXT[s.reason],
          detail: s.detail,
        })),
      })),
    });
  }
  return out;
}

export function buildStatusView(input: StatusViewInput): StatusDoc {
  const families = input.syncs.map((s) =>
    familyDoc(s, input.states.get(s.family) ?? null, input.canaries?.get(s.family)),
  );
  const servicePorts = input.syncs
    .flatMap((s) => {
      const st = input.states.get(s.family);
      return st ? servicePortDocs(st) : [];
    })
    .sort((a, b) =>
      a.servicePort === b.servicePort ? a.family.localeCompare(b.family) : a.servicePort < b.servicePort ? -1 : 1,
    );
  return {
    mode: input.mode,
    version: input.version,
    startTime: iso(input.startTime),
    uptimeSeconds: Math.max(0, Math.floor((input.now - input.startTime) / 1000)),
    now: iso(input.now),
    node: {
      name: input.node.name,
      zone: input.node.labels[LABEL_TOPOLOGY_ZONE] ?? '',
      ips: input.node.nodeIPs,
      podCIDRs: input.node.podCIDRs,
    },
    initialized: input.initialized,
    families,
    servicePorts,
  };
}
