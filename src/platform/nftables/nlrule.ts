// Our rule texts compiled to nf_tables expressions, as nft 1.0.6 compiles the
// same text (`nft --debug=netlink` shows both). Only the grammar the renderers
// write (src/dataplane/nftables: static.ts, serviceport.ts; the userspace
// mode's table, src/dataplane/userspace/rules.ts) is understood;
// anything else returns null and the caller refuses the batch, so a renderer
// change that this file does not know cannot reach the kernel half-encoded.
//
//   matches:    ct state new | ct status dnat | fib saddr|daddr type local
//               ip|ip6 saddr|daddr [!=] ADDR | CIDR | { list } | @set
//               FIELD . FIELD ... [vmap] @set  (FIELD: ip saddr|daddr, meta l4proto, th dport)
//               meta l4proto tcp|udp|sctp | meta l4proto { tcp, udp, ... }
//               iifname [!=] "name"|"prefix*" | mark and M != N | numgen random mod N K
//   statements: mark set mark or|xor M | masquerade fully-random | reject | drop
//               jump|goto CHAIN | dnat to ADDR:PORT | update @set { ip saddr }
//               dnat ip addr . port to numgen random mod N map @m | { K : ADDR . PORT , ... }
//               numgen random mod N vmap { K : goto CHAIN , ... }
//               redirect to : FIELD . FIELD ... map @m | dnat to ip|ip6 saddr : FIELD . ... map @m
//
// nft shortens what it can: one-element lists become a comparison, and a
// prefix on a byte boundary loads only its bytes (`ip saddr 10.0.0.0/8`
// loads one byte); other prefixes load the whole address and mask it.
import { parseCIDR, parseIP } from '../../core/ip.js';
import type { NftFamily } from '../../dataplane/nftables/names.js';
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

