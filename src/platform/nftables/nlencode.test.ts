// The nf_tables encoder writes rules and elements byte-for-byte as nft 1.0.6
// does. The fixtures are `nft --debug=mnl` dumps of
//   add rule ip kube-proxy c numgen random mod 2 0 meta l4proto tcp dnat to 10.244.1.5:8080
//   add element ip kube-proxy m { 10.96.0.1 . tcp . 80 comment "ns/svc:p" : goto c }
// captured in a network namespace; we compare the expressions / element-list
// attributes (nft also sends a SET_ID the kernel does not need for named sets).
// The whole grammar against the kernel: test/e2e/nftables-parity.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { NftFamily } from '../../dataplane/nftables/names.js';
import type { Operation } from '../../dataplane/nftables/objects.js';
import { Attrs } from '../netlink/attr.js';
import { parseMessages } from '../netlink/message.js';
import { encodeBatch, UnencodableError } from './nlencode.js';
import type { SetSchema } from './nlset.js';

const fixture = (name: string) => readFileSync(new URL(`./${name}`, import.meta.url.replace('/dist/', '/')), 'utf8');

/** Rebuild the attribute bytes of the message of `type` from an mnl debug dump. */
function mnlPayload(dump: string, type: number): Buffer {
  const lines = dump.split('\n');
  const start = lines.findIndex((l) => l.startsWith(`| ${String(type).padStart(5, '0')} |`));
  assert.ok(start >= 0, `message ${type} in fixture`);
  let i = lines.findIndex((l, k) => k > start && l.includes('extra header')) + 1;
  const out: number[] = [];
  for (; i < lines.length && !lines[i]!.startsWith('----'); i++) {
    const l = lines[i]!;
    const attr = /^\|(\d{5})\|([N-])([B-])\|(\d{5})\|/.exec(l);
    if (attr) {
      const len = Number(attr[1]);
      const t = Number(attr[4]) | (attr[2] === 'N' ? 0x8000 : 0) | (attr[3] === 'B' ? 0x4000 : 0);
      out.push(len & 0xff, len >> 8, t & 0xff, t >> 8);
      continue;
    }
    const data = /^\| ([0-9a-f]{2}) ([0-9a-f]{2}) ([0-9a-f]{2}) ([0-9a-f]{2}) {2}\|/.exec(l);
    if (data) out.push(...data.slice(1, 5).map((h) => parseInt(h, 16)));
  }
  return Buffer.from(out);
}

/** The attribute of `type` (top level) in an attribute stream. */
function topAttr(buf: Buffer, type: number): Buffer {
  for (let off = 0; off + 4 <= buf.length;) {
    const len = buf.readUInt16LE(off);
    if ((buf.readUInt16LE(off + 2) & 0x3fff) === type) return buf.subarray(off, off + len);
    off += (len + 3) & ~3;
  }
  throw new Error(`attribute ${type} not found`);
}

/** The expressions of a rule as { name, data attributes as "len type:hex" }. */
function exprList(list: Buffer): Array<{ name: string; data: string[] }> {
  const attrs = (b: Buffer) => {
    const out: Array<{ type: number; v: Buffer; len: number }> = [];
    for (let off = 0; off + 4 <= b.length;) {
      const len = b.readUInt16LE(off);
      out.push({ type: b.readUInt16LE(off + 2) & 0x3fff, v: b.subarray(off + 4, off + len), len });
      off += (len + 3) & ~3;
    }
    return out;
  };
  return attrs(list.subarray(4)).map((el) => {
    const parts = attrs(el.v);
    const name = parts
      .find((p) => p.type === 1)!
      .v.toString('utf8')
      .replace(/\0+$/, '');
    const data = attrs(parts.find((p) => p.type === 2)!.v).map(
      (a) => `${a.len.toString(16).padStart(2, '0')}00 ${a.type}:${a.v.toString('hex')}`,
    );
    return { name, data };
  });
}

const VMAP: SetSchema = { fields: [7, 12, 13], interval: false, data: 'verdict' };

