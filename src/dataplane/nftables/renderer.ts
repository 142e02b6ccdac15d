// syncProxyRules for nftables: turns a SyncState into one transaction against
// what the table already holds (upstream pkg/proxy/nftables/proxier.go).
//
// Full sync: the static objects are rewritten, every service's chains are
// re-filled, and set/map elements are diffed against a snapshot read back
// from the kernel (or our memory when none is given): only missing or changed
// elements are added (changed = delete + add), leftovers are deleted.
// Partial sync: only the changed services' chains and elements are touched.
// Stale service chains are flushed at once and deleted in a later
// transaction at least STALE_CHAIN_DELAY_MS afterwards (before kernel 6.2 a
// deleted map element can still reference its chain for a moment). Stale
// affinity sets are deleted at once.
//
// Memory is updated as the transaction is built. If the transaction fails the
// caller must call reset(); the next render is then full.
import { flat } from '../../core/flat.js';
import type { DataplaneConfig, ServicePort, SyncState } from '../../core/types.js';
import * as N from './names.js';
import { elementKeyText, type Chain, type Element, type NftObject, type NftSet, type Verb } from './objects.js';
import { renderServicePort, type EndpointMapContent, type ServicePortObjects } from './serviceport.js';
import { DEFAULT_ENDPOINT_LAYOUT, MANAGED_SETS, makeContext, writeStatic, type EndpointLayout } from './static.js';
import { Transaction } from './transaction.js';

export const STALE_CHAIN_DELAY_MS = 1000;

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

/**
 * An element we wrote (or found), with the services owning it. Most elements
 * have exactly one owner, so a single key is kept as a string and a Set only
 * for shared ones (memory: ~20k elements at 10k Services).
 */
interface Stored {
  el: Element;
  owners: string | Set<string> | null;
}
/** What one service's sync wants, while it is built. */
interface Owned {
  readonly elems: Set<string>;
  readonly chains: Set<string>;
  readonly affinity: Set<string>;
  readonly maps: Set<string>;
}
/** What a service owns between syncs, compact (arrays; one shared empty one). */
interface OwnedStored {
  readonly elems: readonly string[];
  readonly chains: readonly string[];
  readonly affinity: readonly string[];
  readonly maps: readonly string[];
}
const emptyOwned = (): Owned => ({ elems: new Set(), chains: new Set(), affinity: new Set(), maps: new Set() });
const NONE: readonly string[] = Object.freeze([]);
const arr = (s: Set<string>): readonly string[] => (s.size === 0 ? NONE : [...s]);
const compact = (o: Owned): OwnedStored => ({
  elems: arr(o.elems),
  chains: arr(o.chains),
  affinity: arr(o.affinity),
  maps: arr(o.maps),
});

function addOwner(s: Stored, owner: string): void {
  if (s.owners === null) s.owners = owner;
  else if (typeof s.owners === 'string') {
    if (s.owners !== owner) s.owners = new Set([s.owners, owner]);
  } else s.owners.add(owner);
}

/** Remove one owner; true when none is left. */
function removeOwner(s: Stored, owner: string): boolean {
  if (typeof s.owners === 'string') {
    if (s.owners === owner) s.owners = null;
  } else if (s.owners !== null) {
    s.owners.delete(owner);
    if (s.owners.size === 0) s.owners = null;
  }
  return s.owners === null;
}

const STATIC_OWNER = '';
// Flat: the key is kept (storage, owned lists) for as long as its element lives.
const id = (set: string, key: readonly string[]) => flat(`${set}\u0000${elementKeyText(key)}`);
const valueText = (e: Element) => (e.value ?? []).join(' . ');

export class NftablesRenderer {
  private valid = false;
  private initialized = false;
  private storage = new Map<string, Stored>();
  private owned = new Map<string, OwnedStored>();
  private chainOwner = new Map<string, string>();
  /** Service chains present in the table, active or stale. */
  private tableChains = new Set<string>();
  private tableAffinitySets = new Set<string>();
  /** 'maps' layout: endpoint maps present in the table, and the elements last written to each. */
  private tableEndpointMaps = new Set<string>();
  private mapText = new Map<string, string>();
  private readonly staleChains = new Map<string, number>();
  /** Rules last written to each service chain; partial syncs skip chains whose rules are unchanged. */
  private chainText = new Map<string, string>();
  /** staticInputs() of the last full sync. */
  private lastStatic = '';

