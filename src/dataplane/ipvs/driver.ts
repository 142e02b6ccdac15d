// IpvsDriver: IPVS mode's half of the one reconciler (src/engine/reconciler.ts,
// vocabulary in src/core/objects.ts). Pure: it says which keyed objects
// (objects.ts, IpvsKind) each owner wants, and never what was applied:
//   - the node owner wants every ipset of the family (they exist even empty,
//     because the rules match them);
//   - each Service (its namespacedName) wants the objects of all its ports
//     in this family (renderer.ts). A Service is the owner rather than a port,
//     so a partial sync that finds a changed Service with fewer ports (or
//     none) withdraws the gone ports without remembering them.
// Objects several owners want (a shared member, an address several ports
// use) stay while any does; a virtual server two owners claim (a
// misconfiguration) keeps the first claimant's configuration.
//
// The reconciler's ops are turned into the platform's requests by planOps
// (plan.ts); the rules' restore text comes from which sets have members and
// the wanted `rule` objects (rulesText). A node address change re-renders
// everything (full).
import type { Keyed, ObjectDriver, ObjectSpec } from '../../core/objects.js';
import type { DataplaneConfig, ServicePort, SyncState } from '../../core/types.js';
import { IPSETS, ipsetName } from './ipsets.js';
import { IPVS_KINDS, sameIpvsValue, type IpvsKind, type IpvsObject, type IpvsValue } from './objects.js';
import {
  DEFAULT_IPVS_OPTIONS,
  nodeAddressesOf,
  nodePortIPs,
  renderServicePort,
  validate,
  type IpvsOptions,
  type PortSink,
  type RenderContext,
  type SkippedServicePort,
} from './serviceport.js';
import { renderIpvsRules, type NoNodeAccess } from './rules.js';
import type { IpsetType } from './ipsets.js';

/** The owner of what does not depend on Services (a namespacedName always has a '/'). */
export const NODE_OWNER = 'node';

export const IPVS_SPEC: ObjectSpec<IpvsKind, IpvsValue> = {
  order: IPVS_KINDS,
  same: sameIpvsValue,
  // Two ports claiming one virtual server: the first owner's configuration, as upstream's map would keep.
  merge: (kind, values) => (kind === 'vs' ? values[0]! : values[values.length - 1]!),
};

export interface IpvsRenderInput {
  readonly state: SyncState;
  /** Every owner (true), or only state.changedServices. */
  readonly full: boolean;
  /**
   * This family's addresses on every link except kube-ipvs0 (the node's own
   * addresses, for NodePorts and for not binding a node address). Default:
   * config.localIPs.
   */
  readonly nodeAddresses?: readonly string[];
}

export interface IpvsDesired {
  /** Each listed owner with every object it wants; an empty list withdraws it. */
  readonly owners: Array<readonly [string, IpvsObject[]]>;
  /** Whether every owner is listed: asked for, or forced by a change of the node addresses. */
  readonly full: boolean;
  /** Service ports that could not be rendered (their objects are not wanted). */
  readonly skipped: readonly SkippedServicePort[];
  /**
   * The virtual servers rendered with endpoints that still exist but are not
   * chosen (terminating, not ready), as realServerKeys: the real servers of
   * those drain gracefully, the others are gone.
   */
  readonly lingering: ReadonlyMap<string, ReadonlySet<string>>;
}

export class IpvsDriver implements ObjectDriver<IpvsKind, IpvsValue, SyncState> {
  readonly spec = IPVS_SPEC;
  private lastNode: string | null = null;

  constructor(
    private readonly config: DataplaneConfig,
    private readonly options: IpvsOptions = DEFAULT_IPVS_OPTIONS,
  ) {}

  desired(state: SyncState, full: boolean): Iterable<readonly [string, readonly Keyed<IpvsKind, IpvsValue>[]]> {
    return this.render({ state, full }).owners;
  }

