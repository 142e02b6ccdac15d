// Rule bodies (src/dataplane/nftables/rule.ts) compiled to nf_tables
// expressions, as nft 1.0.6 compiles the same text (`nft --debug=netlink`
// shows both). The body is what the renderers built, so nothing is parsed
// here; a value the kernel cannot take (an address of the other family, a
// bad prefix, an interface name too long) returns null and the caller
// refuses the batch, so a rule cannot reach the kernel half-encoded.
//
// nft shortens what it can: one-element lists become a comparison, and a
// prefix on a byte boundary loads only its bytes (`ip saddr 10.0.0.0/8`
// loads one byte); other prefixes load the whole address and mask it.
import { parseCIDR, parseIP } from '../../core/ip.js';
import type { NftFamily } from '../../dataplane/nftables/names.js';
import type { Field, Item, Pick, RuleBody } from '../../dataplane/nftables/rule.js';
import {
  CMP,
  CT,
  hostU32,
  META,
  NFT_REG_1,
  NFT_REG_2,
  NFT_REG_VERDICT,
  PAYLOAD_BASE,
  reg32,
  VERDICT,
  type Expr,
} from './nlexpr.js';
import { addrsSet, NFPROTO, PROTO, type AnonSet } from './nlset.js';

export interface CompiledRule {
  readonly exprs: readonly Expr[];
  readonly anon: readonly AnonSet[];
}

const ADDR = {
  ip: { saddr: 12, daddr: 16, len: 4 },
  ip6: { saddr: 8, daddr: 24, len: 16 },
} as const;

const FIB_RESULT_ADDRTYPE = 3;
const RTN_LOCAL = 2;
const NF_NAT_RANGE_PROTO_SPECIFIED = 2;
const NF_NAT_RANGE_PROTO_RANDOM_FULLY = 0x10;
const IFNAMSIZ = 16;

const u32 = (n: number) => Number.isInteger(n) && n >= 0 && n <= 0xffffffff;
const port16 = (n: number) => Number.isInteger(n) && n >= 0 && n <= 65535;

class Compiler {
  readonly exprs: Expr[] = [];
  readonly anon: AnonSet[] = [];

  constructor(private readonly fam: NftFamily) {}

