// The netlink fast path encodes rules and elements byte-for-byte as nft 1.0.6
// does. The fixtures are `nft --debug=mnl` dumps of
//   add rule ip kube-proxy c numgen random mod 2 0 meta l4proto tcp dnat to 10.244.1.5:8080
//   add element ip kube-proxy m { 10.96.0.1 . tcp . 80 comment "ns/svc:p" : goto c }
// captured in a network namespace; we compare the expressions / element-list
// attributes (nft also sends a SET_ID the kernel does not need for named sets).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { encodeOperation, nlMessage } from '../../src/platform/nftables/nlencode.js';

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

const ours = (op: Parameters<typeof encodeOperation>[0]) => {
  const e = encodeOperation(op, 'ip', 'kube-proxy', (n) => (n === 'm' ? true : undefined));
  assert.ok(e);
  return nlMessage(e.type, e.flags, 1, 2, 0, e.attrs).subarray(20);
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

test('unsupported operations are not encoded (the caller falls back to nft -f)', () => {
  const enc = (op: Parameters<typeof encodeOperation>[0]) => encodeOperation(op, 'ip', 'kube-proxy', () => true);
  assert.equal(enc({ verb: 'add', object: { kind: 'rule', chain: 'c', rule: 'fib saddr type local goto x' } }), null);
  assert.equal(
    enc({ verb: 'add', object: { kind: 'chain', name: 'b', type: 'nat', hook: 'output', priority: -100 } }),
    null,
  );
  assert.equal(
    enc({ verb: 'add', object: { kind: 'rule', chain: 'c', rule: 'meta l4proto tcp dnat to [fd00::1]:80' } }),
    null,
    'wrong family',
  );
  assert.equal(
    encodeOperation(
      { verb: 'add', object: { kind: 'element', set: 'unknown', key: ['1.2.3.4'] } },
      'ip',
      'kube-proxy',
      () => undefined,
    ),
    null,
  );
});

// 'maps' layout: fixtures are `nft --debug=mnl` of
//   add map F kube-proxy m { typeof numgen random mod 720720 : F daddr . tcp dport ; flags interval ; }
//   add rule F kube-proxy c meta l4proto tcp dnat F addr . port to numgen random mod 720720 map @m
//   add element F kube-proxy m { 0-360359 : <10.244.1.5 | fd00::5> . 8080 }
//   flush map F kube-proxy m
for (const [fam, nfproto, ep] of [
  ['ip', 2, '10.244.1.5'],
  ['ip6', 10, 'fd00::5'],
] as const) {
  const dump = fixture(`nftables-mnl-maps-${fam}.txt`);
  const mine = (op: Parameters<typeof encodeOperation>[0]) => {
    const e = encodeOperation(op, fam, 'kube-proxy', (n) => (n === 'm' ? 'endpoints' : undefined));
    assert.ok(e, 'encoded');
    return { e, body: nlMessage(e.type, e.flags, 1, nfproto, 0, e.attrs).subarray(20) };
  };
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
    assert.equal(
      encodeOperation(
        { verb: 'add', object: { kind: 'map', name: 'm', type: 'x', typeOf, flags: [] } },
        fam,
        'kube-proxy',
        () => 'endpoints',
      ),
      null,
      'not interval',
    );
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
      encodeOperation(
        { verb: 'add', object: { kind: 'element', set: 'm', key: [key], value } },
        fam,
        'kube-proxy',
        () => 'endpoints',
      );
    assert.equal(enc('5-4', [ep, '80']), null, 'empty range');
    assert.equal(enc('0-9', [fam === 'ip' ? 'fd00::1' : '10.0.0.1', '80']), null, 'wrong family');
    assert.equal(enc('0-9', [ep]), null, 'no port');
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