  constructor(
    private readonly config: DataplaneConfig,
    private readonly layout: EndpointLayout = DEFAULT_ENDPOINT_LAYOUT,
  ) {}

  /**
   * True when the next render will be full and wants a kernel snapshot: on
   * request, after a failure, and when an input of the static rules (the
   * ServiceCIDRs, the node IP) changed, since partial syncs never touch them.
   */
  needsFullSync(state: SyncState): boolean {
    return state.fullSync || !this.valid || staticInputs(state, this.config.family) !== this.lastStatic;
  }

  /** Forget what the table holds (after a failed transaction). */
  reset(): void {
    this.valid = false;
  }

  /** Stale chains waiting for deletion, with the time they were flushed. */
  pendingStaleChains(): ReadonlyMap<string, number> {
    return this.staleChains;
  }

  render(state: SyncState, now: number, snapshot: KernelSnapshot | null = null): RenderResult {
    const full = this.needsFullSync(state);
    const ctx = makeContext(this.config, state.node.nodeIPs[this.config.family], this.layout);
    const tx = new Transaction(ctx.ipX);
    const ops = new OpList();
    let npIPs: string[] | null = null;
    if (full) {
      npIPs = writeStatic(tx, ctx, {
        config: this.config,
        serviceCIDRs: state.serviceCIDRs,
        recreateBaseChains: !this.initialized,
      });
      this.lastStatic = staticInputs(state, this.config.family);
      this.initialized = true;
      if (snapshot !== null || !this.valid) this.loadSnapshot(snapshot ?? EMPTY_SNAPSHOT);
    }
    const byService = groupByService(state, full ? null : state.changedServices);
    const rendered = new Map<string, ServicePortObjects[]>();
    for (const [key, ports] of byService) {
      rendered.set(
        key,
        ports.map((sp) => renderServicePort(ctx, sp, state.categorized.get(sp.key))),
      );
    }
    // Chains deleted now: stale for long enough and not wanted again.
    const wanted = new Set<string>();
    for (const objs of rendered.values()) for (const o of objs) for (const c of o.chains) wanted.add(c.name);
    for (const [chain, since] of this.staleChains) {
      if (now - since < STALE_CHAIN_DELAY_MS) continue;
      this.staleChains.delete(chain);
      if (wanted.has(chain) || this.chainOwner.has(chain) || !this.tableChains.has(chain)) continue;
      ops.push('delete', { kind: 'chain', name: chain });
      this.tableChains.delete(chain);
      this.chainText.delete(chain);
    }
    if (full) this.syncAll(ops, rendered, npIPs, now);
    else for (const [key, objs] of rendered) this.syncService(ops, key, objs, now);
    ops.flushInto(tx);
    this.valid = true;
    return {
      tx,
      partial: !full,
      counters: {
        nftables_operations: tx.numOperations,
        nftables_service_chains: this.chainOwner.size,
        nftables_elements: this.storage.size,
      },
    };
  }

  private loadSnapshot(s: KernelSnapshot): void {
    this.storage = new Map();
    for (const [set, els] of s.elements) {
      if (!MANAGED_SETS.has(set)) continue;
      for (const e of els) this.storage.set(id(set, e.key), { el: e, owners: null });
    }
    this.tableChains = new Set(s.chains.filter(N.isServiceChainName));
    this.tableAffinitySets = new Set(s.sets.filter(N.isAffinitySetName));
    this.tableEndpointMaps = new Set(s.sets.filter(N.isEndpointsMapName));
    this.owned = new Map();
    this.chainOwner = new Map();
    this.chainText = new Map();
  }

