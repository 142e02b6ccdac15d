// A faithful in-memory nftables table (knftables Fake). run() applies a
// transaction all-or-nothing with the kernel's refusals that matter to us:
// missing objects, base-chain property changes, set type changes, map
// elements re-added with a different value, deleting chains or sets that
// are still referenced, keys that do not fit the set's type (a prefix only
// in an interval set), and map values that do not fit (a port out of range,
// a verdict nft does not know). One Fake holds one table: the kube-proxy
// table by default, or another of ours (the userspace mode's).
import { ProxyError } from '../../core/errors.js';
import { parseCIDR, parseIP } from '../../core/ip.js';
import { COMMENT_LENGTH_MAX, TABLE_NAME, utf8Length, type NftFamily } from './names.js';
import {
  elementKeyText,
  keyArity,
  operationText,
  type Chain,
  type Element,
  type NftMap,
  type NftSet,
  type Operation,
  type Rule,
  type Table,
} from './objects.js';
import type { KernelSnapshot } from './driver.js';
import type { Transaction } from './transaction.js';

export interface FakeChain {
  readonly chain: Chain;
  readonly rules: Rule[];
}
export interface FakeSet {
  readonly def: NftSet | NftMap;
  readonly elements: Map<string, Element>;
}

interface State {
  table: Table | null;
  chains: Map<string, FakeChain>;
  sets: Map<string, FakeSet>;
}

export class FakeError extends ProxyError {
  constructor(
    readonly op: string,
    readonly reason: 'ENOENT' | 'EEXIST' | 'EBUSY' | 'EINVAL',
    detail: string,
  ) {
    super(reason === 'ENOENT' ? 'KPT_NOT_FOUND' : 'KPT_SYNC_FAILED', `${op}: ${reason}: ${detail}`);
    this.name = 'FakeError';
  }
}

const REF_CHAIN_RE = /\b(?:jump|goto)\s+([A-Za-z0-9_./-]+)/g;
const REF_SET_RE = /@([A-Za-z0-9_./-]+)/g;

function chainRefs(text: string): string[] {
  return [...text.matchAll(REF_CHAIN_RE)].map((m) => m[1]!);
}
function setRefs(text: string): string[] {
  return [...text.matchAll(REF_SET_RE)].map((m) => m[1]!);
}

export class Fake {
  private state: State = { table: null, chains: new Map(), sets: new Map() };
  /** The last transaction that was run (successfully or not). */
  lastTransaction: Transaction | null = null;

  constructor(
    readonly family: NftFamily,
    readonly tableName: string = TABLE_NAME,
  ) {}

  get table(): Table | null {
    return this.state.table;
  }
  get chains(): ReadonlyMap<string, FakeChain> {
    return this.state.chains;
  }
  get sets(): ReadonlyMap<string, FakeSet> {
    return this.state.sets;
  }

  /** Apply the transaction atomically; on any error nothing changes. */
  run(tx: Transaction): void {
    this.lastTransaction = tx;
    if (tx.error) throw tx.error;
    if (tx.family !== this.family || tx.table !== this.tableName) {
      throw new FakeError(
        'run',
        'EINVAL',
        `transaction for ${tx.family} ${tx.table}, fake holds ${this.family} ${this.tableName}`,
      );
    }
    const next = cloneState(this.state);
    for (const op of tx.operations) this.apply(next, op);
    this.state = next;
  }

  /** Elements of a set or map, in insertion order; throws ENOENT when absent. */
  listElements(name: string): Element[] {
    const s = this.state.sets.get(name);
    if (!s) throw new FakeError(`list ${name}`, 'ENOENT', 'no such set or map');
    return [...s.elements.values()];
  }

  /** What a full sync reads back from the kernel (NftablesDataplane does the same with `nft -j`). */
  snapshot(): KernelSnapshot {
    const elements = new Map<string, Element[]>();
    for (const [name, s] of this.state.sets) elements.set(name, [...s.elements.values()]);
    return { chains: [...this.state.chains.keys()], sets: [...this.state.sets.keys()], elements };
  }

  /**
   * The table as sorted `add` lines (knftables Dump): table, chains, sets,
   * maps, then rules chain by chain, then elements set by set. Also valid
   * `nft -f` input.
   */
  dump(): string {
    const t = this.state.table;
    if (!t) return '';
    const line = (o: Operation['object']) => operationText({ verb: 'add', object: o }, this.family, this.tableName);
    const out: string[] = [line(t)];
    const chains = [...this.state.chains.keys()].sort();
    const sets = [...this.state.sets.values()]
      .filter((s) => s.def.kind === 'set')
      .map((s) => s.def.name)
      .sort();
    const maps = [...this.state.sets.values()]
      .filter((s) => s.def.kind === 'map')
      .map((s) => s.def.name)
      .sort();
    for (const c of chains) out.push(line(this.state.chains.get(c)!.chain));
    for (const s of [...sets, ...maps]) out.push(line(this.state.sets.get(s)!.def));
    for (const c of chains) for (const r of this.state.chains.get(c)!.rules) out.push(line(r));
    for (const s of [...sets, ...maps]) {
      const els = [...this.state.sets.get(s)!.elements.values()].map(line).sort();
      out.push(...els);
    }
    return out.join('\n') + '\n';
  }