/** The batch's messages between BATCH_BEGIN and BATCH_END: type and attributes (after nfgenmsg). */
function encodeOps(ops: Operation[], family: NftFamily = 'ip', schemas = new Map<string, SetSchema>()) {
  const { chunks } = encodeBatch(ops, family, schemas, 1);
  return parseMessages(Buffer.concat(chunks))
    .slice(1, -1)
    .map((m) => ({ type: m.type, flags: m.flags, body: Buffer.from(m.payload.subarray(4)) }));
}

const ours = (op: Operation) => {
  const msgs = encodeOps([op], 'ip', new Map([['m', VMAP]]));
  assert.equal(msgs.length, 1);
  return msgs[0]!.body;
};

test('a lean DNAT rule encodes exactly like nft', () => {
  const nft = mnlPayload(fixture('nftables-mnl-rule.txt'), (10 << 8) | 6);
  const mine = ours({
    verb: 'add',
    object: { kind: 'rule', chain: 'c', rule: 'numgen random mod 2 0 meta l4proto tcp dnat to 10.244.1.5:8080' },
  });
  assert.deepEqual(topAttr(mine, 1), topAttr(nft, 1)); // table
  assert.deepEqual(topAttr(mine, 2), topAttr(nft, 2)); // chain
  assert.equal(topAttr(mine, 4).toString('hex'), topAttr(nft, 4).toString('hex')); // expressions
});

test('a verdict map element with a comment encodes exactly like nft', () => {
  const nft = mnlPayload(fixture('nftables-mnl-elem.txt'), (10 << 8) | 12);
  const mine = ours({
    verb: 'add',
    object: { kind: 'element', set: 'm', key: ['10.96.0.1', 'tcp', '80'], value: ['goto c'], comment: 'ns/svc:p' },
  });
  assert.equal(topAttr(mine, 3).toString('hex'), topAttr(nft, 3).toString('hex'));
});

test('operations outside the grammar are refused as a whole (UnencodableError names the operation)', () => {
  const refused = (op: Operation, schemas = new Map<string, SetSchema>()) =>
    assert.throws(
      () => encodeOps([op], 'ip', schemas),
      (e: unknown) => e instanceof UnencodableError && e.op === op,
    );
  refused({ verb: 'add', object: { kind: 'rule', chain: 'c', rule: 'tcp dport 22 accept' } });
  refused({ verb: 'add', object: { kind: 'rule', chain: 'c', rule: 'meta l4proto tcp dnat to [fd00::1]:80' } }); // family
  refused({ verb: 'add', object: { kind: 'rule', chain: 'c', rule: 'ip daddr 10.0.0.0/33 drop' } });
  refused({ verb: 'add', object: { kind: 'rule', chain: 'c', rule: 'iifname "a-name-longer-than-15" drop' } });
  refused({ verb: 'add', object: { kind: 'element', set: 'unknown', key: ['1.2.3.4'] } });
  refused(
    { verb: 'add', object: { kind: 'element', set: 'm', key: ['1.2.3.4', 'tcp'], value: ['goto c'] } },
    new Map([['m', VMAP]]),
  );
  refused({ verb: 'add', object: { kind: 'set', name: 's', type: 'ether_addr' } });
});