  /** Full sync: every service, elements diffed against everything stored. */
  private syncAll(ops: OpList, rendered: Map<string, ServicePortObjects[]>, npIPs: string[] | null, now: number): void {
    const prev = this.storage;
    this.storage = new Map();
    this.owned = new Map();
    this.chainOwner = new Map();
    this.chainText = new Map();
    this.mapText = new Map();
    const staleAffinity = new Set(this.tableAffinitySets);
    const staleMaps = new Set(this.tableEndpointMaps);
    for (const [key, objs] of rendered) {
      const own = this.writeChains(ops, key, objs);
      for (const a of own.affinity) staleAffinity.delete(a);
      for (const m of own.maps) staleMaps.delete(m);
      for (const o of objs) for (const e of o.elements) this.want(ops, prev, key, e, own);
      this.owned.set(key, compact(own));
    }
    if (npIPs !== null) {
      for (const ip of npIPs)
        this.want(ops, prev, STATIC_OWNER, { kind: 'element', set: N.NODEPORT_IPS_SET, key: [ip] }, null);
    }
    for (const [k, s] of prev) {
      if (this.storage.has(k)) continue;
      if (npIPs === null && s.el.set === N.NODEPORT_IPS_SET) continue; // the set itself was deleted
      ops.push('delete', { kind: 'element', set: s.el.set, key: s.el.key });
    }
    for (const chain of this.tableChains) {
      if (this.chainOwner.has(chain) || this.staleChains.has(chain)) continue;
      this.markStale(ops, chain, now);
    }
    for (const a of staleAffinity) this.deleteAffinitySet(ops, a);
    for (const m of staleMaps) this.deleteEndpointsMap(ops, m);
  }

  /** Partial sync of one service: rewrite its chains, diff its elements. */
  private syncService(ops: OpList, key: string, objs: ServicePortObjects[], now: number): void {
    const old = this.owned.get(key);
    if (old) for (const c of old.chains) this.chainOwner.delete(c);
    this.owned.delete(key);
    const own = objs.length > 0 ? this.writeChains(ops, key, objs, true) : emptyOwned();
    for (const o of objs) for (const e of o.elements) this.want(ops, this.storage, key, e, own);
    if (objs.length > 0) this.owned.set(key, compact(own));
    if (old) {
      for (const k of old.elems) {
        if (own.elems.has(k)) continue;
        const s = this.storage.get(k);
        if (!s) continue;
        if (removeOwner(s, key)) {
          this.storage.delete(k);
          ops.push('delete', { kind: 'element', set: s.el.set, key: s.el.key });
        }
      }
      for (const c of old.chains) if (!own.chains.has(c)) this.markStale(ops, c, now);
      for (const a of old.affinity) if (!own.affinity.has(a)) this.deleteAffinitySet(ops, a);
      for (const m of old.maps) if (!own.maps.has(m)) this.deleteEndpointsMap(ops, m);
    }
  }

  /**
   * ensureChain (add + flush) and the rules of every chain of one service.
   * With skipUnchanged (partial syncs), a chain whose rules are exactly what
   * we last wrote is left alone: an endpoint change then rewrites only the
   * policy chain, not the external/firewall chains.
   */
  private writeChains(ops: OpList, key: string, objs: ServicePortObjects[], skipUnchanged = false): Owned {
    const own = emptyOwned();
    const skip = new Set<string>();
    for (const o of objs) {
      for (const m of o.endpointMaps) {
        own.maps.add(m.map.name);
        this.writeEndpointsMap(ops, m, skipUnchanged);
      }
      for (const s of o.affinitySets) {
        ops.push('add', s, 'sets');
        own.affinity.add(s.name);
        this.tableAffinitySets.add(s.name);
      }
      for (const c of o.chains) {
        const text = c.rules.map((r) => `${r.rule}\t${r.comment ?? ''}`).join('\n');
        own.chains.add(c.name);
        this.chainOwner.set(c.name, key);
        if (
          skipUnchanged &&
          this.chainText.get(c.name) === text &&
          this.tableChains.has(c.name) &&
          !this.staleChains.has(c.name)
        ) {
          skip.add(c.name);
          continue;
        }
        this.chainText.set(c.name, text);
        const chain: Chain = { kind: 'chain', name: c.name };
        ops.push('add', chain, 'chains').push('flush', chain, 'chains');
        this.tableChains.add(c.name);
        this.staleChains.delete(c.name);
      }
    }
    for (const o of objs)
      for (const c of o.chains) if (!skip.has(c.name)) for (const r of c.rules) ops.push('add', r, 'rules');
    return own;
  }

  /** ensureElem: add if missing, delete + add if the value changed, else nothing. */
  private want(ops: OpList, current: Map<string, Stored>, owner: string, e: Element, own: Owned | null): void {
    const k = id(e.set, e.key);
    own?.elems.add(k);
    const mine = this.storage.get(k);
    if (mine) {
      // Already written in this sync (shared clusterIP, hairpin, or a conflict).
      if (valueText(mine.el) !== valueText(e)) {
        ops.push('delete', { kind: 'element', set: e.set, key: e.key }, 'elements').push('add', e, 'elements');
        mine.el = e;
      }
      addOwner(mine, owner);
      return;
    }
    const cur = current.get(k);
    if (!cur || valueText(cur.el) !== valueText(e)) {
      if (cur) ops.push('delete', { kind: 'element', set: e.set, key: e.key }, 'elements');
      ops.push('add', e, 'elements');
    }
    this.storage.set(k, { el: e, owners: owner });
  }