  private apply(st: State, op: Operation): void {
    const o = op.object;
    const what = operationText(op, this.family, this.tableName);
    // As nft and the kernel: a comment over 128 bytes fails the whole transaction.
    const comment = (o as { readonly comment?: string }).comment;
    if (comment !== undefined && utf8Length(comment) > COMMENT_LENGTH_MAX)
      throw new FakeError(what, 'EINVAL', `comment too long, ${COMMENT_LENGTH_MAX} characters maximum allowed`);
    if (o.kind === 'table') {
      if (op.verb === 'add')
        st.table = {
          kind: 'table',
          ...(o.comment !== undefined
            ? { comment: o.comment }
            : st.table?.comment !== undefined
              ? { comment: st.table.comment }
              : {}),
        };
      else if (!st.table) throw new FakeError(what, 'ENOENT', 'no such table');
      else if (op.verb === 'delete') {
        st.table = null;
        st.chains.clear();
        st.sets.clear();
      } else {
        for (const c of st.chains.values()) c.rules.length = 0;
        for (const s of st.sets.values()) s.elements.clear();
      }
      return;
    }
    if (!st.table) throw new FakeError(what, 'ENOENT', 'no such table');
    switch (o.kind) {
      case 'chain':
        return this.applyChain(st, op.verb, o, what);
      case 'set':
      case 'map':
        return this.applySet(st, op.verb, o, what);
      case 'rule':
        return this.applyRule(st, o, what);
      case 'element':
        return this.applyElement(st, op.verb, o, what);
    }
  }

  private applyChain(st: State, verb: Operation['verb'], o: Chain, what: string): void {
    const cur = st.chains.get(o.name);
    if (verb === 'add') {
      if (!cur) {
        st.chains.set(o.name, { chain: o, rules: [] });
        return;
      }
      // Re-adding without a hook spec leaves a chain as it is (the kernel
      // updates nothing); a different hook, type or priority is refused.
      if (
        o.type !== undefined &&
        (cur.chain.type !== o.type || cur.chain.hook !== o.hook || cur.chain.priority !== o.priority)
      ) {
        throw new FakeError(what, 'EEXIST', 'chain exists with different type, hook or priority');
      }
      if (o.type === undefined && cur.chain.type !== undefined) return;
      if (o.comment !== undefined && o.comment !== cur.chain.comment)
        st.chains.set(o.name, { chain: o, rules: cur.rules });
      return;
    }
    if (!cur) throw new FakeError(what, 'ENOENT', 'no such chain');
    if (verb === 'flush') {
      cur.rules.length = 0;
      return;
    }
    for (const [name, c] of st.chains) {
      if (name === o.name) continue;
      if (c.rules.some((r) => chainRefs(r.rule).includes(o.name)))
        throw new FakeError(what, 'EBUSY', `referenced by a rule in ${name}`);
    }
    for (const s of st.sets.values()) {
      for (const e of s.elements.values()) {
        if (e.value && chainRefs(e.value.join(' ')).includes(o.name))
          throw new FakeError(what, 'EBUSY', `referenced by an element of ${s.def.name}`);
      }
    }
    st.chains.delete(o.name);
  }

  private applySet(st: State, verb: Operation['verb'], o: NftSet | NftMap, what: string): void {
    const cur = st.sets.get(o.name);
    if (verb === 'add') {
      if (!cur) {
        st.sets.set(o.name, { def: o, elements: new Map() });
        return;
      }
      if (cur.def.kind !== o.kind || cur.def.type !== o.type)
        throw new FakeError(what, 'EEXIST', 'exists with a different type');
      return;
    }
    if (!cur || cur.def.kind !== o.kind) throw new FakeError(what, 'ENOENT', `no such ${o.kind}`);
    if (verb === 'flush') {
      cur.elements.clear();
      return;
    }
    for (const [name, c] of st.chains) {
      if (c.rules.some((r) => setRefs(r.rule).includes(o.name)))
        throw new FakeError(what, 'EBUSY', `referenced by a rule in ${name}`);
    }
    st.sets.delete(o.name);
  }