test('nft shortenings: byte-aligned prefixes load only their bytes, one-element lists compare, others use sets', () => {
  const exprs = (rule: string, family: NftFamily = 'ip') => {
    const msgs = encodeOps([{ verb: 'add', object: { kind: 'rule', chain: 'c', rule } }], family);
    return msgs.map((m) => m.type & 0xff);
  };
  // one-element list: a comparison, no anonymous set
  assert.deepEqual(exprs('ip saddr != { 10.0.0.0/8 } drop'), [6]);
  // two elements: NEWSET + NEWSETELEM before the rule
  assert.deepEqual(exprs('ip saddr != { 10.0.0.0/8, 192.0.2.0/24 } drop'), [9, 12, 6]);
  assert.deepEqual(exprs('numgen random mod 2 vmap { 0 : goto a , 1 : goto b }'), [9, 12, 6]);
  // the payload length nft loads for a prefix: bytes on a byte boundary, else the whole address (+ mask)
  const loadLen = (rule: string, family: NftFamily = 'ip') => {
    const body = encodeOps([{ verb: 'add', object: { kind: 'rule', chain: 'c', rule } }], family).at(-1)!.body;
    const e = exprList(topAttr(body, 4));
    return { len: parseInt(e[0]!.data[3]!.split(':')[1]!, 16), names: e.map((x) => x.name) };
  };
  assert.deepEqual(loadLen('ip saddr 10.0.0.0/8 drop'), { len: 1, names: ['payload', 'cmp', 'immediate'] });
  assert.deepEqual(loadLen('ip saddr 10.0.0.0/12 drop'), { len: 4, names: ['payload', 'bitwise', 'cmp', 'immediate'] });
  assert.deepEqual(loadLen('ip6 saddr fd00:10::/64 drop', 'ip6'), { len: 8, names: ['payload', 'cmp', 'immediate'] });
  assert.deepEqual(loadLen('ip6 daddr != ::1 drop', 'ip6'), { len: 16, names: ['payload', 'cmp', 'immediate'] });
});

