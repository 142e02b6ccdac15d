// Rule text back to a body (rule.ts), for rules that come as text only: the
// renderers give every rule its body, so this reads hand-written rules (the
// netlink encoder's tests, a text-only producer) and nothing we render.
// It knows exactly the grammar of rule.ts and returns null for anything else.
import type { NftFamily } from './names.js';
import type { Dir, Field, Item, Pick, RuleBody } from './rule.js';

/** Words, quoted strings, braces and commas. */
function tokenize(text: string): string[] {
  return text.match(/"[^"]*"|[{},]|[^\s{},]+/g) ?? [];
}

const FAMS: ReadonlySet<string> = new Set(['ip', 'ip6']);
const FIELDS: ReadonlySet<string> = new Set<Field>([
  'ip saddr',
  'ip daddr',
  'ip6 saddr',
  'ip6 daddr',
  'meta l4proto',
  'th dport',
]);

class Parser {
  private i = 0;
  readonly body: Item[] = [];

  constructor(private readonly t: readonly string[]) {}

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
  private push(i: Item | null): boolean {
    if (i === null) return false;
    this.body.push(i);
    return true;
  }
  private ref(): string | null {
    const r = this.take();
    return r?.startsWith('@') && r.length > 1 ? r.slice(1) : null;
  }

  run(): boolean {
    while (this.i < this.t.length) if (!this.item()) return false;
    return this.body.length > 0;
  }

