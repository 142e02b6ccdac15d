// A C struct described once, as ordered fields with their C types, and
// everything the proxy needs from it derived from that description: field
// offsets and the struct's size by the C rules (each field at a multiple of
// its alignment, the size a multiple of the largest), an encoder and a
// decoder. abi.ts describes every struct of src/bpf/abi.h this way, with the
// C field names, so a unit test can compare each description with the BTF of
// the compiled object by name (abi.test.ts).
//
// Field types:
//   u8 u16 u32 u64   host order (little-endian on the platforms we build for)
//   be16 be32        network order (the C declares __be16/__be32, or stores a
//                    __u32 big-endian on purpose)
//   addr             union kpt_addr: 16 bytes, IPv4 as ::ffff:a.b.c.d
//   u8[N]            raw bytes
//   char[N]          NUL-padded ASCII text
// A field named pad, pad2, ... is padding: always written as zeros, never
// decoded, and absent from the struct's TypeScript value.
//
// The value of a struct in TypeScript has the fields' names in camelCase
// (svc_id -> svcId): numbers, bigints for u64, text for addr and char[N],
// Uint8Array for u8[N].
import { BugError, ProxyError } from '../../core/errors.js';
import { formatIP, parseIP } from '../../core/ip.js';

export type FieldType = 'u8' | 'u16' | 'u32' | 'u64' | 'be16' | 'be32' | 'addr' | `u8[${number}]` | `char[${number}]`;
export type Fields = Readonly<Record<string, FieldType>>;

type Camel<S extends string> = S extends `${infer A}_${infer B}` ? `${A}${Capitalize<Camel<B>>}` : S;
type FieldValue<T extends FieldType> = T extends 'u64'
  ? bigint
  : T extends 'addr' | `char[${number}]`
    ? string
    : T extends `u8[${number}]`
      ? Uint8Array
      : number;

/** The TypeScript value of a struct: its non-padding fields, camelCase. */
export type StructValue<F extends Fields> = {
  readonly [K in keyof F & string as K extends 'pad' | `pad${number}` ? never : Camel<K>]: FieldValue<F[K]>;
};

export interface Field {
  /** The C name. */
  readonly name: string;
  /** The property of the TypeScript value (camelCase); null for padding. */
  readonly prop: string | null;
  readonly type: FieldType;
  readonly offset: number;
  readonly size: number;
}

export interface Struct<F extends Fields = Fields> {
  /** The C name (struct svc_key -> svc_key). */
  readonly name: string;
  readonly fields: readonly Field[];
  readonly size: number;
  readonly align: number;
  encode(v: StructValue<F>): Uint8Array;
  decode(b: Uint8Array): StructValue<F>;
}

const ARRAY = /^(u8|char)\[(\d+)\]$/;

/** Size and alignment of a field type, as the BPF target's C compiler lays it out. */
export function typeSize(t: FieldType): { size: number; align: number } {
  switch (t) {
    case 'u8':
      return { size: 1, align: 1 };
    case 'u16':
    case 'be16':
      return { size: 2, align: 2 };
    case 'u32':
    case 'be32':
      return { size: 4, align: 4 };
    case 'u64':
      return { size: 8, align: 8 };
    case 'addr':
      // union kpt_addr { __u8 b[16]; __u32 w[4]; }
      return { size: 16, align: 4 };
  }
  const m = ARRAY.exec(t);
  if (!m) throw new BugError(`unknown field type ${t}`);
  return { size: Number(m[2]), align: 1 };
}

const camel = (s: string): string => s.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
const isPad = (name: string): boolean => /^pad\d*$/.test(name);
const C_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Describes struct `name` (its C name) by its fields in declaration order. */
export function defineStruct<const F extends Fields>(name: string, fields: F): Struct<F> {
  if (!C_NAME.test(name)) throw new BugError(`struct name ${JSON.stringify(name)}`);
  let off = 0;
  let align = 1;
  const out: Field[] = [];
  for (const [fname, type] of Object.entries(fields)) {
    if (!C_NAME.test(fname)) throw new BugError(`struct ${name}: field name ${JSON.stringify(fname)}`);
    const t = typeSize(type);
    off = Math.ceil(off / t.align) * t.align;
    out.push({ name: fname, prop: isPad(fname) ? null : camel(fname), type, offset: off, size: t.size });
    off += t.size;
    align = Math.max(align, t.align);
  }
  const size = Math.ceil(off / align) * align;
  return {
    name,
    fields: out,
    size,
    align,
    encode: compileEncoder(out, size) as Struct<F>['encode'],
    decode: compileDecoder(name, out, size) as Struct<F>['decode'],
  };
}