test('a batch larger than the first buffer is written whole; element runs share messages', () => {
  const ops: Operation[] = [];
  for (let i = 0; i < 20000; i++)
    ops.push({
      verb: 'add',
      object: {
        kind: 'element',
        set: 'm',
        key: [`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, 'tcp', '80'],
        value: ['goto c'],
      },
    });
  const msgs = encodeOps(ops, 'ip', new Map([['m', VMAP]]));
  const elements = msgs.reduce((n, m) => n + new Attrs(m.body).nested(3)!.entries.length, 0);
  assert.equal(elements, 20000);
  assert.ok(msgs.length < 100, `${msgs.length} messages`);
  // Deletes and adds of one set keep their order (a changed element: delete, then add).
  const mixed = encodeOps(
    [
      { verb: 'delete', object: { kind: 'element', set: 'm', key: ['10.0.0.1', 'tcp', '80'] } },
      { verb: 'add', object: { kind: 'element', set: 'x', key: ['10.0.0.9'] } },
      { verb: 'add', object: { kind: 'element', set: 'm', key: ['10.0.0.1', 'tcp', '80'], value: ['goto d'] } },
    ],
    'ip',
    new Map<string, SetSchema>([
      ['m', VMAP],
      ['x', { fields: [7], interval: false, data: 'none' }],
    ]),
  );
  assert.deepEqual(
    mixed.map((m) => [m.type & 0xff, new Attrs(m.body).str(2)]),
    [
      [14, 'm'],
      [12, 'm'],
      [12, 'x'],
    ],
  );
});

// 'maps' layout: fixtures are `nft --debug=mnl` of
//   add map F kube-proxy m { typeof numgen random mod 720720 : F daddr . tcp dport ; flags interval ; }
//   add rule F kube-proxy c meta l4proto tcp dnat F addr . port to numgen random mod 720720 map @m
//   add element F kube-proxy m { 0-360359 : <10.244.1.5 | fd00::5> . 8080 }
//   flush map F kube-proxy m
for (const [fam, ep] of [
  ['ip', '10.244.1.5'],
  ['ip6', 'fd00::5'],
] as const) {
  const dump = fixture(`nftables-mnl-maps-${fam}.txt`);
  const EP: SetSchema = { fields: [4], interval: true, data: 'addrport' };
  const mine = (op: Operation) => {
    const msgs = encodeOps([op], fam, new Map([['m', EP]]));
    assert.equal(msgs.length, 1);
    return { e: msgs[0]!, body: msgs[0]!.body };
  };
  const refused = (op: Operation) => assert.throws(() => encodeOps([op], fam, new Map([['m', EP]])), UnencodableError);
  const typeOf = `numgen random mod 720720 : ${fam} daddr . tcp dport`;

  test(`maps layout (${fam}): the endpoint map's NEWSET encodes like nft, typeof udata included`, () => {
    const nft = mnlPayload(dump, (10 << 8) | 9);
    const { e, body } = mine({
      verb: 'add',
      object: { kind: 'map', name: 'm', type: 'integer : x', typeOf, flags: ['interval'] },
    });
    assert.equal(e.type, (10 << 8) | 9);
    for (const a of [1, 2, 3, 4, 5, 6, 7, 13])
      assert.equal(topAttr(body, a).toString('hex'), topAttr(nft, a).toString('hex'), `attr ${a}`);
    refused({ verb: 'add', object: { kind: 'map', name: 'm', type: 'x', typeOf, flags: [] } }); // not interval
  });

  test(`maps layout (${fam}): the fixed DNAT-through-map rule encodes like nft`, () => {
    const nft = mnlPayload(dump, (10 << 8) | 6);
    const { body } = mine({
      verb: 'add',
      object: {
        kind: 'rule',
        chain: 'c',
        rule: `meta l4proto tcp dnat ${fam} addr . port to numgen random mod 720720 map @m`,
      },
    });
    // nft also sends the lookup's SET_ID (attribute 4), which we leave out.
    assert.deepEqual(
      exprList(topAttr(body, 4)),
      exprList(topAttr(nft, 4)).map((e) =>
        e.name === 'lookup' ? { ...e, data: e.data.filter((a) => !a.startsWith('0800 4:')) } : e,
      ),
    );
  });

  test(`maps layout (${fam}): an interval element is a start with data and an end at hi+1, like nft`, () => {
    const nft = mnlPayload(dump, (10 << 8) | 12);
    const { body } = mine({
      verb: 'add',
      object: { kind: 'element', set: 'm', key: ['0-360359'], value: [ep, '8080'] },
    });
    assert.equal(topAttr(body, 3).toString('hex'), topAttr(nft, 3).toString('hex'));
    const enc = (key: string, value: string[]) =>
      refused({ verb: 'add', object: { kind: 'element', set: 'm', key: [key], value } });
    enc('5-4', [ep, '80']); // empty range
    enc('0-9', [fam === 'ip' ? 'fd00::1' : '10.0.0.1', '80']); // wrong family
    enc('0-9', [ep]); // no port
  });

  test(`maps layout (${fam}): flush map is a DELSETELEM without elements, like nft`, () => {
    const nft = mnlPayload(dump, (10 << 8) | 14);
    const { e, body } = mine({ verb: 'flush', object: { kind: 'map', name: 'm', type: 'x' } });
    assert.equal(e.type, (10 << 8) | 14);
    assert.deepEqual(topAttr(body, 1), topAttr(nft, 1));
    assert.deepEqual(topAttr(body, 2), topAttr(nft, 2));
    assert.throws(() => topAttr(body, 3));
  });
}

test('a large inline verdict map (a Maglev choice) goes over several element messages, each list within 16 bits', () => {
  const chain = `endpoint-ABCDEFGH-${'n'.repeat(60)}/${'s'.repeat(60)}/tcp/p80__10.180.0.1/8080`;
  const entries = Array.from({ length: 1021 }, (_, key) => ({ key, verdict: 'goto' as const, chain }));
  const rule = `jhash ip saddr . th sport mod 1021 seed 0x6b707473 vmap { ${entries
    .map((e) => `${e.key} : goto ${e.chain}`)
    .join(' , ')} }`;
  const msgs = encodeOps([{ verb: 'add', object: { kind: 'rule', chain: 'c', rule } }]);
  const types = msgs.map((m) => m.type & 0xff);
  const elems = msgs.filter((m) => (m.type & 0xff) === 12);
  assert.deepEqual([types[0], types[types.length - 1]], [9 /* NEWSET */, 6 /* NEWRULE */]);
  assert.ok(elems.length > 1, `${elems.length} element messages`);
  for (const m of elems) assert.ok(topAttr(m.body, 3).length < 65536);
  const small = encodeOps([
    { verb: 'add', object: { kind: 'rule', chain: 'c', rule: 'numgen inc mod 2 vmap { 0 : goto a , 1 : goto b }' } },
  ]);
  assert.equal(small.filter((m) => (m.type & 0xff) === 12).length, 1, 'a small map stays one message');
});
