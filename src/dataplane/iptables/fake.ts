// A faithful in-memory model of the kernel's iptables state, in the spirit of
// knftables' Fake: restore() applies `iptables-restore [--noflush]` input and
// save() prints iptables-save text. Rules are kept as the text the caller
// wrote (no normalisation such as "/32" suffixes): the platform only reads
// chain names back, and the tracer reads rules.
//
// Atomicity is what iptables-nft 1.8.9 does (checked in a network namespace):
// each table is applied all-or-nothing at its COMMIT; an error in a later
// table of the same input leaves the tables committed before it in place.
// The renderer's payload has filter before nat, so a nat error after a good
// filter leaves the new filter rules applied; the next (full) sync repairs it.
//
// Semantics enforced, each also rejected by the real tool:
// - `:CHAIN` declares a chain: a user chain is created or flushed; a built-in
//   chain keeps its rules (--noflush) and takes the policy. Names > 28 chars fail.
// - -A/-I/-D/-R/-F/-X/-P on unknown chains fail; jumps (-j/-g) to a chain that
//   does not exist fail; `-X` of a built-in, non-empty or referenced chain fails.
// - --dport/--sport need a preceding `-p`/`-m` tcp|udp|sctp|dccp; DNAT to
//   "ip:port" needs such a `-p`; NAT targets only in nat, REJECT not in nat.
// - Without --noflush, every table named in the input is flushed first.

import { ProxyError } from '../../core/errors.js';
import { ruleTarget, tokenize } from './tokens.js';

export type IptablesTable = 'filter' | 'nat' | 'mangle' | 'raw' | 'security';

const BUILTINS: Record<IptablesTable, readonly string[]> = {
  raw: ['PREROUTING', 'OUTPUT'],
  mangle: ['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'],
  nat: ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'],
  filter: ['INPUT', 'FORWARD', 'OUTPUT'],
  security: ['INPUT', 'FORWARD', 'OUTPUT'],
};
const TABLE_ORDER: readonly IptablesTable[] = ['raw', 'mangle', 'nat', 'filter', 'security'];

/** Targets that are extensions, per table where they are valid ('*' = any). */
const STANDARD_TARGETS: Record<string, readonly IptablesTable[] | '*'> = {
  ACCEPT: '*',
  DROP: '*',
  RETURN: '*',
  MARK: '*',
  LOG: '*',
  CONNMARK: '*',
  NFLOG: '*',
  QUEUE: '*',
  NFQUEUE: '*',
  REJECT: ['filter', 'mangle', 'raw', 'security'],
  DNAT: ['nat'],
  SNAT: ['nat'],
  MASQUERADE: ['nat'],
  REDIRECT: ['nat'],
  CT: ['raw'],
  NOTRACK: ['raw'],
  TPROXY: ['mangle'],
};

interface ChainState {
  readonly builtin: boolean;
  policy: string;
  rules: string[];
}
type TableState = Map<string, ChainState>;

function newTable(t: IptablesTable): TableState {
  return new Map(BUILTINS[t].map((c) => [c, { builtin: true, policy: 'ACCEPT', rules: [] }]));
}

function cloneTable(t: TableState): TableState {
  return new Map([...t].map(([k, v]) => [k, { builtin: v.builtin, policy: v.policy, rules: [...v.rules] }]));
}

const isTable = (s: string): s is IptablesTable => s in BUILTINS;

/** Canonical form of a rule for comparisons (-D, -C): its tokens. */
const canon = (rule: string) => (tokenize(rule) ?? [rule]).join('\u0000');

export class Fake {
  private tables = new Map<IptablesTable, TableState>();
  /** Every restore payload applied successfully, oldest first. */
  readonly restores: string[] = [];

  /**
   * Apply restore input. Throws ProxyError('KPT_EXEC_FAILED') on the first
   * error; the failing table is unchanged, tables committed before it stay.
   */
  restore(text: string, opts: { noflush: boolean } = { noflush: true }): void {
    const work = new Map<IptablesTable, TableState>();
    let table: IptablesTable | null = null;
    let cur: TableState | null = null;
    const lines = text.split('\n');
    lines.forEach((raw, i) => {
      const line = raw.trim();
      const fail = (msg: string): never => {
        throw new ProxyError('KPT_EXEC_FAILED', `iptables-restore: line ${i + 1} failed: ${msg}: ${line}`);
      };
      if (line === '' || line.startsWith('#')) return;
      if (line.startsWith('*')) {
        if (table !== null) fail('table not committed');
        const name = line.slice(1);
        if (!isTable(name)) fail(`unknown table ${name}`);
        table = name as IptablesTable;
        const existing = this.tables.get(table);
        work.set(table, opts.noflush && existing ? cloneTable(existing) : newTable(table));
        cur = work.get(table)!;
        return;
      }
      if (table === null || cur === null) return fail('no table');
      if (line === 'COMMIT') {
        this.tables.set(table, cur);
        table = null;
        cur = null;
        return;
      }
      if (line.startsWith(':')) return declare(cur, line, fail);
      const tokens = tokenize(line);
      if (!tokens || tokens.length < 2) return fail('bad line');
      applyCommand(table, cur, tokens, line, fail);
    });
    if (table !== null) throw new ProxyError('KPT_EXEC_FAILED', `iptables-restore: COMMIT expected at end of input`);
    this.restores.push(text);
  }

