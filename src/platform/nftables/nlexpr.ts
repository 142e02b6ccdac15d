// nf_tables expressions (the kernel's rule bytecode) as small data, and how
// each is written into a NEWRULE message. Attribute numbers and the order
// nft 1.0.6 writes them in come from the kernel's uapi nf_tables.h and from
// `nft --debug=mnl`; register numbers follow nft's convention (see reg32).
import type { NlWriter } from './nlwriter.js';

export const NFT_REG_VERDICT = 0;
export const NFT_REG_1 = 1;
export const NFT_REG_2 = 2;

/**
 * nft allocates concatenations in 32-bit register words counted from
 * NFT_REG32_00 (8) and names a word that starts a 16-byte register by the
 * 128-bit register's number: word 0 -> reg 1, word 4 -> reg 2, word 1 -> 9.
 */
export function reg32(word: number): number {
  return word % 4 === 0 ? NFT_REG_1 + word / 4 : 8 + word;
}

export const PAYLOAD_BASE = { NETWORK: 1, TRANSPORT: 2 } as const;
export const CMP = { EQ: 0, NEQ: 1 } as const;
export const META = { MARK: 3, IIFNAME: 6, L4PROTO: 16 } as const;
export const CT = { STATE: 0, STATUS: 2 } as const;
export const VERDICT = { DROP: 0, ACCEPT: 1, JUMP: -3, GOTO: -4, RETURN: -5 } as const;
export const NFT_LOOKUP_F_INV = 1;

export type Expr =
  | {
      readonly k: 'payload';
      readonly dreg: number;
      readonly base: number;
      readonly offset: number;
      readonly len: number;
    }
  | { readonly k: 'cmp'; readonly sreg: number; readonly op: number; readonly data: Uint8Array }
  | {
      readonly k: 'bitwise';
      readonly reg: number;
      readonly len: number;
      readonly mask: Uint8Array;
      readonly xor: Uint8Array;
      /** nft writes NFTA_BITWISE_OP only for statements (mark set ...), not for matches. */
      readonly withOp: boolean;
    }
  | { readonly k: 'meta'; readonly key: number; readonly dreg: number }
  | { readonly k: 'metaSet'; readonly key: number; readonly sreg: number }
  | { readonly k: 'ct'; readonly key: number; readonly dreg: number }
  | { readonly k: 'fib'; readonly flags: number; readonly result: number; readonly dreg: number }
  | {
      readonly k: 'lookup';
      readonly sreg: number;
      /** NFT_REG_VERDICT for a vmap, a data register for a map, undefined for a set. */
      readonly dreg?: number;
      readonly set: string;
      /** Index into the rule's anonymous sets (the set's batch id is filled in when written). */
      readonly anon?: number;
      readonly inv?: boolean;
    }
  | { readonly k: 'verdict'; readonly code: number; readonly chain?: string }
  | { readonly k: 'immediate'; readonly dreg: number; readonly data: Uint8Array }
  | {
      readonly k: 'nat';
      readonly family: number;
      readonly regAddr: number;
      readonly regProto: number;
      readonly flags?: number;
    }
  | {
      readonly k: 'numgen';
      readonly dreg: number;
      readonly mod: number;
      readonly offset: number;
      readonly inc?: boolean;
    }
  | {
      readonly k: 'jhash';
      readonly sreg: number;
      readonly dreg: number;
      readonly len: number;
      readonly mod: number;
      readonly seed: number;
    }
  | { readonly k: 'hton'; readonly reg: number; readonly len: number; readonly size: number }
  | { readonly k: 'masq'; readonly flags?: number }
  | { readonly k: 'redir'; readonly regProto: number; readonly flags: number }
  | { readonly k: 'reject'; readonly code: number }
  | { readonly k: 'dynsetUpdate'; readonly sreg: number; readonly set: string };

const NAMES: Record<Expr['k'], string> = {
  payload: 'payload',
  cmp: 'cmp',
  bitwise: 'bitwise',
  meta: 'meta',
  metaSet: 'meta',
  ct: 'ct',
  fib: 'fib',
  lookup: 'lookup',
  verdict: 'immediate',
  immediate: 'immediate',
  nat: 'nat',
  numgen: 'numgen',
  jhash: 'hash',
  hton: 'byteorder',
  masq: 'masq',
  redir: 'redir',
  reject: 'reject',
  dynsetUpdate: 'dynset',
};