  private applyRule(st: State, o: Rule, what: string): void {
    const c = st.chains.get(o.chain);
    if (!c) throw new FakeError(what, 'ENOENT', 'no such chain');
    for (const ref of chainRefs(o.rule)) {
      if (!st.chains.has(ref)) throw new FakeError(what, 'ENOENT', `jump/goto to missing chain ${ref}`);
      if (st.chains.get(ref)!.chain.hook !== undefined)
        throw new FakeError(what, 'EINVAL', `jump/goto to base chain ${ref}`);
    }
    for (const ref of setRefs(o.rule)) {
      if (!st.sets.has(ref)) throw new FakeError(what, 'ENOENT', `missing set ${ref}`);
    }
    c.rules.push(o);
  }

  private applyElement(st: State, verb: Operation['verb'], o: Element, what: string): void {
    const s = st.sets.get(o.set);
    if (!s) throw new FakeError(what, 'ENOENT', 'no such set or map');
    if (verb === 'flush') throw new FakeError(what, 'EINVAL', 'elements cannot be flushed');
    const problem = checkKey(s.def, o.key) ?? (verb === 'add' ? checkValue(s.def, o.value) : null);
    if (problem) throw new FakeError(what, 'EINVAL', problem);
    const k = elementKeyText(o.key);
    const cur = s.elements.get(k);
    if (verb === 'delete') {
      if (!cur) throw new FakeError(what, 'ENOENT', 'no such element');
      s.elements.delete(k);
      return;
    }
    const isMap = s.def.kind === 'map';
    if (isMap !== (o.value !== undefined && o.value.length > 0))
      throw new FakeError(what, 'EINVAL', isMap ? 'map element needs a value' : 'set element cannot have a value');
    for (const ref of chainRefs((o.value ?? []).join(' '))) {
      if (!st.chains.has(ref)) throw new FakeError(what, 'ENOENT', `verdict to missing chain ${ref}`);
    }
    if (cur) {
      if ((cur.value ?? []).join(' . ') !== (o.value ?? []).join(' . '))
        throw new FakeError(what, 'EEXIST', 'element exists with a different value');
      return;
    }
    s.elements.set(k, {
      kind: 'element',
      set: o.set,
      key: [...o.key],
      ...(o.value ? { value: [...o.value] } : {}),
      ...(o.comment !== undefined ? { comment: o.comment } : {}),
    });
  }
}

function checkKey(def: NftSet | NftMap, key: readonly string[]): string | null {
  const n = keyArity(def);
  if (key.length !== n) return `key has ${key.length} fields, ${def.name} has ${n}`;
  const types = (def.kind === 'map' ? def.type.split(' : ')[0]! : def.type).split(' . ');
  for (let i = 0; i < n; i++) {
    const t = types[i]!;
    const v = key[i]!;
    if (t.endsWith('_addr') && v.includes('/') && !(def.flags ?? []).includes('interval'))
      return `prefix ${v} in ${def.name}, which has no interval flag`;
    const ok =
      t === 'ipv4_addr'
        ? fitsAddr(v, 'IPv4')
        : t === 'ipv6_addr'
          ? fitsAddr(v, 'IPv6')
          : t === 'inet_proto'
            ? ['tcp', 'udp', 'sctp', 'icmp'].includes(v)
            : t === 'inet_service'
              ? /^[0-9]+$/.test(v) && Number(v) <= 65535
              : true;
    if (!ok) return `${JSON.stringify(v)} is not a valid ${t}`;
  }
  return null;
}

const VERDICT_RE = /^(?:accept|drop|continue|return|(?:jump|goto) \S+)$/;

/** A map value of a single-field data type we write (a port, a verdict); other data types are not checked. */
function checkValue(def: NftSet | NftMap, value: readonly string[] | undefined): string | null {
  if (def.kind !== 'map' || value === undefined || value.length === 0) return null;
  const type = def.type.split(' : ')[1];
  const v = value.join(' . ');
  if (type === 'inet_service' && !(/^[0-9]+$/.test(v) && Number(v) <= 65535))
    return `${JSON.stringify(v)} is not a valid port`;
  if (type === 'verdict' && !VERDICT_RE.test(v)) return `${JSON.stringify(v)} is not a verdict`;
  return null;
}

function fitsAddr(v: string, family: 'IPv4' | 'IPv6'): boolean {
  const p = v.includes('/') ? parseCIDR(v) : parseIP(v);
  return p !== null && p.family === family;
}

function cloneState(s: State): State {
  const chains = new Map<string, FakeChain>();
  for (const [k, c] of s.chains) chains.set(k, { chain: c.chain, rules: [...c.rules] });
  const sets = new Map<string, FakeSet>();
  for (const [k, v] of s.sets) sets.set(k, { def: v.def, elements: new Map(v.elements) });
  return { table: s.table, chains, sets };
}
