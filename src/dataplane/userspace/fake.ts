// Fake: the userspace mode's kernel interface in memory. It holds the two
// things a sync changes:
//   - the `kube-proxy-userspace` nftables table of one family, as `nft -f`
//     leaves it after the scripts UserspaceRenderer writes (run(script)
//     applies one script all-or-nothing, refusing what nft refuses: objects
//     in a missing table, rules in missing chains or naming missing chains
//     or sets, elements of missing sets/maps, keys of the wrong arity, map
//     keys re-added with another value, base-chain changes);
//   - the listener table: which port each listener is bound to and which
//     endpoints its relay chooses from (listen(spec), close(key)), as the
//     platform's UserspaceDataplane keeps it. A listener keeps its port for
//     as long as it is open, as the real ones do across endpoint changes.
// trace.ts walks a packet through both. Pure.
import { ProxyError } from '../../core/errors.js';
import type { ListenerSpec } from './plan.js';
import { TABLE_NAME } from './rules.js';

export type UserspaceFamily = 'ip' | 'ip6';

export interface FakeChain {
  /** "type nat hook prerouting priority -100", or null for a regular chain. */
  readonly base: string | null;
  readonly rules: string[];
}

export interface FakeMap {
  /** The declared type, e.g. "ipv4_addr . inet_proto . inet_service : inet_service". */
  readonly type: string;
  /** True for a set (keys only), false for a map. */
  readonly isSet: boolean;
  readonly interval: boolean;
  /** Key text ("172.30.0.41 . tcp . 80") -> value text ("40001", "drop", "goto reject-chain"; "" in a set). */
  readonly elements: Map<string, string>;
}

export interface FakeListener {
  readonly key: string;
  readonly protocol: 'TCP' | 'UDP';
  readonly port: number;
  /** "ip:port" of each endpoint the relay may choose. */
  readonly endpoints: readonly string[];
}

interface Table {
  chains: Map<string, FakeChain>;
  maps: Map<string, FakeMap>;
}

/** First port handed out by listen(); the real listeners get ephemeral ports. */
export const FIRST_FAKE_PORT = 40000;

function fail(stmt: string, reason: string): never {
  throw new ProxyError('KPT_EXEC_FAILED', `nft: ${reason}: ${stmt}`);
}

function clone(t: Table | null): Table | null {
  if (t === null) return null;
  return {
    chains: new Map([...t.chains].map(([k, c]) => [k, { base: c.base, rules: [...c.rules] }])),
    maps: new Map([...t.maps].map(([k, m]) => [k, { ...m, elements: new Map(m.elements) }])),
  };
}

const STMT = /^(add|delete) (table|chain|rule|map|set|element) (ip6?) (\S+)(?: (.*))?$/;

export class Fake {
  private table: Table | null = null;
  private readonly open = new Map<string, FakeListener>();
  private nextPort = FIRST_FAKE_PORT;

  constructor(readonly family: UserspaceFamily) {}

  get chains(): ReadonlyMap<string, FakeChain> {
    return this.table?.chains ?? new Map();
  }
  get maps(): ReadonlyMap<string, FakeMap> {
    return this.table?.maps ?? new Map();
  }
  get listeners(): ReadonlyMap<string, FakeListener> {
    return this.open;
  }
  get hasTable(): boolean {
    return this.table !== null;
  }

  /** The listener bound to this protocol and port, if any. */
  listenerOn(protocol: string, port: number): FakeListener | undefined {
    for (const l of this.open.values()) if (l.protocol === protocol && l.port === port) return l;
    return undefined;
  }

  /** Open the listener of `spec`, or hand new endpoints to the open one (same port). Returns its port. */
  listen(spec: ListenerSpec): number {
    const port = this.open.get(spec.key)?.port ?? this.nextPort++;
    this.open.set(spec.key, {
      key: spec.key,
      protocol: spec.protocol,
      port,
      endpoints: spec.endpoints.map((e) => e.key),
    });
    return port;
  }

  close(key: string): void {
    this.open.delete(key);
  }

  /** Apply one `nft -f` script all-or-nothing; throws ProxyError KPT_EXEC_FAILED and changes nothing on error. */
  run(script: string): void {
    let t = clone(this.table);
    for (const raw of script.split('\n')) {
      const stmt = raw.trim();
      if (stmt === '' || stmt.startsWith('#')) continue;
      t = this.apply(t, stmt);
    }
    this.table = t;
  }

  private apply(t: Table | null, stmt: string): Table | null {
    const m = STMT.exec(stmt);
    if (!m) fail(stmt, 'syntax error');
    const [, verb, what, fam, name, rest = ''] = m;
    if (fam !== this.family) fail(stmt, `family ${fam}, the fake holds ${this.family}`);
    if (what === 'table') {
      if (name !== TABLE_NAME) fail(stmt, `the fake holds only table ${TABLE_NAME}`);
      if (verb === 'delete') {
        if (t === null) fail(stmt, 'No such file or directory');
        return null;
      }
      return t ?? { chains: new Map(), maps: new Map() };
    }
    if (name !== TABLE_NAME || t === null) fail(stmt, 'No such file or directory (table)');
    if (verb === 'delete') fail(stmt, `delete ${what} is not used by the userspace renderer`);
    const [obj = '', body = ''] = splitName(rest);
    switch (what) {
      case 'chain':
        return addChain(t, stmt, obj, body);
      case 'rule':
        return addRule(t, stmt, obj, body);
      case 'map':
      case 'set':
        return addMap(t, stmt, obj, body, what === 'set');
      default:
        return addElements(t, stmt, obj, body);
    }
  }