/** One NFTA_LIST_ELEM of NFTA_RULE_EXPRESSIONS. anonIds maps a rule's anonymous set index to its batch id. */
export function writeExpr(w: NlWriter, e: Expr, anonIds: readonly number[]): void {
  const el = w.nest(1 /* NFTA_LIST_ELEM */);
  w.str(1 /* NFTA_EXPR_NAME */, NAMES[e.k]);
  const d = w.nest(2 /* NFTA_EXPR_DATA */);
  switch (e.k) {
    case 'payload':
      w.u32be(1, e.dreg).u32be(2, e.base).u32be(3, e.offset).u32be(4, e.len);
      break;
    case 'cmp': {
      w.u32be(1, e.sreg).u32be(2, e.op);
      const n = w.nest(3);
      w.bytes(1 /* NFTA_DATA_VALUE */, e.data);
      w.close(n);
      break;
    }
    case 'bitwise': {
      w.u32be(1, e.reg).u32be(2, e.reg);
      if (e.withOp) w.u32be(6, 0 /* NFT_BITWISE_BOOL */);
      w.u32be(3, e.len);
      const m = w.nest(4);
      w.bytes(1, e.mask).close(m);
      const x = w.nest(5);
      w.bytes(1, e.xor).close(x);
      break;
    }
    case 'meta':
    case 'ct':
      w.u32be(2, e.key).u32be(1, e.dreg);
      break;
    case 'metaSet':
      w.u32be(2, e.key).u32be(3, e.sreg);
      break;
    case 'fib':
      w.u32be(3, e.flags).u32be(2, e.result).u32be(1, e.dreg);
      break;
    case 'lookup':
      w.u32be(2, e.sreg);
      if (e.dreg !== undefined) w.u32be(3, e.dreg);
      w.str(1, e.set);
      if (e.anon !== undefined) w.u32be(4, anonIds[e.anon]!);
      if (e.inv) w.u32be(5, NFT_LOOKUP_F_INV);
      break;
    case 'verdict': {
      w.u32be(1, NFT_REG_VERDICT);
      const data = w.nest(2);
      const v = w.nest(2 /* NFTA_DATA_VERDICT */);
      w.i32be(1, e.code);
      if (e.chain !== undefined) w.str(2, e.chain);
      w.close(v).close(data);
      break;
    }
    case 'immediate': {
      w.u32be(1, e.dreg);
      const data = w.nest(2);
      w.bytes(1, e.data).close(data);
      break;
    }
    case 'nat':
      w.u32be(1, 1 /* NFT_NAT_DNAT */).u32be(2, e.family).u32be(3, e.regAddr).u32be(5, e.regProto);
      if (e.flags !== undefined) w.u32be(7, e.flags);
      break;
    case 'numgen':
      w.u32be(1, e.dreg)
        .u32be(2, e.mod)
        .u32be(3, e.inc ? 0 /* NFT_NG_INCREMENTAL */ : 1 /* NFT_NG_RANDOM */);
      w.u32be(4, e.offset);
      break;
    case 'jhash':
      // NFTA_HASH_SREG, DREG, LEN, MODULUS, SEED, OFFSET, TYPE (NFT_HASH_JENKINS)
      w.u32be(1, e.sreg).u32be(2, e.dreg).u32be(3, e.len).u32be(4, e.mod).u32be(5, e.seed).u32be(6, 0).u32be(7, 0);
      break;
    case 'hton':
      w.u32be(1, e.reg).u32be(2, e.reg).u32be(3, 1 /* NFT_BYTEORDER_HTON */).u32be(4, e.len).u32be(5, e.size);
      break;
    case 'masq':
      if (e.flags !== undefined) w.u32be(1, e.flags);
      break;
    case 'redir':
      w.u32be(1, e.regProto).u32be(3, e.flags);
      break;
    case 'reject':
      w.u32be(1, 0 /* NFT_REJECT_ICMP_UNREACH */).u8(2, e.code);
      break;
    case 'dynsetUpdate':
      w.u32be(4, e.sreg).u32be(3, 1 /* NFT_DYNSET_OP_UPDATE */).str(1, e.set);
      break;
  }
  w.close(d).close(el);
}

/** A u32 in host order (meta mark, ct state, fib results and numgen values live in registers so). */
export function hostU32(n: number): Uint8Array {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0);
  return b;
}
