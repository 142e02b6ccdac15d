// abi.ts against the BTF of the compiled programs (dist/bpf/kpt.o, built by
// scripts/setup): no root and no BPF syscalls, bpftool only reads the file.
//   - every struct described in abi.ts has, in the object, the same size and
//     the same fields by name, in order, at the same offsets, of the same size
//     and kind (network order where the C says __be16/__be32);
//   - every map of the object is in MAPS with its type, and its key and value
//     are the abi.ts structs (or plain types) the C declares, of the sizes
//     the proxy writes: no struct a map uses lacks a description;
//   - ABI_VERSION is abi.h's KPT_ABI_VERSION;
//   - layout.ts's encoders put each value at the offset the BTF gives its
//     field (the proxy's names and conversions, e.g. protocol numbers and
//     LPM prefix lengths, on top of the struct codec).
// The BPF_PROG_TEST_RUN half of the C/TypeScript check, which needs root, is
// test/e2e/ebpf-programs.test.ts.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { defaultObjectPath } from '../../platform/ebpf/object.js';
import { Btf, type BtfMember, type BtfType } from '../../../test/ebpf/btf.js';
import * as A from './abi.js';
import * as L from './layout.js';
import type { FieldType, Struct } from './struct.js';

const btf = Btf.ofObject(defaultObjectPath());

const isStruct = (x: unknown): x is Struct =>
  typeof x === 'object' && x !== null && 'fields' in x && typeof (x as Struct).encode === 'function';
const STRUCTS: Struct[] = (Object.values(A) as unknown[]).filter(isStruct);

/** linux/bpf.h: enum bpf_map_type. */
const MAP_TYPE: Record<A.MapKind, number> = {
  hash: 1,
  array: 2,
  percpu_hash: 5,
  percpu_array: 6,
  lru_hash: 9,
  lpm_trie: 11,
};

/** The abi.ts field type a C type is, read from its BTF (null: none fits). */
function fieldTypeOf(id: number): FieldType | null {
  const { type: t, typedefs } = btf.resolve(id);
  if (t.kind === 'UNION' && t.name === 'kpt_addr') return 'addr';
  if (t.kind === 'ARRAY') {
    const elem = btf.resolve(t.type_id!).type;
    if (elem.kind !== 'INT' || elem.size !== 1) return null;
    return elem.name === 'char' ? `char[${t.nr_elems!}]` : `u8[${t.nr_elems!}]`;
  }
  if (t.kind !== 'INT' || t.encoding === 'SIGNED') return null;
  const be = typedefs.some((n) => n.startsWith('__be'));
  switch (t.size) {
    case 1:
      return 'u8';
    case 2:
      return be ? 'be16' : 'u16';
    case 4:
      return be ? 'be32' : 'u32';
    case 8:
      return be ? null : 'u64';
  }
  return null;
}

/**
 * Whether a field described as `ours` fits the C type `c`. A field may be
 * stored big-endian although the C declares a plain integer (lpm_svc_key's
 * svc_id: the trie matches its bytes first), never the other way round.
 */
function fits(ours: FieldType, c: FieldType | null): boolean {
  return ours === c || (ours === 'be16' && c === 'u16') || (ours === 'be32' && c === 'u32');
}

/** A key or value type as text: "struct svc_key", or an abi.ts field type. */
const abiText = (t: A.AbiType): string => (typeof t === 'string' ? t : `struct ${t.name}`);
const btfText = (t: BtfType): string => {
  const r = btf.resolve(t.id).type;
  return r.kind === 'STRUCT' ? `struct ${r.name}` : String(fieldTypeOf(t.id));
};