  /** The table and the listener table as text (sorted), for tests and debugging. */
  dump(): string {
    const out: string[] = [];
    if (this.table !== null) {
      for (const [n, c] of [...this.table.chains].sort())
        out.push(`chain ${n}${c.base ? ` { ${c.base} }` : ''}`, ...c.rules.map((r) => `  ${r}`));
      for (const [n, m] of [...this.table.maps].sort()) {
        out.push(`${m.isSet ? 'set' : 'map'} ${n} { ${m.type} }`);
        for (const [k, v] of [...m.elements].sort()) out.push(`  ${k}${m.isSet ? '' : ` : ${v}`}`);
      }
    }
    for (const l of [...this.open.values()].sort((a, b) => a.port - b.port))
      out.push(`listener ${l.protocol.toLowerCase()} :${l.port} ${l.key} -> ${l.endpoints.join(', ') || '(none)'}`);
    return out.join('\n') + (out.length > 0 ? '\n' : '');
  }
}

/** "name { ... }" -> [name, "..."]; "name rule text" -> [name, "rule text"]. */
function splitName(rest: string): [string, string] {
  const i = rest.indexOf(' ');
  if (i < 0) return [rest, ''];
  const body = rest.slice(i + 1).trim();
  return [rest.slice(0, i), body.startsWith('{') && body.endsWith('}') ? body.slice(1, -1).trim() : body];
}

function addChain(t: Table, stmt: string, name: string, body: string): Table {
  const base = body === '' ? null : body.replace(/\s*;\s*$/, '').trim();
  const have = t.chains.get(name);
  if (have && have.base !== base) fail(stmt, 'Device or resource busy (base chain properties differ)');
  if (!have) t.chains.set(name, { base, rules: [] });
  return t;
}

function addRule(t: Table, stmt: string, chain: string, text: string): Table {
  const c = t.chains.get(chain);
  if (!c) fail(stmt, `No such file or directory (chain ${chain})`);
  for (const ref of text.matchAll(/\b(?:jump|goto) (\S+)/g))
    if (!t.chains.has(ref[1]!)) fail(stmt, `No such file or directory (chain ${ref[1]})`);
  for (const ref of text.matchAll(/@(\S+)/g))
    if (!t.maps.has(ref[1]!)) fail(stmt, `No such file or directory (set ${ref[1]})`);
  c.rules.push(text);
  return t;
}

function addMap(t: Table, stmt: string, name: string, body: string, isSet: boolean): Table {
  const parts = body
    .split(';')
    .map((p) => p.trim())
    .filter(Boolean);
  const type = parts.find((p) => p.startsWith('type '))?.slice(5);
  if (type === undefined) fail(stmt, 'a set or map needs a type');
  if (isSet === type.includes(' : ')) fail(stmt, isSet ? 'a set has no value type' : 'a map needs a value type');
  const interval = parts.some((p) => /^flags\b.*\binterval\b/.test(p));
  const have = t.maps.get(name);
  if (have && (have.type !== type || have.isSet !== isSet)) fail(stmt, 'File exists (different type)');
  if (!have) t.maps.set(name, { type, isSet, interval, elements: new Map() });
  return t;
}

function addElements(t: Table, stmt: string, name: string, body: string): Table {
  const m = t.maps.get(name);
  if (!m) fail(stmt, `No such file or directory (set ${name})`);
  const keyType = m.type.split(' : ')[0]!;
  const arity = keyType.split(' . ').length;
  for (const el of body.split(',').map((e) => e.trim())) {
    if (el === '') fail(stmt, 'empty element');
    const [key = '', value = ''] = m.isSet ? [el, ''] : el.split(' : ').map((x) => x.trim());
    if (key.split(' . ').length !== arity) fail(stmt, `element ${el} does not match type ${keyType}`);
    if (!m.isSet) checkValue(t, stmt, m.type.split(' : ')[1]!, value);
    if (!m.interval && key.includes('/')) fail(stmt, `a prefix in set ${name} without flags interval`);
    const had = m.elements.get(key);
    if (had !== undefined && had !== value) fail(stmt, `File exists (element ${key})`);
    m.elements.set(key, value);
  }
  return t;
}

function checkValue(t: Table, stmt: string, type: string, value: string): void {
  if (type === 'inet_service') {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1 || n > 65535) fail(stmt, `bad port ${value}`);
    return;
  }
  if (type === 'verdict') {
    const v = /^(?:drop|accept|(?:goto|jump) (\S+))$/.exec(value);
    if (!v) fail(stmt, `bad verdict ${value}`);
    if (v[1] !== undefined && !t.chains.has(v[1])) fail(stmt, `No such file or directory (chain ${v[1]})`);
    return;
  }
  fail(stmt, `value type ${type} is not modelled`);
}