  item(i: Item): boolean {
    switch (i.k) {
      case 'ctStateNew':
        return this.ctBit(CT.STATE, 0x8);
      case 'ctDirOriginal':
        // Only the traffic counters' table matches on it, and that table is written with nft -f: not
        // compiled here, so a batch holding it is refused rather than encoded unchecked.
        return false;
      case 'ctStatusDnat':
        return this.ctBit(CT.STATUS, 0x20);
      case 'fibLocal':
        this.exprs.push(
          { k: 'fib', flags: i.dir === 'saddr' ? 1 : 2, result: FIB_RESULT_ADDRTYPE, dreg: NFT_REG_1 },
          { k: 'cmp', sreg: NFT_REG_1, op: CMP.EQ, data: hostU32(RTN_LOCAL) },
        );
        return true;
      case 'addr':
        return i.fam === this.fam && this.addrMatch(i.dir, i.neq, i.addrs);
      case 'addrIn':
        if (i.fam !== this.fam) return false;
        this.exprs.push(this.load(i.dir, ADDR[this.fam].len));
        return this.lookup(NFT_REG_1, i.set, false, i.neq);
      case 'lookup':
        return this.fields(i.fields, 0) && this.lookup(NFT_REG_1, i.set, i.vmap, false);
      case 'l4proto':
        return i.protos.length === 1 ? this.l4proto(i.protos[0]!) : this.l4protoSet(i.protos);
      case 'iifname':
        return this.iifname(i.name, i.prefix, i.neq);
      case 'markAnd':
        if (!u32(i.mask) || !u32(i.value)) return false;
        this.exprs.push(
          { k: 'meta', key: META.MARK, dreg: NFT_REG_1 },
          { k: 'bitwise', reg: NFT_REG_1, len: 4, mask: hostU32(i.mask), xor: hostU32(0), withOp: true },
          { k: 'cmp', sreg: NFT_REG_1, op: CMP.NEQ, data: hostU32(i.value) },
        );
        return true;
      case 'numgen':
        if (!this.numgen(i.mod) || !u32(i.value)) return false;
        this.exprs.push({ k: 'cmp', sreg: NFT_REG_1, op: CMP.EQ, data: hostU32(i.value) });
        return true;
      case 'markSet': {
        // or M: mask ~M, xor M; xor M: mask all, xor M.
        if (!u32(i.mark)) return false;
        const mask = i.op === 'or' ? ~i.mark >>> 0 : 0xffffffff;
        this.exprs.push(
          { k: 'meta', key: META.MARK, dreg: NFT_REG_1 },
          { k: 'bitwise', reg: NFT_REG_1, len: 4, mask: hostU32(mask), xor: hostU32(i.mark), withOp: true },
          { k: 'metaSet', key: META.MARK, sreg: NFT_REG_1 },
        );
        return true;
      }
      case 'masquerade':
        this.exprs.push(i.fullyRandom ? { k: 'masq', flags: NF_NAT_RANGE_PROTO_RANDOM_FULLY } : { k: 'masq' });
        return true;
      case 'reject':
        this.exprs.push({ k: 'reject', code: this.fam === 'ip' ? 3 /* port unreachable */ : 4 });
        return true;
      case 'drop':
        this.exprs.push({ k: 'verdict', code: VERDICT.DROP });
        return true;
      case 'jump':
      case 'goto':
        this.exprs.push({ k: 'verdict', code: i.k === 'jump' ? VERDICT.JUMP : VERDICT.GOTO, chain: i.chain });
        return true;
      case 'dnat':
        return this.dnat(i.addr, i.port);
      case 'updateSaddr':
        if (i.fam !== this.fam) return false;
        this.exprs.push(this.load('saddr', ADDR[this.fam].len), { k: 'dynsetUpdate', sreg: NFT_REG_1, set: i.set });
        return true;
      case 'dnatNumgenMap':
        // A named endpoint map keyed by intervals: nft converts the value to network order first.
        if (i.fam !== this.fam || !this.numgen(i.mod)) return false;
        this.exprs.push(
          { k: 'hton', reg: NFT_REG_1, len: 4, size: 4 },
          { k: 'lookup', sreg: NFT_REG_1, dreg: NFT_REG_1, set: i.map },
          { k: 'nat', family: NFPROTO[this.fam], regAddr: NFT_REG_1, regProto: this.natPortReg() },
        );
        return true;
      case 'dnatNumgenList':
        return i.fam === this.fam && this.dnatNumgenList(i.mod, i.entries, i.pick);
      case 'numgenVmap': {
        if (!this.pick(i.mod, i.pick) || i.entries.some((e) => !u32(e.key))) return false;
        const entries = i.entries.map((e): [number, number, string] => [
          e.key,
          e.verdict === 'goto' ? VERDICT.GOTO : VERDICT.JUMP,
          e.chain,
        ]);
        this.exprs.push({
          k: 'lookup',
          sreg: NFT_REG_1,
          dreg: NFT_REG_VERDICT,
          set: '__map%d',
          anon: this.anon.push({ kind: 'vmap', entries }) - 1,
        });
        return true;
      }
      case 'redirectMap':
        return this.natFromMap(true, i.fields, i.map);
      case 'dnatSaddrMap':
        return i.fam === this.fam && this.natFromMap(false, i.fields, i.map);
    }
  }

  /** ct state new | ct status dnat: load, mask the bit, compare with zero. */
  private ctBit(key: number, bit: number): boolean {
    this.exprs.push(
      { k: 'ct', key, dreg: NFT_REG_1 },
      { k: 'bitwise', reg: NFT_REG_1, len: 4, mask: hostU32(bit), xor: hostU32(0), withOp: false },
      { k: 'cmp', sreg: NFT_REG_1, op: CMP.NEQ, data: hostU32(0) },
    );
    return true;
  }

  private load(dir: 'saddr' | 'daddr', len: number): Expr {
    return { k: 'payload', dreg: NFT_REG_1, base: PAYLOAD_BASE.NETWORK, offset: ADDR[this.fam][dir], len };
  }

  /** FIELD . FIELD ... loaded from 32-bit word `word` on. */
  private fields(fields: readonly Field[], word: number): boolean {
    if (fields.length === 0) return false;
    for (const f of fields) {
      const dreg = reg32(word);
      let len: number;
      if (f === 'meta l4proto') {
        this.exprs.push({ k: 'meta', key: META.L4PROTO, dreg });
        len = 1;
      } else if (f === 'th dport') {
        this.exprs.push({ k: 'payload', dreg, base: PAYLOAD_BASE.TRANSPORT, offset: 2, len: 2 });
        len = 2;
      } else {
        const [fam, dir] = f.split(' ') as [NftFamily, 'saddr' | 'daddr'];
        if (fam !== this.fam) return false;
        const a = ADDR[fam];
        this.exprs.push({ k: 'payload', dreg, base: PAYLOAD_BASE.NETWORK, offset: a[dir], len: a.len });
        len = a.len;
      }
      word += (len + 3) >> 2;
    }
    return true;
  }

