// The userspace Fake (its table: the nftables Fake of kube-proxy-userspace)
// against the real nft, inside one throw-away network namespace
// (kpt-usf-<pid>-<rand>), never the root one: for every scenario of the
// shared packet-flow table, the transaction a full sync writes is
// applied to both (nft -f of its text), and the kernel's table must hold what
// the Fake holds (chains with their rule counts, every map and set with its
// elements). A few transactions the Fake refuses are refused by nft too. This is what lets the
// packet-flow table, run against the Fake (test/dataplane/userspace-packetflow.test.ts),
// speak for the kernel. Runs as root.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { FakeError } from '../../src/dataplane/nftables/fake.js';
import type { NftObject } from '../../src/dataplane/nftables/objects.js';
import { Fake, userspaceTransaction } from '../../src/dataplane/userspace/index.js';
import { PACKET_FLOW_SCENARIOS } from '../cases/packetflow.js';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../netns/cleanup.js';
import { loadScenario } from '../dataplane/userspace-fixtures.js';

const NS = `kpt-usf-${process.pid}-${randomBytes(2).toString('hex')}`;
const TABLE = 'kube-proxy-userspace';

/** nft inside the namespace; returns the exit code and stderr instead of throwing. */
function nft(args: string[], input?: string): { code: number; out: string; err: string } {
  const r = spawnSync('ip', ['netns', 'exec', NS, 'nft', ...args], { input, encoding: 'utf8' });
  return { code: r.status ?? 1, out: r.stdout, err: r.stderr };
}

before(() => {
  trackNamespace(NS);
  execFileSync('ip', ['netns', 'add', NS]);
  execFileSync('ip', ['netns', 'exec', NS, 'ip', 'link', 'set', 'lo', 'up']);
});
after(() => {
  deleteNamespaceSync(NS);
  untrackNamespace(NS);
});

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
const obj = (v: Json | undefined): { [k: string]: Json } | null =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? v : null;

/** One key or value as the renderer writes it: "a . b . c", host prefixes without /32 or /128. */
function text(v: Json): string {
  const o = obj(v);
  if (o?.concat && Array.isArray(o.concat)) return o.concat.map(text).join(' . ');
  if (o?.prefix) {
    const p = obj(o.prefix)!;
    return `${String(p.addr)}/${String(p.len)}`;
  }
  if (o?.goto) return `goto ${String(obj(o.goto)!.target)}`;
  if (o?.jump) return `jump ${String(obj(o.jump)!.target)}`;
  if (o && 'drop' in o) return 'drop';
  if (o && 'accept' in o) return 'accept';
  if (typeof v === 'string' || typeof v === 'number') return String(v);
  throw new Error(`unexpected nft JSON ${JSON.stringify(v)}`);
}
const host = (k: string) => k.replace(/\/(32|128)\b/g, '');

/** The kernel's table as "chain c: N rules" and "m: key : value" lines, sorted. */
function kernelView(fam: string): string[] {
  const r = nft(['-j', 'list', 'table', fam, TABLE]);
  assert.equal(r.code, 0, r.err);
  const out: string[] = [];
  const rules = new Map<string, number>();
  for (const item of (JSON.parse(r.out) as { nftables: Json[] }).nftables) {
    const o = obj(item)!;
    const rule = obj(o.rule);
    if (rule) rules.set(String(rule.chain), (rules.get(String(rule.chain)) ?? 0) + 1);
    const chain = obj(o.chain);
    if (chain) rules.set(String(chain.name), rules.get(String(chain.name)) ?? 0);
    const s = obj(o.map) ?? obj(o.set);
    if (!s) continue;
    out.push(`${String(s.name)}:`);
    for (const e of Array.isArray(s.elem) ? s.elem : []) {
      if (Array.isArray(e)) out.push(`${String(s.name)}: ${host(text(e[0]!))} : ${text(e[1]!)}`);
      else out.push(`${String(s.name)}: ${host(text(obj(e)?.elem ? obj(obj(e)!.elem)!.val! : e))}`);
    }
  }
  for (const [c, n] of rules) out.push(`chain ${c}: ${n} rules`);
  return out.sort();
}

function fakeView(f: Fake): string[] {
  const out: string[] = [];
  for (const [c, chain] of f.nft.chains) out.push(`chain ${c}: ${chain.rules.length} rules`);
  for (const [n, m] of f.nft.sets) {
    out.push(`${n}:`);
    for (const [k, e] of m.elements)
      out.push(m.def.kind === 'set' ? `${n}: ${host(k)}` : `${n}: ${host(k)} : ${e.value!.join(' . ')}`);
  }
  return out.sort();
}

test('every packet-flow scenario: the kernel holds what the Fake holds', { timeout: 120_000 }, () => {
  for (const s of PACKET_FLOW_SCENARIOS) {
    const { fake, script } = loadScenario(s);
    const fam = fake.family;
    const r = nft(['-f', '-'], script);
    assert.equal(r.code, 0, `${s.name}: nft refused what the Fake accepted: ${r.err}`);
    assert.deepEqual(kernelView(fam), fakeView(fake), s.name);
  }
});

test('transactions the Fake refuses, nft refuses too', () => {
  const base: NftObject[] = [
    { kind: 'chain', name: 'c' },
    { kind: 'map', name: 'm', type: 'ipv4_addr . inet_proto . inet_service : inet_service' },
    { kind: 'map', name: 'v', type: 'inet_proto . inet_service : verdict' },
    { kind: 'set', name: 's', type: 'ipv4_addr' },
  ];
  const el = (set: string, key: string[], value?: string): NftObject => ({
    kind: 'element',
    set,
    key,
    ...(value !== undefined ? { value: [value] } : {}),
  });
  const bad: NftObject[][] = [
    [{ kind: 'rule', chain: 'nope', rule: 'drop' }],
    [{ kind: 'rule', chain: 'c', rule: 'jump missing' }],
    [el('m', ['172.30.0.1', 'tcp'], '40000')],
    [el('m', ['172.30.0.1', 'tcp', '80'], '1'), el('m', ['172.30.0.1', 'tcp', '80'], '2')],
    [el('nope', ['1.2.3.4'])],
    [el('m', ['172.30.0.1', 'tcp', '80'], '70000')],
    [el('v', ['tcp', '80'], 'goto nowhere')],
    [el('s', ['10.0.0.0/8'])],
  ];
  for (const objects of bad) {
    const tx = userspaceTransaction('IPv4').add({ kind: 'table' }).delete({ kind: 'table' }).add({ kind: 'table' });
    for (const o of [...base, ...objects]) tx.add(o);
    const script = tx.toString();
    assert.throws(() => new Fake('ip').run(tx), FakeError, script);
    assert.notEqual(nft(['-f', '-'], script).code, 0, `nft accepted:\n${script}`);
  }
});