  /**
   * Replace the whole state with an iptables-save dump, as the kernel holds it
   * (for `explain` and `diff` on a live ruleset). Unlike restore() nothing is
   * validated beyond the line shapes: a live kernel may hold other tools' rules
   * with targets and options this model does not know. Lines that are neither
   * a table, chain, rule, COMMIT nor comment throw KPT_INPUT_INVALID.
   */
  load(saveText: string): void {
    const tables = new Map<IptablesTable, TableState>();
    let cur: TableState | null = null;
    saveText.split('\n').forEach((raw, i) => {
      const line = raw.trim();
      const fail = (msg: string): never => {
        throw new ProxyError('KPT_INPUT_INVALID', `iptables-save line ${i + 1}: ${msg}: ${line}`);
      };
      if (line === '' || line.startsWith('#')) return;
      if (line.startsWith('*')) {
        const name = line.slice(1);
        if (!isTable(name)) return fail('unknown table');
        cur = newTable(name);
        tables.set(name, cur);
        return;
      }
      if (cur === null) return fail('outside a table');
      if (line === 'COMMIT') {
        cur = null;
        return;
      }
      if (line.startsWith(':')) return declare(cur, line, fail);
      const m = /^-A\s+(\S+)\s*(.*)$/.exec(line);
      if (!m) return fail('not a rule');
      const ch = cur.get(m[1]!) ?? fail('rule of an undeclared chain');
      ch.rules.push(m[2]!);
    });
    this.tables = tables;
  }

  /** iptables-save text for one table, or all tables in use. */
  save(only?: IptablesTable): string {
    let out = '';
    for (const t of TABLE_ORDER) {
      const st = this.tables.get(t);
      if (!st || (only !== undefined && t !== only)) continue;
      const names = [...BUILTINS[t], ...[...st.keys()].filter((c) => !st.get(c)!.builtin).sort()];
      out += `*${t}\n`;
      for (const c of names) {
        const ch = st.get(c)!;
        out += `:${c} ${ch.builtin ? ch.policy : '-'} [0:0]\n`;
      }
      for (const c of names) for (const r of st.get(c)!.rules) out += `-A ${c} ${r}\n`;
      out += 'COMMIT\n';
    }
    return out;
  }

  chains(table: IptablesTable): string[] {
    return [...(this.tables.get(table)?.keys() ?? [])];
  }

  hasChain(table: IptablesTable, chain: string): boolean {
    return this.tables.get(table)?.has(chain) ?? false;
  }

  /** Rule texts of a chain (what follows `-A CHAIN `); [] for a missing chain. */
  rules(table: IptablesTable, chain: string): readonly string[] {
    return this.tables.get(table)?.get(chain)?.rules ?? [];
  }

  /** Upstream EnsureRule: returns true if the rule already existed. args is an argv. */
  ensureRule(position: 'prepend' | 'append', table: IptablesTable, chain: string, args: readonly string[]): boolean {
    const text = args.map((a) => (a.includes(' ') ? `"${a}"` : a)).join(' ');
    const st = this.table(table);
    const ch = st.get(chain);
    if (!ch) throw new ProxyError('KPT_EXEC_FAILED', `iptables: chain ${chain} does not exist in ${table}`);
    if (ch.rules.some((r) => canon(r) === canon(text))) return true;
    checkTarget(table, st, tokenize(text) ?? [], (m) => {
      throw new ProxyError('KPT_EXEC_FAILED', `iptables: ${m}`);
    });
    if (position === 'prepend') ch.rules.unshift(text);
    else ch.rules.push(text);
    return false;
  }

  /** Delete a chain and its rules outright (as `iptables -F` + `-X`); references are not checked. */
  deleteChain(table: IptablesTable, chain: string): void {
    this.tables.get(table)?.delete(chain);
  }

  private table(t: IptablesTable): TableState {
    let st = this.tables.get(t);
    if (!st) {
      st = newTable(t);
      this.tables.set(t, st);
    }
    return st;
  }
}