/** Words, quoted strings, braces and commas. */
function tokenize(text: string): string[] {
  return text.match(/"[^"]*"|[{},]|[^\s{},]+/g) ?? [];
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

class Parser {
  private i = 0;
  readonly exprs: Expr[] = [];
  readonly anon: AnonSet[] = [];

  constructor(
    private readonly t: readonly string[],
    private readonly fam: NftFamily,
  ) {}

  private peek(k = 0): string | undefined {
    return this.t[this.i + k];
  }
  private take(): string | undefined {
    return this.t[this.i++];
  }
  private expect(...words: string[]): boolean {
    for (const w of words) if (this.take() !== w) return false;
    return true;
  }
  private num(): number | null {
    const s = this.take();
    if (s === undefined) return null;
    const n = /^0x[0-9a-f]+$/i.test(s) ? parseInt(s, 16) : /^\d+$/.test(s) ? Number(s) : NaN;
    return Number.isFinite(n) && n >= 0 && n <= 0xffffffff ? n : null;
  }

  run(): boolean {
    while (this.i < this.t.length) if (!this.item()) return false;
    return true;
  }

  private item(): boolean {
    const w = this.peek();
    switch (w) {
      case 'ct':
        return this.ct();
      case 'ip':
      case 'ip6':
      case 'th':
        return w !== this.fam && w !== 'th' ? false : this.peek(2) === '.' ? this.concat() : this.addrMatch();
      case 'meta':
        if (this.peek(1) !== 'l4proto') return false;
        if (this.peek(2) === '.') return this.concat();
        this.i += 2;
        return this.peek() === '{' ? this.l4protoSet() : this.l4proto();
      case 'fib':
        return this.fib();
      case 'iifname':
        return this.iifname();
      case 'mark':
        return this.peek(1) === 'and' ? this.markAnd() : this.markSet();
      case 'numgen':
        return this.numgen();
      case 'masquerade':
        this.i++;
        if (this.peek() === 'fully-random') {
          this.i++;
          this.exprs.push({ k: 'masq', flags: NF_NAT_RANGE_PROTO_RANDOM_FULLY });
        } else this.exprs.push({ k: 'masq' });
        return true;
      case 'reject':
        this.i++;
        this.exprs.push({ k: 'reject', code: this.fam === 'ip' ? 3 /* port unreachable */ : 4 });
        return true;
      case 'drop':
        this.i++;
        this.exprs.push({ k: 'verdict', code: VERDICT.DROP });
        return true;
      case 'jump':
      case 'goto': {
        this.i++;
        const chain = this.take();
        if (chain === undefined) return false;
        this.exprs.push({ k: 'verdict', code: w === 'jump' ? VERDICT.JUMP : VERDICT.GOTO, chain });
        return true;
      }
      case 'dnat':
        return this.peek(1) === 'to' && this.peek(3) === 'saddr' ? this.natFromMap() : this.dnat();
      case 'redirect':
        return this.natFromMap();
      case 'update':
        return this.update();
      default:
        return false;
    }
  }

  /** ct state new | ct status dnat: load, mask the bit, compare with zero. */
  private ct(): boolean {
    this.i++;
    const what = this.take();
    const val = this.take();
    let key: number;
    let bit: number;
    if (what === 'state' && val === 'new') [key, bit] = [CT.STATE, 0x8];
    else if (what === 'status' && val === 'dnat') [key, bit] = [CT.STATUS, 0x20];
    else return false;
    this.exprs.push(
      { k: 'ct', key, dreg: NFT_REG_1 },
      { k: 'bitwise', reg: NFT_REG_1, len: 4, mask: hostU32(bit), xor: hostU32(0), withOp: false },
      { k: 'cmp', sreg: NFT_REG_1, op: CMP.NEQ, data: hostU32(0) },
    );
    return true;
  }

  /** One field of a concatenation into word `word`; returns its length in bytes. */
  private field(word: number): number | null {
    const a = this.take();
    const b = this.take();
    const dreg = reg32(word);
    if (a === this.fam && (b === 'saddr' || b === 'daddr')) {
      const f = ADDR[this.fam];
      this.exprs.push({ k: 'payload', dreg, base: PAYLOAD_BASE.NETWORK, offset: f[b], len: f.len });
      return f.len;
    }
    if (a === 'meta' && b === 'l4proto') {
      this.exprs.push({ k: 'meta', key: META.L4PROTO, dreg });
      return 1;
    }
    if (a === 'th' && b === 'dport') {
      this.exprs.push({ k: 'payload', dreg, base: PAYLOAD_BASE.TRANSPORT, offset: 2, len: 2 });
      return 2;
    }
    return null;
  }

  /** FIELD . FIELD ... then `vmap @m` or `@set`. */
  private concat(): boolean {
    return this.fields(0) && this.lookupTail(NFT_REG_1);
  }

  /** FIELD . FIELD ... loaded from 32-bit word `word` on. */
  private fields(word: number): boolean {
    for (;;) {
      const len = this.field(word);
      if (len === null) return false;
      word += (len + 3) >> 2;
      if (this.peek() !== '.') return true;
      this.i++;
    }
  }

  private lookupTail(sreg: number, inv = false): boolean {
    const vmap = this.peek() === 'vmap';
    if (vmap) this.i++;
    const ref = this.take();
    if (!ref?.startsWith('@') || ref.length < 2) return false;
    this.exprs.push({
      k: 'lookup',
      sreg,
      set: ref.slice(1),
      ...(vmap ? { dreg: NFT_REG_VERDICT } : {}),
      ...(inv ? { inv } : {}),
    });
    return true;
  }

  /** ip saddr|daddr [!=] ADDR | CIDR | { list } | @set */
  private addrMatch(): boolean {
    this.i++;
    const which = this.take();
    if (which !== 'saddr' && which !== 'daddr') return false;
    const f = ADDR[this.fam];
    const neq = this.peek() === '!=';
    if (neq) this.i++;
    const load = (len: number): Expr => ({
      k: 'payload',
      dreg: NFT_REG_1,
      base: PAYLOAD_BASE.NETWORK,
      offset: f[which],
      len,
    });
    if (this.peek()?.startsWith('@')) {
      this.exprs.push(load(f.len));
      return this.lookupTail(NFT_REG_1, neq);
    }
    let items: string[];
    if (this.peek() === '{') {
      const list = this.braceList();
      if (!list) return false;
      items = list.map((e) => e.join(' '));
    } else items = [this.take() ?? ''];
    if (items.length === 1) return this.addrCompare(load, items[0]!, neq);
    const set = addrsSet(this.fam, which, items);
    if (!set) return false;
    this.exprs.push(load(f.len), {
      k: 'lookup',
      sreg: NFT_REG_1,
      set: '__set%d',
      anon: this.anon.push(set) - 1,
      ...(neq ? { inv: true } : {}),
    });
    return true;
  }

  /** One address or prefix: nft's comparison (shortened on byte boundaries). */
  private addrCompare(load: (len: number) => Expr, item: string, neq: boolean): boolean {
    const op = neq ? CMP.NEQ : CMP.EQ;
    const full = ADDR[this.fam].len;
    if (!item.includes('/')) {
      const ip = parseIP(item);
      if (!ip || ip.bytes.length !== full) return false;
      this.exprs.push(load(full), { k: 'cmp', sreg: NFT_REG_1, op, data: ip.bytes });
      return true;
    }
    const c = parseCIDR(item);
    if (!c || c.network.length !== full) return false;
    if (c.prefix % 8 === 0 && c.prefix > 0) {
      const n = c.prefix / 8;
      this.exprs.push(load(n), { k: 'cmp', sreg: NFT_REG_1, op, data: c.network.slice(0, n) });
      return true;
    }
    const mask = new Uint8Array(full);
    for (let i = 0; i < full; i++) mask[i] = (0xff << (8 - Math.max(0, Math.min(8, c.prefix - i * 8)))) & 0xff;
    this.exprs.push(
      load(full),
      { k: 'bitwise', reg: NFT_REG_1, len: full, mask, xor: new Uint8Array(full), withOp: false },
      { k: 'cmp', sreg: NFT_REG_1, op, data: c.network },
    );
    return true;
  }

  /** `{ a, b }` or `{ k : v , ... }`: each entry as its words. */
  private braceList(): string[][] | null {
    if (this.take() !== '{') return null;
    const out: string[][] = [[]];
    for (;;) {
      const w = this.take();
      if (w === undefined) return null;
      if (w === '}') break;
      if (w === ',') out.push([]);
      else out[out.length - 1]!.push(w);
    }
    return out.some((e) => e.length === 0) ? null : out;
  }

  /** meta l4proto { tcp, udp }: an inline set of protocols. */
  private l4protoSet(): boolean {
    const list = this.braceList();
    const protos = list?.map((e) => (e.length === 1 ? PROTO[e[0]!] : undefined));
    if (!protos || protos.some((p) => p === undefined)) return false;
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

  /**
   * The port from a named map keyed by the packet: `redirect to : KEY map
   * @m` (KEY from register 1, the port back into it) or `dnat to ip saddr :
   * KEY map @m` (the address into register 1, so KEY and the port use
   * register 2).
   */
  private natFromMap(): boolean {
    const redirect = this.take() === 'redirect';
    if (!this.expect('to')) return false;
    const nfproto = NFPROTO[this.fam];
    let reg = NFT_REG_1;
    if (!redirect) {
      if (!this.expect(this.fam, 'saddr')) return false;
      const f = ADDR[this.fam];
      this.exprs.push({ k: 'payload', dreg: NFT_REG_1, base: PAYLOAD_BASE.NETWORK, offset: f.saddr, len: f.len });
      reg = NFT_REG_2;
    }
    if (!this.expect(':') || !this.fields(reg === NFT_REG_1 ? 0 : 4) || !this.expect('map')) return false;
    const ref = this.take();
    if (!ref?.startsWith('@') || ref.length < 2) return false;
    this.exprs.push({ k: 'lookup', sreg: reg, dreg: reg, set: ref.slice(1) });
    this.exprs.push(
      redirect
        ? { k: 'redir', regProto: reg, flags: NF_NAT_RANGE_PROTO_SPECIFIED }
        : { k: 'nat', family: nfproto, regAddr: NFT_REG_1, regProto: reg, flags: NF_NAT_RANGE_PROTO_SPECIFIED },
    );
    return true;
  }

  private l4proto(): boolean {
    const p = PROTO[this.take() ?? ''];
    if (p === undefined) return false;
    this.exprs.push(
      { k: 'meta', key: META.L4PROTO, dreg: NFT_REG_1 },
      { k: 'cmp', sreg: NFT_REG_1, op: CMP.EQ, data: Uint8Array.of(p) },
    );
    return true;
  }

  private fib(): boolean {
    this.i++;
    const which = this.take();
    if ((which !== 'saddr' && which !== 'daddr') || !this.expect('type', 'local')) return false;
    this.exprs.push(
      { k: 'fib', flags: which === 'saddr' ? 1 : 2, result: FIB_RESULT_ADDRTYPE, dreg: NFT_REG_1 },
      { k: 'cmp', sreg: NFT_REG_1, op: CMP.EQ, data: hostU32(RTN_LOCAL) },
    );
    return true;
  }

  /** iifname "eth0" compares all 16 bytes; iifname "veth*" only the prefix. */
  private iifname(): boolean {
    this.i++;
    const neq = this.peek() === '!=';
    if (neq) this.i++;
    const m = /^"([^"*]+)(\*?)"$/.exec(this.take() ?? '');
    if (!m || Buffer.byteLength(m[1]!) >= IFNAMSIZ) return false;
    const name = Buffer.from(m[1]!);
    const data = m[2] === '*' ? name : Buffer.concat([name, Buffer.alloc(IFNAMSIZ - name.length)]);
    this.exprs.push(
      { k: 'meta', key: META.IIFNAME, dreg: NFT_REG_1 },
      { k: 'cmp', sreg: NFT_REG_1, op: neq ? CMP.NEQ : CMP.EQ, data },
    );
    return true;
  }

  /** mark and M != N */
  private markAnd(): boolean {
    this.i += 2;
    const m = this.num();
    if (m === null || this.take() !== '!=') return false;
    const n = this.num();
    if (n === null) return false;
    this.exprs.push(
      { k: 'meta', key: META.MARK, dreg: NFT_REG_1 },
      { k: 'bitwise', reg: NFT_REG_1, len: 4, mask: hostU32(m), xor: hostU32(0), withOp: true },
      { k: 'cmp', sreg: NFT_REG_1, op: CMP.NEQ, data: hostU32(n) },
    );
    return true;
  }

  /** mark set mark or M (mask ~M, xor M) | mark set mark xor M (mask all, xor M) */
  private markSet(): boolean {
    if (!this.expect('mark', 'set', 'mark')) return false;
    const op = this.take();
    const m = this.num();
    if (m === null || (op !== 'or' && op !== 'xor')) return false;
    const mask = op === 'or' ? ~m >>> 0 : 0xffffffff;
    this.exprs.push(
      { k: 'meta', key: META.MARK, dreg: NFT_REG_1 },
      { k: 'bitwise', reg: NFT_REG_1, len: 4, mask: hostU32(mask), xor: hostU32(m), withOp: true },
      { k: 'metaSet', key: META.MARK, sreg: NFT_REG_1 },
    );
    return true;
  }

  /** numgen random mod N (K | vmap { ... }) */
  private numgen(): boolean {
    const mod = this.numgenHead();
    if (mod === null) return false;
    if (this.peek() === 'vmap') {
      this.i++;
      const list = this.braceList();
      if (!list) return false;
      const entries: Array<[number, number, string]> = [];
      for (const e of list) {
        if (e.length !== 4 || e[1] !== ':' || !/^\d+$/.test(e[0]!) || (e[2] !== 'goto' && e[2] !== 'jump'))
          return false;
        entries.push([Number(e[0]), e[2] === 'goto' ? VERDICT.GOTO : VERDICT.JUMP, e[3]!]);
      }
      this.exprs.push({
        k: 'lookup',
        sreg: NFT_REG_1,
        dreg: NFT_REG_VERDICT,
        set: '__map%d',
        anon: this.anon.push({ kind: 'vmap', entries }) - 1,
      });
      return true;
    }
    const v = this.num();
    if (v === null) return false;
    this.exprs.push({ k: 'cmp', sreg: NFT_REG_1, op: CMP.EQ, data: hostU32(v) });
    return true;
  }

  private numgenHead(): number | null {
    if (!this.expect('numgen', 'random', 'mod')) return null;
    const mod = this.num();
    if (mod === null || mod === 0) return null;
    this.exprs.push({ k: 'numgen', dreg: NFT_REG_1, mod, offset: 0 });
    return mod;
  }

  private dnat(): boolean {
    this.i++;
    const nfproto = NFPROTO[this.fam];
    if (this.peek() === 'to') {
      this.i++;
      const hp = /^\[?([^\]]+?)\]?:(\d+)$/.exec(this.take() ?? '');
      const ip = hp ? parseIP(hp[1]) : null;
      if (!hp || !ip || ip.bytes.length !== ADDR[this.fam].len || Number(hp[2]) > 65535) return false;
      const port = Buffer.alloc(2);
      port.writeUInt16BE(Number(hp[2]));
      this.exprs.push(
        { k: 'immediate', dreg: NFT_REG_1, data: ip.bytes },
        { k: 'immediate', dreg: NFT_REG_2, data: port },
        { k: 'nat', family: nfproto, regAddr: NFT_REG_1, regProto: NFT_REG_2, flags: NF_NAT_RANGE_PROTO_SPECIFIED },
      );
      return true;
    }
    if (!this.expect(this.fam, 'addr', '.', 'port', 'to')) return false;
    if (this.numgenHead() === null || this.take() !== 'map') return false;
    // The port follows the address in the data register: word 1 (IPv4) or 4.
    const regProto = reg32(ADDR[this.fam].len / 4);
    if (this.peek()?.startsWith('@')) {
      // A named endpoint map keyed by intervals: nft converts the value to network order first.
      this.exprs.push(
        { k: 'hton', reg: NFT_REG_1, len: 4, size: 4 },
        { k: 'lookup', sreg: NFT_REG_1, dreg: NFT_REG_1, set: this.take()!.slice(1) },
        { k: 'nat', family: nfproto, regAddr: NFT_REG_1, regProto },
      );
      return true;
    }
    const list = this.braceList();
    if (!list) return false;
    const entries: Array<[number, Buffer]> = [];
    for (const e of list) {
      if (e.length !== 5 || e[1] !== ':' || e[3] !== '.' || !/^\d+$/.test(e[0]!) || !/^\d+$/.test(e[4]!)) return false;
      const ip = parseIP(e[2]);
      if (!ip || ip.bytes.length !== ADDR[this.fam].len || Number(e[4]) > 65535) return false;
      const data = Buffer.alloc(ip.bytes.length + 4);
      data.set(ip.bytes);
      data.writeUInt16BE(Number(e[4]), ip.bytes.length);
      entries.push([Number(e[0]), data]);
    }
    this.exprs.push(
      {
        k: 'lookup',
        sreg: NFT_REG_1,
        dreg: NFT_REG_1,
        set: '__map%d',
        anon: this.anon.push({ kind: 'dnatmap', family: this.fam, entries }) - 1,
      },
      { k: 'nat', family: nfproto, regAddr: NFT_REG_1, regProto },
    );
    return true;
  }

  /** update @set { ip saddr } */
  private update(): boolean {
    this.i++;
    const ref = this.take();
    if (!ref?.startsWith('@') || !this.expect('{', this.fam, 'saddr', '}')) return false;
    const f = ADDR[this.fam];
    this.exprs.push(
      { k: 'payload', dreg: NFT_REG_1, base: PAYLOAD_BASE.NETWORK, offset: f.saddr, len: f.len },
      { k: 'dynsetUpdate', sreg: NFT_REG_1, set: ref.slice(1) },
    );
    return true;
  }
}

/** The expressions of one rule, or null when the text is outside our grammar. */
export function compileRule(text: string, family: NftFamily): CompiledRule | null {
  const p = new Parser(tokenize(text), family);
  return p.run() ? { exprs: p.exprs, anon: p.anon } : null;
}