// Encoders run for every entry of a full render, so each struct gets its own
// straight-line function, generated here from the field list: fixed offsets
// and one named property read per field keep the engine's property accesses
// monomorphic, which a loop over per-field closures (one shared access site
// for every struct's properties) does not. The generated text is made only of
// the field list's offsets and C-identifier names (checked above), never of
// run-time data; the helpers it calls are passed in as parameters. Decoders
// are generated the same way (one object literal, so every decoded value of
// a struct has the same shape).
const HELPERS = {
  putU16,
  putBe16,
  putU32,
  putBe32,
  putU64,
  putAddr,
  putChars,
  putBytes,
  addrText,
  getU64,
  getChars,
  tooShort,
};
const HELPER_NAMES = Object.keys(HELPERS);
const HELPER_FNS = Object.values(HELPERS);

/** A function of one argument, x, with the helpers in scope. */
function compile<T>(body: string): T {
  return new Function(...HELPER_NAMES, `'use strict'; return (x) => {\n${body}\n};`)(...HELPER_FNS) as T;
}

/** The helper that writes each fixed-size field type (u8 is written inline). */
const PUT: Readonly<Record<string, string>> = {
  u16: 'putU16',
  be16: 'putBe16',
  u32: 'putU32',
  be32: 'putBe32',
  u64: 'putU64',
  addr: 'putAddr',
};

function compileEncoder(fields: readonly Field[], size: number): (v: object) => Uint8Array {
  const lines = [`const b = new Uint8Array(${size});`];
  for (const f of fields) {
    if (f.prop === null) continue;
    const v = `x.${f.prop}`;
    const o = f.offset;
    const put = PUT[f.type];
    if (f.type === 'u8') lines.push(`b[${o}] = ${v};`);
    else if (put) lines.push(`${put}(b, ${o}, ${v});`);
    else lines.push(`${f.type.startsWith('char') ? 'putChars' : 'putBytes'}(b, ${o}, ${f.size}, ${v});`);
  }
  lines.push('return b;');
  return compile(lines.join('\n'));
}

function compileDecoder(name: string, fields: readonly Field[], size: number): (b: Uint8Array) => object {
  const props: string[] = [];
  for (const f of fields) {
    if (f.prop === null) continue;
    const o = f.offset;
    const end = o + f.size;
    const at = (i: number) => `x[${o + i}]`;
    const get = {
      u8: at(0),
      u16: `(${at(0)} | ${at(1)} << 8)`,
      be16: `(${at(0)} << 8 | ${at(1)})`,
      u32: `((${at(0)} | ${at(1)} << 8 | ${at(2)} << 16 | ${at(3)} << 24) >>> 0)`,
      be32: `((${at(0)} << 24 | ${at(1)} << 16 | ${at(2)} << 8 | ${at(3)}) >>> 0)`,
      u64: `getU64(x, ${o})`,
      addr: `addrText(x.subarray(${o}, ${end}))`,
    }[f.type as string];
    const array = f.type.startsWith('char') ? `getChars(x, ${o}, ${end})` : `x.slice(${o}, ${end})`;
    props.push(`${f.prop}: ${get ?? array},`);
  }
  const body = [
    `if (x.length < ${size}) tooShort(${JSON.stringify(name)}, x.length, ${size});`,
    `return {\n${props.join('\n')}\n};`,
  ];
  return compile(body.join('\n'));
}

function tooShort(name: string, got: number, want: number): never {
  throw new ProxyError('KPT_INPUT_INVALID', `struct ${name}: ${got} bytes, want ${want}`);
}

// 64-bit fields go through one 8-byte scratch buffer rather than a DataView
// made for each value. Its byte order is the host's, which is the order the
// programs' __u64 fields are in.
const scratch64 = new BigUint64Array(1);
const scratch8 = new Uint8Array(scratch64.buffer);

