// The BTF of a compiled BPF object, as `bpftool btf dump file OBJ -j` prints
// it (no privileges needed: bpftool only reads the file), with the few
// questions the layout tests ask of it: a struct by name, what a member's
// type is once typedefs and qualifiers are peeled off, how big a type is, and
// what each map of the .maps section was declared with.
import { execFileSync } from 'node:child_process';

export interface BtfMember {
  readonly name: string;
  readonly type_id: number;
  readonly bits_offset: number;
  readonly bitfield_size?: number;
}

export interface BtfType {
  readonly id: number;
  readonly kind: string;
  readonly name: string;
  readonly size?: number;
  readonly type_id?: number;
  readonly nr_elems?: number;
  readonly encoding?: string;
  readonly members?: readonly BtfMember[];
  readonly vars?: ReadonlyArray<{ readonly type_id: number }>;
}

/** A type with typedefs and qualifiers peeled off, and the typedef names met on the way. */
export interface Resolved {
  readonly type: BtfType;
  readonly typedefs: readonly string[];
}

/** One map of the .maps section: its __uint and __type declarations. */
export interface BtfMap {
  readonly name: string;
  /** __uint(type, ...): the BPF_MAP_TYPE_* number. */
  readonly type: number;
  /** __type(key, ...), or null when only key_size is given. */
  readonly key: BtfType | null;
  readonly keySize: number;
  readonly value: BtfType | null;
  readonly valueSize: number;
}

const PEELED = new Set(['TYPEDEF', 'CONST', 'VOLATILE', 'RESTRICT', 'TYPE_TAG']);

export class Btf {
  private readonly byId = new Map<number, BtfType>();

  constructor(types: readonly BtfType[]) {
    for (const t of types) this.byId.set(t.id, t);
  }

  static ofObject(path: string): Btf {
    const out = execFileSync('bpftool', ['btf', 'dump', 'file', path, '-j'], { encoding: 'utf8', maxBuffer: 1 << 26 });
    return new Btf((JSON.parse(out) as { types: BtfType[] }).types);
  }

  type(id: number): BtfType {
    const t = this.byId.get(id);
    if (!t) throw new TypeError(`BTF type ${id} is missing`);
    return t;
  }

  /** The STRUCT or UNION with this name, or undefined. */
  named(kind: 'STRUCT' | 'UNION', name: string): BtfType | undefined {
    for (const t of this.byId.values()) if (t.kind === kind && t.name === name) return t;
    return undefined;
  }

  resolve(id: number): Resolved {
    const typedefs: string[] = [];
    let t = this.type(id);
    while (PEELED.has(t.kind)) {
      if (t.kind === 'TYPEDEF') typedefs.push(t.name);
      t = this.type(t.type_id!);
    }
    return { type: t, typedefs };
  }

  sizeOf(id: number): number {
    const t = this.resolve(id).type;
    if (t.kind === 'ARRAY') return t.nr_elems! * this.sizeOf(t.type_id!);
    if (t.size === undefined) throw new TypeError(`BTF type ${id} (${t.kind}) has no size`);
    return t.size;
  }

  /** Every map of the object's .maps section. */
  maps(): BtfMap[] {
    const sec = [...this.byId.values()].find((t) => t.kind === 'DATASEC' && t.name === '.maps');
    if (!sec) throw new TypeError('no .maps section in the BTF');
    return sec.vars!.map(({ type_id }) => {
      const v = this.type(type_id);
      const def = this.resolve(v.type_id!).type;
      const member = (name: string) => def.members!.find((m) => m.name === name);
      // __uint(name, N) is a pointer to an int array of N elements; __type(name, T) a pointer to T.
      const pointee = (name: string) => {
        const m = member(name);
        return m ? this.type(this.resolve(m.type_id).type.type_id!) : null;
      };
      const uint = (name: string) => pointee(name)?.nr_elems ?? null;
      const key = pointee('key');
      const value = pointee('value');
      return {
        name: v.name,
        type: uint('type') ?? -1,
        key,
        keySize: key ? this.sizeOf(key.id) : (uint('key_size') ?? -1),
        value,
        valueSize: value ? this.sizeOf(value.id) : (uint('value_size') ?? -1),
      };
    });
  }
}