  private lookup(sreg: number, set: string, vmap: boolean, inv: boolean): boolean {
    if (set === '') return false;
    this.exprs.push({
      k: 'lookup',
      sreg,
      set,
      ...(vmap ? { dreg: NFT_REG_VERDICT } : {}),
      ...(inv ? { inv } : {}),
    });
    return true;
  }

  /** ip saddr|daddr [!=] ADDR | CIDR | { list } */
  private addrMatch(dir: 'saddr' | 'daddr', neq: boolean, items: readonly string[]): boolean {
    if (items.length === 0) return false;
    if (items.length === 1) return this.addrCompare(dir, items[0]!, neq);
    const set = addrsSet(this.fam, dir, items);
    if (!set) return false;
    this.exprs.push(this.load(dir, ADDR[this.fam].len), {
      k: 'lookup',
      sreg: NFT_REG_1,
      set: '__set%d',
      anon: this.anon.push(set) - 1,
      ...(neq ? { inv: true } : {}),
    });
    return true;
  }

  /** One address or prefix: nft's comparison (shortened on byte boundaries). */
  private addrCompare(dir: 'saddr' | 'daddr', item: string, neq: boolean): boolean {
    const op = neq ? CMP.NEQ : CMP.EQ;
    const full = ADDR[this.fam].len;
    if (!item.includes('/')) {
      const ip = parseIP(item);
      if (!ip || ip.bytes.length !== full) return false;
      this.exprs.push(this.load(dir, full), { k: 'cmp', sreg: NFT_REG_1, op, data: ip.bytes });
      return true;
    }
    const c = parseCIDR(item);
    if (!c || c.network.length !== full) return false;
    if (c.prefix % 8 === 0 && c.prefix > 0) {
      const n = c.prefix / 8;
      this.exprs.push(this.load(dir, n), { k: 'cmp', sreg: NFT_REG_1, op, data: c.network.slice(0, n) });
      return true;
    }
    const mask = new Uint8Array(full);
    for (let i = 0; i < full; i++) mask[i] = (0xff << (8 - Math.max(0, Math.min(8, c.prefix - i * 8)))) & 0xff;
    this.exprs.push(
      this.load(dir, full),
      { k: 'bitwise', reg: NFT_REG_1, len: full, mask, xor: new Uint8Array(full), withOp: false },
      { k: 'cmp', sreg: NFT_REG_1, op, data: c.network },
    );
    return true;
  }

  private l4proto(name: string): boolean {
    const p = PROTO[name];
    if (p === undefined) return false;
    this.exprs.push(
      { k: 'meta', key: META.L4PROTO, dreg: NFT_REG_1 },
      { k: 'cmp', sreg: NFT_REG_1, op: CMP.EQ, data: Uint8Array.of(p) },
    );
    return true;
  }

  /** meta l4proto { tcp, udp }: an inline set of protocols. */
  private l4protoSet(names: readonly string[]): boolean {
    const protos = names.map((n) => PROTO[n]);
    if (protos.length === 0 || protos.some((p) => p === undefined)) return false;
    this.exprs.push(
      { k: 'meta', key: META.L4PROTO, dreg: NFT_REG_1 },
      {
        k: 'lookup',
        sreg: NFT_REG_1,
        set: '__set%d',
        anon: this.anon.push({ kind: 'protos', protos: protos as number[] }) - 1,
      },
    );
    return true;
  }

  /** iifname "eth0" compares all 16 bytes; iifname "veth*" only the prefix. */
  private iifname(n: string, prefix: boolean, neq: boolean): boolean {
    if (n === '' || n.includes('"') || n.includes('*') || Buffer.byteLength(n) >= IFNAMSIZ) return false;
    const name = Buffer.from(n);
    const data = prefix ? name : Buffer.concat([name, Buffer.alloc(IFNAMSIZ - name.length)]);
    this.exprs.push(
      { k: 'meta', key: META.IIFNAME, dreg: NFT_REG_1 },
      { k: 'cmp', sreg: NFT_REG_1, op: neq ? CMP.NEQ : CMP.EQ, data },
    );
    return true;
  }

  private numgen(mod: number): boolean {
    if (!u32(mod) || mod === 0) return false;
    this.exprs.push({ k: 'numgen', dreg: NFT_REG_1, mod, offset: 0 });
    return true;
  }

