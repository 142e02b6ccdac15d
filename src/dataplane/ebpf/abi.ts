// src/bpf/abi.h in TypeScript: every struct a map key or value is made of,
// described once (struct.ts derives offsets, sizes, encoders and decoders),
// and every map with the types of its key and value. Field names and their
// order are the C ones; abi.test.ts compares each struct and each map with
// the BTF of the compiled object, so a field added, moved or resized on one
// side only fails the unit tests. The meaning of each field is documented in
// abi.h; layout.ts turns these values into the proxy's own types.
import { defineStruct, type FieldType, type Struct, typeSize } from './struct.js';

export const ABI_VERSION = 1;

export const SVC_KEY = defineStruct('svc_key', { addr: 'addr', port: 'be16', proto: 'u8', pad: 'u8' });
export const SVC_VALUE = defineStruct('svc_value', {
  svc_id: 'u32',
  cluster_set: 'u32',
  local_set: 'u32',
  affinity_secs: 'u32',
  flags: 'u16',
  kind: 'u8',
  algo: 'u8',
});
export const SET_VALUE = defineStruct('set_value', { count: 'u32', rr_next: 'u32' });
export const EP_KEY = defineStruct('ep_key', { set_id: 'u32', slot: 'u32' });
export const EP_VALUE = defineStruct('ep_value', { addr: 'addr', port: 'be16', pad: 'u16' });
export const MEMBER_KEY = defineStruct('member_key', { set_id: 'u32', port: 'be16', pad: 'u16', addr: 'addr' });
export const AFF_KEY = defineStruct('aff_key', { client: 'addr', svc_id: 'u32' });
export const AFF_VALUE = defineStruct('aff_value', {
  addr: 'addr',
  port: 'be16',
  pad: 'u16',
  pad2: 'u32',
  last_ns: 'u64',
});
// svc_id is a __u32 in C stored big-endian: the trie matches its bytes first.
export const LPM_SVC_KEY = defineStruct('lpm_svc_key', { prefixlen: 'u32', svc_id: 'be32', addr: 'addr' });
export const LPM_KEY = defineStruct('lpm_key', { prefixlen: 'u32', addr: 'addr' });
export const IFACE_KEY = defineStruct('iface_key', { ifindex: 'u32', family: 'u32' });
export const CFG_VALUE = defineStruct('cfg_value', { mark: 'u32', flags: 'u32', netns_cookie: 'u64' });
export const CT_KEY = defineStruct('ct_key', {
  saddr: 'addr',
  daddr: 'addr',
  sport: 'be16',
  dport: 'be16',
  proto: 'u8',
  pad: 'u8[3]',
});
export const CT_VALUE = defineStruct('ct_value', {
  addr: 'addr',
  nat: 'addr',
  port: 'be16',
  flags: 'u8',
  closing: 'u8',
  svc_id: 'u32',
  created_ns: 'u64',
});
export const SOCK_KEY = defineStruct('sock_key', {
  cookie: 'u64',
  addr: 'addr',
  port: 'be16',
  proto: 'u8',
  pad: 'u8[5]',
});
export const SOCK_VALUE = defineStruct('sock_value', { addr: 'addr', port: 'be16', pad: 'u16' });
export const FRAG_KEY = defineStruct('frag_key', {
  saddr: 'addr',
  daddr: 'addr',
  id: 'be32',
  proto: 'u8',
  pad: 'u8[3]',
});
export const FRAG_VALUE = defineStruct('frag_value', { sport: 'be16', dport: 'be16' });
export const NAME_LEN = 160;
export const NAME_VALUE = defineStruct('name_value', { name: `char[${NAME_LEN}]` });
export const TRAFFIC_VALUE = defineStruct('traffic_value', { conns: 'u64', bytes: 'u64' });

