// The nftables mode's driver for the one reconciler (src/engine/reconciler.ts):
// what each Service wants in the `kube-proxy` table, as keyed objects, and
// the transaction that carries out the reconciler's operations on them
// (upstream pkg/proxy/nftables/proxier.go syncProxyRules).
//
// Objects (NftKind), their key and their value:
// - 'set': an affinity set, by name; the set's definition;
// - 'map': a 'maps'-layout endpoint map, by name; the text of its whole
//   element list (put = create or flush, then add every element);
// - 'chain': a service chain, by name; the text of its rules (put = add,
//   flush, add the rules; a chain read back from the kernel has no known
//   rules, so it is rewritten);
// - 'element': an element of a shared set or map (MANAGED_SETS), by set and
//   key; the element (a changed value is delete + add).
// Owners are Service keys, plus NODE_OWNER for the nodeport-ips elements,
// which only full syncs list.
//
// The static part of the table (static.ts) stays outside the reconciler: a
// full sync rewrites it whole. A full sync is forced when an input of it
// (the ServiceCIDRs, the node IP) changed, since partial syncs never touch it.
// Deleted service chains are flushed at once and deleted by a later sync at
// least STALE_CHAIN_DELAY_MS afterwards (translate.ts).
import type { ObjectDriver, ObjectSpec, Keyed } from '../../core/objects.js';
import type { DataplaneConfig, ServicePort, SyncState } from '../../core/types.js';
import { flat } from '../../core/flat.js';
import * as N from './names.js';
import { elementKeyText, type Element, type NftSet, type Rule } from './objects.js';
import { renderServicePort, type EndpointMapContent } from './serviceport.js';
import {
  DEFAULT_ENDPOINT_LAYOUT,
  MANAGED_SETS,
  makeContext,
  nodePortIPs,
  writeStatic,
  type EndpointLayout,
  type RenderContext,
} from './static.js';
import { Transaction } from './transaction.js';
import { translateOpsSteps, type NftOp } from './translate.js';
import { finish, type Steps } from '../../core/steps.js';

/** Services rendered per step of desiredSteps(). */
const STEP_SERVICES = 64;

export { STALE_CHAIN_DELAY_MS } from './translate.js';

export type NftKind = 'set' | 'map' | 'chain' | 'element';
/** A chain's or map's content as text, an element, or an affinity set's definition. */
export type NftValue = string | Element | NftSet;
export type NftObjectOf = Keyed<NftKind, NftValue>;
/** An object of the table as read back (value null: content unknown). */
export interface NftLiveObject {
  readonly kind: NftKind;
  readonly key: string;
  readonly value: NftValue | null;
}

/** What the kernel table holds, read back before a full sync. */
export interface KernelSnapshot {
  readonly chains: readonly string[];
  /** Names of all sets and maps. */
  readonly sets: readonly string[];
  /** Elements of the managed sets and maps (MANAGED_SETS). */
  readonly elements: ReadonlyMap<string, readonly Element[]>;
}

export const EMPTY_SNAPSHOT: KernelSnapshot = { chains: [], sets: [], elements: new Map() };

export interface RenderResult {
  readonly tx: Transaction;
  readonly partial: boolean;
  readonly counters: Readonly<Record<string, number>>;
}

/** Owner of the objects that belong to the node rather than to a Service. */
export const NODE_OWNER = '';

/** Reconciler key of an element: its set and key text. */
export function elementId(set: string, key: readonly string[]): string {
  return flat(`${set}\u0000${elementKeyText(key)}`);
}