function putU64(b: Uint8Array, off: number, n: bigint): void {
  scratch64[0] = n;
  b.set(scratch8, off);
}

function getU64(b: Uint8Array, off: number): bigint {
  for (let i = 0; i < 8; i++) scratch8[i] = b[off + i]!;
  return scratch64[0]!;
}

/** NUL-terminated within the field: at most len-1 characters, ASCII (Kubernetes names are DNS labels). */
function putChars(b: Uint8Array, off: number, len: number, s: string): void {
  const m = Math.min(s.length, len - 1);
  for (let i = 0; i < m; i++) b[off + i] = s.charCodeAt(i) & 0x7f;
}

function putBytes(b: Uint8Array, off: number, len: number, v: Uint8Array): void {
  b.set(v.subarray(0, len), off);
}

function getChars(b: Uint8Array, off: number, end: number): string {
  const s = b.subarray(off, end);
  const nul = s.indexOf(0);
  // One call builds a flat string (appending char by char makes a rope).
  return String.fromCharCode.apply(null, s.subarray(0, nul < 0 ? s.length : nul) as unknown as number[]);
}

// ---- integers ----------------------------------------------------------------

export function putU16(b: Uint8Array, off: number, n: number): void {
  b[off] = n & 0xff;
  b[off + 1] = (n >>> 8) & 0xff;
}
export function putBe16(b: Uint8Array, off: number, n: number): void {
  b[off] = (n >>> 8) & 0xff;
  b[off + 1] = n & 0xff;
}
export function putU32(b: Uint8Array, off: number, n: number): void {
  b[off] = n & 0xff;
  b[off + 1] = (n >>> 8) & 0xff;
  b[off + 2] = (n >>> 16) & 0xff;
  b[off + 3] = (n >>> 24) & 0xff;
}
export function putBe32(b: Uint8Array, off: number, n: number): void {
  b[off] = (n >>> 24) & 0xff;
  b[off + 1] = (n >>> 16) & 0xff;
  b[off + 2] = (n >>> 8) & 0xff;
  b[off + 3] = n & 0xff;
}

// ---- addresses (union kpt_addr) ------------------------------------------------

/** The 16-byte form of an IP (IPv4 mapped); throws on a non-address. */
export function addrBytes(ip: string): Uint8Array {
  const p = parseIP(ip);
  if (!p) throw new ProxyError('KPT_INPUT_INVALID', `not an IP address: ${JSON.stringify(ip)}`);
  if (p.family === 'IPv6') return p.bytes;
  const out = new Uint8Array(16);
  out[10] = 0xff;
  out[11] = 0xff;
  out.set(p.bytes, 12);
  return out;
}

/** Writes ip's 16-byte form at off. */
export function putAddr(b: Uint8Array, off: number, ip: string): void {
  if (!putIPv4Mapped(b, off, ip)) b.set(addrBytes(ip), off);
}

/**
 * A canonical dotted quad ("10.1.2.3", as every address in a SyncState is)
 * written as ::ffff:a.b.c.d at off; false for anything else (the caller then
 * uses the generic parser, which also reports what is not an address). Hot in
 * full renders, so it skips the parser.
 */
function putIPv4Mapped(b: Uint8Array, off: number, ip: string): boolean {
  let part = 0;
  let digits = 0;
  let i = 12;
  for (let c = 0; c < ip.length; c++) {
    const ch = ip.charCodeAt(c);
    if (ch >= 48 && ch <= 57) {
      part = part * 10 + (ch - 48);
      if (++digits > 3 || part > 255) return false;
    } else if (ch === 46 && digits > 0 && i < 15) {
      b[off + i++] = part;
      part = 0;
      digits = 0;
    } else return false;
  }
  if (digits === 0 || i !== 15) return false;
  b[off + 15] = part;
  b[off + 10] = 0xff;
  b[off + 11] = 0xff;
  return true;
}

export function isMapped(b: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false;
  return b[10] === 0xff && b[11] === 0xff;
}

/** Text of a 16-byte address (IPv4-mapped shown as IPv4). */
export function addrText(b: Uint8Array): string {
  return isMapped(b) ? formatIP(b.subarray(12, 16)) : formatIP(b.subarray(0, 16));
}