function declare(cur: TableState, line: string, fail: (m: string) => never): void {
  const m = /^:(\S+)\s+(\S+)(\s+\[\d+:\d+\])?$/.exec(line);
  if (!m) return fail('bad chain line');
  const [, name, policy] = m as unknown as [string, string, string];
  if (name.length > 28) fail('chain name too long');
  const ch = cur.get(name);
  if (ch?.builtin) {
    if (policy !== '-') ch.policy = policy;
    return;
  }
  // iptables-restore ignores a policy on a user chain.
  if (ch) ch.rules = [];
  else cur.set(name, { builtin: false, policy: '-', rules: [] });
}

function referenced(cur: TableState, chain: string): boolean {
  for (const ch of cur.values()) {
    for (const r of ch.rules) if (ruleTarget(tokenize(r) ?? []) === chain) return true;
  }
  return false;
}

const PORT_PROTOS = new Set(['tcp', 'udp', 'sctp', 'dccp']);

/** Option checks iptables itself makes while parsing a rule. */
function checkOptions(tokens: readonly string[], fail: (m: string) => never): void {
  let protoSeen = false;
  let portModule = false;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    const v = tokens[i + 1] ?? '';
    if (t === '-p' && PORT_PROTOS.has(v.toLowerCase())) {
      protoSeen = true;
      portModule = true;
    }
    if (t === '-m' && (PORT_PROTOS.has(v) || v === 'multiport')) portModule = true;
    if ((t === '--dport' || t === '--sport') && !portModule) fail(`unknown option "${t}"`);
    const hasPort = v.startsWith('[') ? /\]:\d+/.test(v) : v.split(':').length === 2;
    if (t === '--to-destination' && hasPort && !protoSeen) fail('Need TCP, UDP, SCTP or DCCP with port specification');
  }
}

function checkTarget(
  table: IptablesTable,
  cur: TableState,
  ruleTokens: readonly string[],
  fail: (m: string) => never,
): void {
  checkOptions(ruleTokens, fail);
  const target = ruleTarget(ruleTokens);
  if (target === null) return;
  const std = STANDARD_TARGETS[target];
  if (std !== undefined) {
    if (std !== '*' && !std.includes(table)) fail(`target ${target} not valid in table ${table}`);
    return;
  }
  const ch = cur.get(target);
  if (!ch) fail(`unknown chain or target ${target}`);
  if (ch!.builtin) fail(`cannot jump to built-in chain ${target}`);
}

function applyCommand(
  table: IptablesTable,
  cur: TableState,
  tokens: string[],
  line: string,
  fail: (m: string) => never,
): void {
  const [cmd, chain] = tokens as [string, string];
  const rest = line.slice(line.indexOf(chain, cmd.length) + chain.length).trim();
  const ch = cur.get(chain);
  switch (cmd) {
    case '-N':
      if (ch) fail('chain already exists');
      cur.set(chain, { builtin: false, policy: '-', rules: [] });
      return;
    case '-X':
      if (!ch) return fail(`no chain ${chain}`);
      if (ch.builtin) fail('cannot delete built-in chain');
      if (ch.rules.length > 0) fail(`chain ${chain} is not empty`);
      if (referenced(cur, chain)) fail(`chain ${chain} is referenced`);
      cur.delete(chain);
      return;
    case '-F':
      if (!ch) return fail(`no chain ${chain}`);
      ch.rules = [];
      return;
    case '-P':
      if (!ch?.builtin) return fail('policy needs a built-in chain');
      ch.policy = tokens[2] ?? fail('no policy');
      return;
  }
  if (!ch) return fail(`no chain ${chain}`);
  if (cmd === '-A') {
    checkTarget(table, cur, tokens.slice(2), fail);
    ch.rules.push(rest);
  } else if (cmd === '-I' || cmd === '-R') {
    const hasNum = /^\d+$/.test(tokens[2] ?? '');
    const pos = hasNum ? Number(tokens[2]) : 1;
    const body = hasNum ? rest.slice(rest.indexOf(tokens[2]!) + tokens[2]!.length).trim() : rest;
    checkTarget(table, cur, tokenize(body) ?? [], fail);
    if (pos < 1 || pos > ch.rules.length + (cmd === '-I' ? 1 : 0)) fail('index out of range');
    ch.rules.splice(pos - 1, cmd === '-R' ? 1 : 0, body);
  } else if (cmd === '-D') {
    const idx = ch.rules.findIndex((r) => canon(r) === canon(rest));
    if (idx < 0) fail('rule does not exist');
    ch.rules.splice(idx, 1);
  } else {
    fail(`unknown command ${cmd}`);
  }
}