function sameFields(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export const NFTABLES_OBJECTS: ObjectSpec<NftKind, NftValue> = {
  // Sets and maps before the chains whose rules name them, chains before the
  // elements that jump to them (translate.ts also keeps every chain before any rule).
  order: ['set', 'map', 'chain', 'element'],
  same(a, b) {
    if (a === b) return true;
    if (typeof a === 'string' || typeof b === 'string') return false;
    // An element is rewritten for its value only, as upstream's ensureElem (a comment is not compared).
    if (a.kind === 'element') return b.kind === 'element' && sameFields(a.value, b.value);
    return (
      b.kind === 'set' &&
      a.type === b.type &&
      a.timeoutSeconds === b.timeoutSeconds &&
      sameFields(a.flags ?? [], b.flags ?? [])
    );
  },
};

const chainText = (rules: readonly Rule[]) => rules.map((r) => `${r.rule}\t${r.comment ?? ''}`).join('\n');
const mapText = (m: EndpointMapContent) =>
  m.elements.map((e) => `${e.key.join(' . ')}=${(e.value ?? []).join(' . ')}`).join(',');

export class NftablesDriver implements ObjectDriver<NftKind, NftValue, SyncState> {
  readonly spec = NFTABLES_OBJECTS;
  /** Rules and endpoint maps rendered by the last desired(), until its transaction is built. */
  private rules = new Map<string, readonly Rule[]>();
  private maps = new Map<string, EndpointMapContent>();
  private ctx: RenderContext | null = null;
  /** Flushed service chains waiting for deletion, with the time they were flushed. */
  private readonly staleChains = new Map<string, number>();
  private initialized = false;
  /** staticInputs() of the last full sync. */
  private lastStatic = '';
  private chains = 0;
  private elements = 0;

  constructor(
    private readonly config: DataplaneConfig,
    private readonly layout: EndpointLayout = DEFAULT_ENDPOINT_LAYOUT,
  ) {}

  /** Whether an input of the static part changed since the last full sync (which then must be full). */
  staticChanged(state: SyncState): boolean {
    return staticInputs(state, this.config.family) !== this.lastStatic;
  }

  /** Stale chains waiting for deletion, with the time they were flushed. */
  pendingStaleChains(): ReadonlyMap<string, number> {
    return this.staleChains;
  }

  /**
   * What each Service wants: every Service on a full sync (and the node's
   * nodeport-ips elements), else the changed ones (a deleted one wants nothing).
   */
  desired(state: SyncState, full: boolean): Array<readonly [string, readonly NftObjectOf[]]> {
    return finish(this.desiredSteps(state, full));
  }

  /** desired() as resumable steps (src/core/steps.ts): one step per STEP_SERVICES Services. */
  *desiredSteps(state: SyncState, full: boolean): Steps<Array<readonly [string, readonly NftObjectOf[]]>> {
    const ctx = makeContext(this.config, state.node.nodeIPs[this.config.family], this.layout);
    this.ctx = ctx;
    this.rules = new Map();
    this.maps = new Map();
    const out: Array<readonly [string, readonly NftObjectOf[]]> = [];
    let n = 0;
    for (const [key, ports] of groupByService(state, full ? null : state.changedServices)) {
      if (++n % STEP_SERVICES === 0) yield;
      const objs: NftObjectOf[] = [];
      // A Service's ports share its ClusterIP element (and may share hairpin elements).
      const seen = ports.length > 1 ? new Set<string>() : null;
      for (const sp of ports) {
        const o = renderServicePort(ctx, sp, state.categorized.get(sp.key));
        for (const s of o.affinitySets) objs.push({ kind: 'set', key: s.name, value: s });
        for (const m of o.endpointMaps) {
          this.maps.set(m.map.name, m);
          objs.push({ kind: 'map', key: m.map.name, value: mapText(m) });
        }
        for (const c of o.chains) {
          this.rules.set(c.name, c.rules);
          objs.push({ kind: 'chain', key: c.name, value: chainText(c.rules) });
        }
        for (const e of o.elements) {
          const id = elementId(e.set, e.key);
          if (seen !== null) {
            if (seen.has(id)) continue;
            seen.add(id);
          }
          objs.push({ kind: 'element', key: id, value: e });
        }
      }
      out.push([key, objs]);
    }
    if (full) {
      const objs: NftObjectOf[] = [];
      for (const ip of nodePortIPs(this.config) ?? []) {
        const e: Element = { kind: 'element', set: N.NODEPORT_IPS_SET, key: [ip] };
        objs.push({ kind: 'element', key: elementId(e.set, e.key), value: e });
      }
      out.push([NODE_OWNER, objs]);
    }
    return out;
  }

  /**
   * The objects of a read-back table that the reconciler manages: service
   * chains, affinity sets and endpoint maps (content unknown) and the
   * elements of the managed sets. Stale chains no longer in the table are
   * forgotten.
   */
  live(s: KernelSnapshot): NftLiveObject[] {
    const out: NftLiveObject[] = [];
    const present = new Set<string>();
    for (const c of s.chains) {
      if (!N.isServiceChainName(c)) continue;
      present.add(c);
      out.push({ kind: 'chain', key: c, value: null });
    }
    for (const name of s.sets) {
      if (N.isAffinitySetName(name)) out.push({ kind: 'set', key: name, value: null });
      else if (N.isEndpointsMapName(name)) out.push({ kind: 'map', key: name, value: null });
    }
    let elements = 0;
    for (const [set, els] of s.elements) {
      if (!MANAGED_SETS.has(set)) continue;
      for (const e of els) out.push({ kind: 'element', key: elementId(set, e.key), value: e });
      elements += els.length;
    }
    for (const c of this.staleChains.keys()) if (!present.has(c)) this.staleChains.delete(c);
    this.chains = present.size;
    this.elements = elements;
    return out;
  }

  /**
   * The transaction for the reconciler's operations on what the last
   * desired() rendered; on a full sync the static part first. `now` ages
   * the stale chains.
   */
  transaction(state: SyncState, ops: readonly NftOp[], full: boolean, now: number): RenderResult {
    return finish(this.transactionSteps(state, ops, full, now));
  }

  /** transaction() as resumable steps (translateOpsSteps). */
  *transactionSteps(state: SyncState, ops: readonly NftOp[], full: boolean, now: number): Steps<RenderResult> {
    const ctx = this.ctx ?? makeContext(this.config, state.node.nodeIPs[this.config.family], this.layout);
    const tx = new Transaction(ctx.ipX);
    let deletedSet: string | null = null;
    if (full) {
      const npIPs = writeStatic(tx, ctx, {
        config: this.config,
        serviceCIDRs: state.serviceCIDRs,
        recreateBaseChains: !this.initialized,
      });
      if (npIPs === null) deletedSet = N.NODEPORT_IPS_SET;
      this.lastStatic = staticInputs(state, this.config.family);
      this.initialized = true;
    }
    yield* translateOpsSteps(tx, ops, { rules: this.rules, maps: this.maps, stale: this.staleChains, now, deletedSet });
    for (const op of ops) {
      if (op.kind !== 'chain' && op.kind !== 'element') continue;
      const d = op.op === 'delete' ? -1 : op.before === undefined ? 1 : 0;
      if (op.kind === 'chain') this.chains += d;
      else this.elements += d;
    }
    this.rules = new Map();
    this.maps = new Map();
    return {
      tx,
      partial: !full,
      counters: {
        nftables_operations: tx.numOperations,
        nftables_service_chains: this.chains,
        nftables_elements: this.elements,
      },
    };
  }
}

function staticInputs(state: SyncState, family: DataplaneConfig['family']): string {
  return JSON.stringify([state.serviceCIDRs, state.node.nodeIPs[family] ?? '']);
}

/** Service ports grouped by service key; only the given keys when `only` is set (deleted services map to []). */
function groupByService(state: SyncState, only: ReadonlySet<string> | null): Map<string, ServicePort[]> {
  const out = new Map<string, ServicePort[]>();
  if (only !== null) for (const k of only) out.set(k, []);
  if (only !== null && state.changedServicePorts) {
    // The engine names the changed ports: a partial sync need not walk every port of the cluster.
    for (const k of state.changedServicePorts) {
      const sp = state.services.get(k);
      if (sp && only.has(sp.serviceKey)) out.get(sp.serviceKey)!.push(sp);
    }
    return out;
  }
  for (const sp of state.services.values()) {
    if (only !== null && !only.has(sp.serviceKey)) continue;
    let list = out.get(sp.serviceKey);
    if (!list) out.set(sp.serviceKey, (list = []));
    list.push(sp);
  }
  return out;
}