describe('abi.ts against the BTF of the compiled programs', () => {
  test('abi.ts describes structs', () => {
    assert.ok(STRUCTS.length >= 17, `${STRUCTS.length} structs`);
  });

  for (const s of STRUCTS)
    test(`struct ${s.name}: size, and every field's name, offset, size and type`, () => {
      const t = btf.named('STRUCT', s.name);
      assert.ok(t, `struct ${s.name} in the object's BTF`);
      assert.equal(s.size, t.size, `sizeof(struct ${s.name})`);
      const members = t.members!;
      assert.deepEqual(
        s.fields.map((f) => f.name),
        members.map((m) => m.name),
        `struct ${s.name}: the fields, in order`,
      );
      for (const [i, f] of s.fields.entries()) {
        const m = members[i]!;
        const what = `${s.name}.${f.name}`;
        assert.equal(m.bitfield_size ?? 0, 0, `${what} is not a bit field`);
        assert.equal(f.offset, m.bits_offset / 8, `${what}: offset`);
        assert.equal(f.size, btf.sizeOf(m.type_id), `${what}: size`);
        const c = fieldTypeOf(m.type_id);
        assert.ok(fits(f.type, c), `${what}: described as ${f.type}, the C type is ${c ?? 'none of ours'}`);
      }
    });

  test('every map: type, key and value as MAPS says, and every struct a map uses is described', () => {
    const maps = btf.maps();
    assert.deepEqual(maps.map((m) => m.name).sort(), L.MAP_NAMES.map((n) => L.MAPS[n].name).sort(), 'the maps');
    for (const name of L.MAP_NAMES) {
      const spec: A.MapAbi = L.MAPS[name];
      const m = maps.find((x) => x.name === spec.name)!;
      assert.equal(m.type, MAP_TYPE[spec.kind], `${spec.name}: BPF_MAP_TYPE for ${spec.kind}`);
      assert.equal(m.keySize, spec.keySize, `${spec.name}: key size`);
      assert.equal(m.valueSize, spec.valueSize, `${spec.name}: value size`);
      assert.ok(m.key, `${spec.name}: the C gives the key's type`);
      assert.equal(abiText(spec.key), btfText(m.key), `${spec.name}: key type`);
      assert.equal(
        spec.value === null ? null : abiText(spec.value),
        m.value && btfText(m.value),
        `${spec.name}: value`,
      );
      for (const t of [m.key, m.value]) {
        const r = t && btf.resolve(t.id).type;
        if (r?.kind === 'STRUCT')
          assert.ok(
            STRUCTS.some((s) => s.name === r.name),
            `${spec.name} uses struct ${r.name}, which abi.ts describes`,
          );
      }
    }
  });

  test('ABI_VERSION is the KPT_ABI_VERSION of abi.h', () => {
    const rel = import.meta.url.includes('/dist/') ? '../../../../src/bpf/abi.h' : '../../bpf/abi.h';
    const h = readFileSync(new URL(rel, import.meta.url), 'utf8');
    assert.equal(A.ABI_VERSION, Number(/^#define KPT_ABI_VERSION (\d+)$/m.exec(h)?.[1]));
  });

  test("layout.ts's encoders put every value at its field's BTF offset", () => {
    for (const l of LAYOUTS) {
      const t = btf.named('STRUCT', l.struct);
      assert.ok(t, `struct ${l.struct} in the object's BTF`);
      assert.equal(t.size, l.sample.length, `sizeof(struct ${l.struct})`);
      for (const [member, bytes] of Object.entries(l.fields)) {
        const m: BtfMember | undefined = t.members!.find((x) => x.name === member);
        assert.ok(m, `${l.struct}.${member}`);
        const off: number = m.bits_offset / 8;
        assert.deepEqual(l.sample.subarray(off, off + bytes.length), bytes, `${l.struct}.${member} at offset ${off}`);
      }
    }
  });
});

// ---- what each encoder must write where (from test/e2e/ebpf-programs.test.ts) ----

const le32 = (n: number) => L.encodeU32(n);
const le16 = (n: number) => new Uint8Array([n & 0xff, n >> 8]);
const be16 = (n: number) => new Uint8Array([n >> 8, n & 0xff]);
const le64 = (n: bigint) => {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, n, true);
  return b;
};
const ip = (s: string) => L.addrBytes(s);

interface Layout {
  readonly struct: string;
  readonly sample: Uint8Array;
  /** member -> the bytes the encoder must have put at the member's BTF offset */
  readonly fields: Record<string, Uint8Array>;
}

const LAYOUTS: Layout[] = [
  {
    struct: 'svc_key',
    sample: L.encodeSvcKey({ addr: '10.1.2.3', port: 0x1234, proto: 'UDP' }),
    fields: { addr: ip('10.1.2.3'), port: be16(0x1234), proto: new Uint8Array([17]) },
  },
  {
    struct: 'svc_value',
    sample: L.encodeSvcValue({
      svcId: 0x01020304,
      clusterSet: 0x05060708,
      localSet: 0x090a0b0c,
      affinitySecs: 0x0d0e0f10,
      flags: 0x1112,
      kind: 'loadBalancer',
      algo: 'maglev',
    }),
    fields: {
      svc_id: le32(0x01020304),
      cluster_set: le32(0x05060708),
      local_set: le32(0x090a0b0c),
      affinity_secs: le32(0x0d0e0f10),
      flags: le16(0x1112),
      kind: new Uint8Array([4]),
      algo: new Uint8Array([1]),
    },
  },
  { struct: 'set_value', sample: L.encodeSetValue(0x01020304), fields: { count: le32(0x01020304) } },
  {
    struct: 'ep_key',
    sample: L.encodeEpKey({ setId: 0x0a0b0c0d, slot: 0x01020304 }),
    fields: { set_id: le32(0x0a0b0c0d), slot: le32(0x01020304) },
  },
  {
    struct: 'ep_value',
    sample: L.encodeEpValue({ addr: 'fd00::1', port: 0x2345 }),
    fields: { addr: ip('fd00::1'), port: be16(0x2345) },
  },
  {
    struct: 'member_key',
    sample: L.encodeMemberKey({ setId: 7, addr: '10.0.0.9', port: 0x0102 }),
    fields: { set_id: le32(7), port: be16(0x0102), addr: ip('10.0.0.9') },
  },
  {
    struct: 'aff_key',
    sample: L.encodeAffKey({ client: '10.9.9.9', svcId: 0x0a0b }),
    fields: { client: ip('10.9.9.9'), svc_id: le32(0x0a0b) },
  },
  {
    struct: 'aff_value',
    sample: L.encodeAffValue({ addr: '10.8.8.8', port: 0x0203, lastNs: 0x0102030405060708n }),
    fields: { addr: ip('10.8.8.8'), port: be16(0x0203), last_ns: le64(0x0102030405060708n) },
  },
  {
    struct: 'lpm_svc_key',
    sample: L.encodeLpmSvcKey({ svcId: 0x01020304, addr: '203.0.113.0', prefix: 25 }),
    fields: { prefixlen: le32(32 + 96 + 25), svc_id: new Uint8Array([1, 2, 3, 4]), addr: ip('203.0.113.0') },
  },
  {
    struct: 'lpm_key',
    sample: L.encodeLpmKey({ addr: 'fd00:10::', prefix: 64 }),
    fields: { prefixlen: le32(64), addr: ip('fd00:10::') },
  },
  {
    struct: 'iface_key',
    sample: L.encodeIfaceKey({ ifindex: 0x0102, family: 'IPv6' }),
    fields: { ifindex: le32(0x0102), family: le32(1) },
  },
  {
    struct: 'cfg_value',
    sample: L.encodeCfgValue({ mark: 0x4000, flags: 0x0f, netnsCookie: 0x1122334455667788n }),
    fields: { mark: le32(0x4000), flags: le32(0x0f), netns_cookie: le64(0x1122334455667788n) },
  },
  {
    struct: 'ct_key',
    sample: L.encodeCtKey({ saddr: '10.1.1.1', daddr: '10.2.2.2', sport: 0x1111, dport: 0x2222, proto: 'TCP' }),
    fields: {
      saddr: ip('10.1.1.1'),
      daddr: ip('10.2.2.2'),
      sport: be16(0x1111),
      dport: be16(0x2222),
      proto: new Uint8Array([6]),
    },
  },
  {
    struct: 'ct_value',
    sample: L.encodeCtValue({
      addr: '10.3.3.3',
      nat: '10.4.4.4',
      port: 0x3333,
      flags: L.CT_SNAT | L.CT_REPLY,
      svcId: 0x0a0b0c0d,
      createdNs: 9n,
    }),
    fields: {
      addr: ip('10.3.3.3'),
      nat: ip('10.4.4.4'),
      port: be16(0x3333),
      flags: new Uint8Array([L.CT_SNAT | L.CT_REPLY]),
      svc_id: le32(0x0a0b0c0d),
      created_ns: le64(9n),
    },
  },
  {
    struct: 'traffic_value',
    sample: L.encodeTrafficValue({ conns: 0x0102030405060708n, bytes: 0x1112131415161718n }),
    fields: { conns: le64(0x0102030405060708n), bytes: le64(0x1112131415161718n) },
  },
  {
    struct: 'name_value',
    sample: L.encodeName('ns/svc:port'),
    fields: { name: new TextEncoder().encode('ns/svc:port\0') },
  },
];