  /**
   * A 'maps'-layout endpoint map is replaced as a whole: created if absent,
   * else flushed, then every interval added, all in one batch (so no packet
   * sees it half-filled). Element-only: no rule or chain is touched.
   */
  private writeEndpointsMap(ops: OpList, m: EndpointMapContent, skipUnchanged: boolean): void {
    const name = m.map.name;
    let text = '';
    for (const e of m.elements) text += `${e.key[0]!}=${valueText(e)},`;
    const present = this.tableEndpointMaps.has(name);
    if (skipUnchanged && present && this.mapText.get(name) === text) return;
    this.mapText.set(name, text);
    if (present) ops.push('flush', m.map, 'sets');
    else ops.push('add', m.map, 'sets');
    this.tableEndpointMaps.add(name);
    for (const e of m.elements) ops.push('add', e, 'elements');
  }

  /** After the chains that used it were flushed (same batch, 'late'). */
  private deleteEndpointsMap(ops: OpList, name: string): void {
    if (!this.tableEndpointMaps.has(name)) return;
    ops.push('delete', { kind: 'map', name, type: '' }, 'late');
    this.tableEndpointMaps.delete(name);
    this.mapText.delete(name);
  }

  private markStale(ops: OpList, chain: string, now: number): void {
    if (!this.tableChains.has(chain) || this.chainOwner.has(chain)) return;
    ops.push('flush', { kind: 'chain', name: chain });
    this.chainText.delete(chain);
    if (!this.staleChains.has(chain)) this.staleChains.set(chain, now);
  }

  private deleteAffinitySet(ops: OpList, name: string): void {
    if (!this.tableAffinitySets.has(name)) return;
    const s: NftSet = { kind: 'set', name, type: 'ipv4_addr' };
    ops.push('delete', s, 'late');
    this.tableAffinitySets.delete(name);
  }
}

type Section = 'sets' | 'chains' | 'rules' | 'elements' | 'stale' | 'late';
const ORDER: readonly Section[] = ['sets', 'chains', 'rules', 'elements', 'stale', 'late'];

/**
 * Operations grouped so that references resolve inside one kernel batch:
 * sets and chains exist before rules and elements point at them; stale
 * flushes and element deletes come after; affinity sets are deleted last,
 * once no rule refers to them.
 */
class OpList {
  private readonly sections = new Map<Section, Array<[Verb, NftObject]>>(ORDER.map((s) => [s, []]));

  push(verb: Verb, o: NftObject, section: Section = defaultSection(verb, o)): this {
    this.sections.get(section)!.push([verb, o]);
    return this;
  }

  flushInto(tx: Transaction): void {
    for (const s of ORDER) {
      for (const [verb, o] of this.sections.get(s)!) {
        if (verb === 'add') tx.add(o);
        else if (verb === 'delete') tx.delete(o);
        else tx.flush(o);
      }
    }
  }
}

function defaultSection(verb: Verb, o: NftObject): Section {
  if (o.kind === 'chain') return verb === 'delete' ? 'chains' : 'stale';
  if (o.kind === 'element') return verb === 'add' ? 'elements' : 'stale';
  return 'late';
}

function staticInputs(state: SyncState, family: DataplaneConfig['family']): string {
  return JSON.stringify([state.serviceCIDRs, state.node.nodeIPs[family] ?? '']);
}

/** Service ports grouped by service key; only the given keys when `only` is set (deleted services map to []). */
function groupByService(state: SyncState, only: ReadonlySet<string> | null): Map<string, ServicePort[]> {
  const out = new Map<string, ServicePort[]>();
  if (only !== null) for (const k of only) out.set(k, []);
  for (const sp of state.services.values()) {
    if (only !== null && !only.has(sp.serviceKey)) continue;
    let list = out.get(sp.serviceKey);
    if (!list) out.set(sp.serviceKey, (list = []));
    list.push(sp);
  }
  return out;
}