  render(inp: IpvsRenderInput): IpvsDesired {
    const { state } = inp;
    const family = this.config.family;
    const nodeAddrs = nodeAddressesOf(inp.nodeAddresses ?? this.config.localIPs, family);
    const npIPs = nodePortIPs(this.config, nodeAddrs);
    const nodeKey = `${nodeAddrs.join(',')} | ${npIPs.join(',')}`;
    const full = inp.full || nodeKey !== this.lastNode;
    this.lastNode = nodeKey;
    const ctx: RenderContext = {
      family,
      config: this.config,
      scheduler: this.options.scheduler || 'rr',
      nodeAddrs: new Set(nodeAddrs),
      npIPs,
      nodeIP: state.node.nodeIPs[family] ?? null,
    };

    // Each listed Service's sink, in the order its first port comes (the order owners ask in).
    const sinks = new Map<string, PortSink & { ports: number }>();
    const lingering = new Map<string, ReadonlySet<string>>();
    const skipped: SkippedServicePort[] = [];
    const sinkOf = (serviceKey: string) => {
      let s = sinks.get(serviceKey);
      if (!s) sinks.set(serviceKey, (s = { objects: [], lingering, ports: 0 }));
      return s;
    };
    const renderPort = (svc: ServicePort) => {
      const sink = sinkOf(svc.serviceKey);
      const why = validate(svc, family);
      if (why !== null) {
        skipped.push({ key: svc.key, reason: why });
        return;
      }
      sink.ports++;
      renderServicePort(svc, state, ctx, sink);
    };
    if (full) {
      for (const svc of state.services.values()) renderPort(svc);
    } else {
      for (const key of state.changedServices) sinkOf(key);
      if (state.changedServicePorts) {
        for (const k of state.changedServicePorts) {
          const svc = state.services.get(k);
          if (svc) renderPort(svc);
        }
      } else {
        for (const svc of state.services.values()) if (state.changedServices.has(svc.serviceKey)) renderPort(svc);
      }
    }

    const owners: Array<readonly [string, IpvsObject[]]> = [];
    if (full) owners.push([NODE_OWNER, this.nodeObjects()]);
    // Ports of one Service share their ClusterIP: its address and member once.
    for (const [owner, s] of sinks) owners.push([owner, s.ports > 1 ? uniqueObjects(s.objects) : s.objects]);
    return { owners, full, skipped, lingering };
  }

  /**
   * The `iptables-restore --noflush` input (filter, nat): the set-driven
   * rules of the sets with members (`count` of a kind: the reconciler's
   * countOf), and the wanted `rule` objects.
   */
  rulesText(count: (kind: IpvsKind) => number, rules: Iterable<IpvsObject>): string {
    const noNodeAccess: NoNodeAccess[] = [];
    for (const r of rules) if (r.value.t === 'drop') noNodeAccess.push(r.value.rule);
    // Owners ask in the order their Services change: a fixed order keeps an unchanged text unchanged.
    noNodeAccess.sort((a, b) =>
      a.ip < b.ip ? -1 : a.ip > b.ip ? 1 : a.port - b.port || (a.protocol < b.protocol ? -1 : 1),
    );
    return renderIpvsRules({
      config: this.config,
      nonEmpty: new Set(IPSETS.filter((s) => count(s.name) > 0).map((s) => s.name)),
      noNodeAccess,
      randomFully: this.options.randomFully,
    });
  }

  private nodeObjects(): IpvsObject[] {
    const family = this.config.family;
    return IPSETS.map((s) => setObject(ipsetName(s.name, family), s.type));
  }
}

/** The value of a set of each type, shared by every set of it. */
const SET_VALUE: Readonly<Record<IpsetType, IpvsValue>> = Object.fromEntries(
  IPSETS.map((s) => [s.type, Object.freeze({ t: 'set', type: s.type })]),
) as Record<IpsetType, IpvsValue>;

/** The object of one of our sets, as the node owner wants it and as a live one is adopted. */
export function setObject(name: string, type: IpsetType): IpvsObject {
  return { kind: 'set', key: name, value: SET_VALUE[type] };
}

/** The keys of the virtual servers some listed owner wants. */
export function renderedVirtualServers(owners: IpvsDesired['owners']): Set<string> {
  const out = new Set<string>();
  for (const [, objects] of owners) for (const o of objects) if (o.kind === 'vs') out.add(o.key);
  return out;
}

/**
 * Which sets have members, as a bit mask in IPSETS order (`count` of a kind:
 * the reconciler's countOf). The set-driven rules follow it: when it changes
 * across a plan, the rules must be written again.
 */
export function setsWithMembers(count: (kind: IpvsKind) => number): number {
  let mask = 0;
  IPSETS.forEach((s, i) => {
    if (count(s.name) > 0) mask |= 1 << i;
  });
  return mask;
}

function uniqueObjects(objects: IpvsObject[]): IpvsObject[] {
  const seen = new Set<string>();
  return objects.filter((o) => {
    const id = `${o.kind} ${o.key}`;
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}