  private item(): boolean {
    const w = this.take();
    switch (w) {
      case 'ct': {
        const what = `${this.take()} ${this.take()}`;
        return this.push(
          what === 'state new' ? { k: 'ctStateNew' } : what === 'status dnat' ? { k: 'ctStatusDnat' } : null,
        );
      }
      case 'ip':
      case 'ip6':
      case 'meta':
      case 'th':
        this.i--;
        return this.peek(2) === '.' ? this.concat() : w === 'meta' ? this.l4proto() : this.addrMatch();
      case 'fib': {
        const dir = this.take();
        return (
          (dir === 'saddr' || dir === 'daddr') && this.expect('type', 'local') && this.push({ k: 'fibLocal', dir })
        );
      }
      case 'iifname': {
        const neq = this.peek() === '!=';
        if (neq) this.i++;
        const m = /^"([^"*]+)(\*?)"$/.exec(this.take() ?? '');
        return m !== null && this.push({ k: 'iifname', neq, name: m[1]!, prefix: m[2] === '*' });
      }
      case 'mark':
        return this.peek() === 'and' ? this.markAnd() : this.markSet();
      case 'numgen':
      case 'jhash':
        this.i--;
        return this.numgen();
      case 'masquerade': {
        const fullyRandom = this.peek() === 'fully-random';
        if (fullyRandom) this.i++;
        return this.push({ k: 'masquerade', fullyRandom });
      }
      case 'reject':
      case 'drop':
        return this.push({ k: w });
      case 'jump':
      case 'goto': {
        const chain = this.take();
        return chain !== undefined && this.push({ k: w, chain });
      }
      case 'dnat':
        return this.dnat();
      case 'redirect': {
        if (!this.expect('to', ':')) return false;
        const fields = this.fields();
        const map = fields && this.expect('map') ? this.ref() : null;
        return map !== null && this.push({ k: 'redirectMap', fields: fields!, map });
      }
      case 'update': {
        const set = this.ref();
        if (set === null || !this.expect('{')) return false;
        const fam = this.take();
        return FAMS.has(fam ?? '') && this.expect('saddr', '}')
          ? this.push({ k: 'updateSaddr', fam: fam as NftFamily, set })
          : false;
      }
      default:
        return false;
    }
  }

  /** FIELD . FIELD ... */
  private fields(): Field[] | null {
    const out: Field[] = [];
    for (;;) {
      const f = `${this.take()} ${this.take()}`;
      if (!FIELDS.has(f)) return null;
      out.push(f as Field);
      if (this.peek() !== '.') return out;
      this.i++;
    }
  }

  /** FIELD . FIELD ... then `vmap @m` or `@set`. */
  private concat(): boolean {
    const fields = this.fields();
    if (!fields) return false;
    const vmap = this.peek() === 'vmap';
    if (vmap) this.i++;
    const set = this.ref();
    return set !== null && this.push({ k: 'lookup', fields, set, vmap });
  }

  /** ip saddr|daddr [!=] ADDR | CIDR | { list } | @set */
  private addrMatch(): boolean {
    const fam = this.take();
    const dir = this.take();
    if (!FAMS.has(fam ?? '') || (dir !== 'saddr' && dir !== 'daddr')) return false;
    const f = fam as NftFamily;
    const d: Dir = dir;
    const neq = this.peek() === '!=';
    if (neq) this.i++;
    if (this.peek()?.startsWith('@')) {
      const set = this.ref();
      return set !== null && this.push({ k: 'addrIn', fam: f, dir: d, neq, set });
    }
    if (this.peek() === '{') {
      const list = this.braceList();
      return (
        list !== null && this.push({ k: 'addr', fam: f, dir: d, neq, addrs: list.map((e) => e.join(' ')), sep: ', ' })
      );
    }
    const a = this.take();
    return a !== undefined && this.push({ k: 'addr', fam: f, dir: d, neq, addrs: [a] });
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

  /** meta l4proto P | meta l4proto { P, ... } */
  private l4proto(): boolean {
    if (!this.expect('meta', 'l4proto')) return false;
    if (this.peek() !== '{') {
      const p = this.take();
      return p !== undefined && this.push({ k: 'l4proto', protos: [p] });
    }
    const list = this.braceList();
    return (
      list !== null && list.every((e) => e.length === 1) && this.push({ k: 'l4proto', protos: list.map((e) => e[0]!) })
    );
  }

  /** mark and M != N */
  private markAnd(): boolean {
    this.i++;
    const mask = this.num();
    if (mask === null || this.take() !== '!=') return false;
    const value = this.num();
    return value !== null && this.push({ k: 'markAnd', mask, value });
  }

  /** mark set mark or|xor M */
  private markSet(): boolean {
    if (!this.expect('set', 'mark')) return false;
    const op = this.take();
    const mark = this.num();
    return mark !== null && (op === 'or' || op === 'xor') && this.push({ k: 'markSet', op, mark });
  }

  /** numgen random|inc mod N, or jhash FAM saddr [. th sport] mod N seed S (random: pick undefined). */
  private pick(): { mod: number; pick: Pick | undefined } | null {
    const w = this.take();
    if (w === 'numgen') {
      const how = this.take();
      if ((how !== 'random' && how !== 'inc') || !this.expect('mod')) return null;
      const mod = this.num();
      return mod === null ? null : { mod, pick: how === 'inc' ? { k: 'inc' } : undefined };
    }
    if (w !== 'jhash') return null;
    const fam = this.take();
    if (!FAMS.has(fam ?? '') || !this.expect('saddr')) return null;
    const sport = this.peek() === '.';
    if (sport && !this.expect('.', 'th', 'sport')) return null;
    if (!this.expect('mod')) return null;
    const mod = this.num();
    if (mod === null || !this.expect('seed')) return null;
    const seed = this.num();
    return seed === null ? null : { mod, pick: { k: 'jhash', fam: fam as NftFamily, sport, seed } };
  }

  /** numgen random mod N K | PICK vmap { K : goto CHAIN , ... } */
  private numgen(): boolean {
    const p = this.pick();
    if (p === null) return false;
    const { mod, pick } = p;
    if (this.peek() !== 'vmap') {
      const value = pick === undefined ? this.num() : null;
      return value !== null && this.push({ k: 'numgen', mod, value });
    }
    this.i++;
    const list = this.braceList();
    if (!list) return false;
    const entries: Array<{ key: number; verdict: 'goto' | 'jump'; chain: string }> = [];
    for (const e of list) {
      if (e.length !== 4 || e[1] !== ':' || !/^\d+$/.test(e[0]!) || (e[2] !== 'goto' && e[2] !== 'jump')) return false;
      entries.push({ key: Number(e[0]), verdict: e[2], chain: e[3]! });
    }
    return this.push({ k: 'numgenVmap', mod, entries, ...(pick ? { pick } : {}) });
  }

  /** dnat to ADDR:PORT | dnat to ip saddr : FIELDS map @m | dnat ip addr . port to numgen ... map @m | { ... } */
  private dnat(): boolean {
    if (this.peek() === 'to') {
      this.i++;
      if (this.peek(1) === 'saddr') {
        const fam = this.take();
        this.i++;
        if (!FAMS.has(fam ?? '') || !this.expect(':')) return false;
        const fields = this.fields();
        const map = fields && this.expect('map') ? this.ref() : null;
        return map !== null && this.push({ k: 'dnatSaddrMap', fam: fam as NftFamily, fields: fields!, map });
      }
      const hp = /^\[?([^\]]+?)\]?:(\d+)$/.exec(this.take() ?? '');
      return hp !== null && this.push({ k: 'dnat', addr: hp[1]!, port: Number(hp[2]) });
    }
    const fam = this.take();
    if (!FAMS.has(fam ?? '') || !this.expect('addr', '.', 'port', 'to')) return false;
    const f = fam as NftFamily;
    const p = this.pick();
    if (p === null || this.take() !== 'map') return false;
    const { mod, pick } = p;
    if (this.peek()?.startsWith('@')) {
      const map = this.ref();
      return map !== null && pick === undefined && this.push({ k: 'dnatNumgenMap', fam: f, mod, map });
    }
    const list = this.braceList();
    if (!list) return false;
    const entries: Array<{ key: number; addr: string; port: number }> = [];
    for (const e of list) {
      if (e.length !== 5 || e[1] !== ':' || e[3] !== '.' || !/^\d+$/.test(e[0]!) || !/^\d+$/.test(e[4]!)) return false;
      entries.push({ key: Number(e[0]), addr: e[2]!, port: Number(e[4]) });
    }
    return this.push({ k: 'dnatNumgenList', fam: f, mod, entries, ...(pick ? { pick } : {}) });
  }
}

/** The body of a rule's text, or null when the text is outside rule.ts's grammar. */
export function parseRule(text: string): RuleBody | null {
  const p = new Parser(tokenize(text));
  return p.run() ? p.body : null;
}