/** The first check's bitmaps (abi.h: kpt_hot, kpt_seen; filter.ts). */
export const HOT_BITS_LOG = 16;
export const HOT_WORDS = 1 << (HOT_BITS_LOG - 6);
export const HOT_STRIDE = 1 + HOT_WORDS;
export const SEEN_BITS_LOG = 19;
export const SEEN_WORDS = 1 << (SEEN_BITS_LOG - 6);

/** Default Maglev table size (maglev_m in maps.h); the loader sizes the kpt_maglev value to the one in use. */
export const MAGLEV_M = 16381;

/** The Maglev value is maglevM 16-bit slots; the loader sizes the map to match. */
export function maglevValueSize(m: number): number {
  return 2 * m;
}

export type MapKind = 'hash' | 'lru_hash' | 'lpm_trie' | 'array' | 'percpu_array' | 'percpu_hash';

export interface MapSpec {
  readonly name: string;
  readonly kind: MapKind;
  readonly keySize: number;
  readonly valueSize: number;
  /** Entries written by the proxy (rendered), as opposed to runtime state the programs write. */
  readonly rendered: boolean;
}

/** What a key or a value is in C: a struct of this file, or one plain field type (__u32, union kpt_addr, ...). */
export type AbiType = Struct | FieldType;

/** A map with the C types of its key and value; a value of null has no type, only __uint(value_size). */
export interface MapAbi extends MapSpec {
  readonly key: AbiType;
  readonly value: AbiType | null;
}

const abiSize = (t: AbiType): number => (typeof t === 'string' ? typeSize(t).size : t.size);

/** value: its type, or its size in bytes when the C gives only a size. */
function map(name: string, kind: MapKind, key: AbiType, value: AbiType | number, rendered: boolean): MapAbi {
  const v = typeof value === 'number' ? { value: null, valueSize: value } : { value, valueSize: abiSize(value) };
  return { name, kind, key, keySize: abiSize(key), ...v, rendered };
}

/** Every map, by its short name (the C name without the kpt_ prefix). */
export const MAPS = {
  svc: map('kpt_svc', 'hash', SVC_KEY, SVC_VALUE, true),
  addrs: map('kpt_addrs', 'hash', 'addr', 'u32', true),
  sets: map('kpt_sets', 'hash', 'u32', SET_VALUE, true),
  eps: map('kpt_eps', 'hash', EP_KEY, EP_VALUE, true),
  members: map('kpt_members', 'hash', MEMBER_KEY, 'u32', true),
  maglev: map('kpt_maglev', 'hash', 'u32', maglevValueSize(MAGLEV_M), true),
  affinity: map('kpt_affinity', 'lru_hash', AFF_KEY, AFF_VALUE, false),
  lbSrc: map('kpt_lb_src', 'lpm_trie', LPM_SVC_KEY, 'u8', true),
  podCidrs: map('kpt_pod_cidrs', 'lpm_trie', LPM_KEY, 'u8', true),
  svcCidrs: map('kpt_svc_cidrs', 'lpm_trie', LPM_KEY, 'u8', true),
  ifaces: map('kpt_ifaces', 'hash', IFACE_KEY, 'u32', true),
  cfg: map('kpt_cfg', 'array', 'u32', CFG_VALUE, true),
  ct: map('kpt_ct', 'lru_hash', CT_KEY, CT_VALUE, false),
  sock: map('kpt_sock', 'lru_hash', SOCK_KEY, SOCK_VALUE, false),
  names: map('kpt_names', 'hash', 'u32', NAME_VALUE, true),
  stats: map('kpt_stats', 'percpu_array', 'u32', 'u64', false),
  traffic: map('kpt_traffic', 'percpu_hash', 'u32', TRAFFIC_VALUE, false),
  hot: map('kpt_hot', 'array', 'u32', 'u64', false),
  seen: map('kpt_seen', 'array', 'u32', 'u64', false),
  frag: map('kpt_frag', 'lru_hash', FRAG_KEY, FRAG_VALUE, false),
} as const satisfies Record<string, MapAbi>;

export type MapName = keyof typeof MAPS;
export const MAP_NAMES = Object.keys(MAPS) as MapName[];