  /**
   * An endpoint choice's index into register 1: numgen random or inc, or
   * jhash of the client, whose address (and port, in the next word) nft
   * loads from register 2 on, so the hash can write register 1.
   */
  private pick(mod: number, p: Pick | undefined): boolean {
    if (p === undefined || p.k === 'random') return this.numgen(mod);
    if (!u32(mod) || mod === 0) return false;
    if (p.k === 'inc') {
      this.exprs.push({ k: 'numgen', dreg: NFT_REG_1, mod, offset: 0, inc: true });
      return true;
    }
    if (p.fam !== this.fam || !u32(p.seed)) return false;
    const a = ADDR[this.fam];
    this.exprs.push({ k: 'payload', dreg: NFT_REG_2, base: PAYLOAD_BASE.NETWORK, offset: a.saddr, len: a.len });
    let len = a.len;
    if (p.sport) {
      const dreg = reg32(4 + a.len / 4);
      this.exprs.push({ k: 'payload', dreg, base: PAYLOAD_BASE.TRANSPORT, offset: 0, len: 2 });
      len += 4; // the port's word, zero-padded
    }
    this.exprs.push({ k: 'jhash', sreg: NFT_REG_2, dreg: NFT_REG_1, len, mod, seed: p.seed });
    return true;
  }

  /** The port follows the address in the data register: word 1 (IPv4) or 4. */
  private natPortReg(): number {
    return reg32(ADDR[this.fam].len / 4);
  }

  private dnat(addr: string, port: number): boolean {
    const ip = parseIP(addr);
    if (!ip || ip.bytes.length !== ADDR[this.fam].len || !port16(port)) return false;
    const p = Buffer.alloc(2);
    p.writeUInt16BE(port);
    this.exprs.push(
      { k: 'immediate', dreg: NFT_REG_1, data: ip.bytes },
      { k: 'immediate', dreg: NFT_REG_2, data: p },
      {
        k: 'nat',
        family: NFPROTO[this.fam],
        regAddr: NFT_REG_1,
        regProto: NFT_REG_2,
        flags: NF_NAT_RANGE_PROTO_SPECIFIED,
      },
    );
    return true;
  }

  private dnatNumgenList(
    mod: number,
    list: ReadonlyArray<{ readonly key: number; readonly addr: string; readonly port: number }>,
    pick: Pick | undefined,
  ): boolean {
    if (!this.pick(mod, pick)) return false;
    const entries: Array<[number, Buffer]> = [];
    for (const e of list) {
      const ip = parseIP(e.addr);
      if (!u32(e.key) || !ip || ip.bytes.length !== ADDR[this.fam].len || !port16(e.port)) return false;
      const data = Buffer.alloc(ip.bytes.length + 4);
      data.set(ip.bytes);
      data.writeUInt16BE(e.port, ip.bytes.length);
      entries.push([e.key, data]);
    }
    this.exprs.push(
      {
        k: 'lookup',
        sreg: NFT_REG_1,
        dreg: NFT_REG_1,
        set: '__map%d',
        anon: this.anon.push({ kind: 'dnatmap', family: this.fam, entries }) - 1,
      },
      { k: 'nat', family: NFPROTO[this.fam], regAddr: NFT_REG_1, regProto: this.natPortReg() },
    );
    return true;
  }

  /**
   * The port from a named map keyed by the packet: `redirect to : KEY map
   * @m` (KEY from register 1, the port back into it) or `dnat to ip saddr :
   * KEY map @m` (the address into register 1, so KEY and the port use
   * register 2).
   */
  private natFromMap(redirect: boolean, fields: readonly Field[], map: string): boolean {
    let reg = NFT_REG_1;
    if (!redirect) {
      this.exprs.push(this.load('saddr', ADDR[this.fam].len));
      reg = NFT_REG_2;
    }
    if (!this.fields(fields, reg === NFT_REG_1 ? 0 : 4) || map === '') return false;
    this.exprs.push({ k: 'lookup', sreg: reg, dreg: reg, set: map });
    this.exprs.push(
      redirect
        ? { k: 'redir', regProto: reg, flags: NF_NAT_RANGE_PROTO_SPECIFIED }
        : {
            k: 'nat',
            family: NFPROTO[this.fam],
            regAddr: NFT_REG_1,
            regProto: reg,
            flags: NF_NAT_RANGE_PROTO_SPECIFIED,
          },
    );
    return true;
  }
}

/** The expressions of one rule, or null when a value in it cannot be encoded for this family. */
export function compileRule(body: RuleBody, family: NftFamily): CompiledRule | null {
  if (body.length === 0) return null;
  const c = new Compiler(family);
  for (const i of body) if (!c.item(i)) return null;
  return { exprs: c.exprs, anon: c.anon };
}
