// A transaction builder (knftables transaction.go). Building never throws:
// the first problem is kept and surfaces when the transaction is run, so a
// renderer can write straight-line code. toString() is the exact script sent
// to `nft -f`, which is applied atomically by the kernel.
import { ProxyError } from '../../core/errors.js';
import { TABLE_NAME, type NftFamily } from './names.js';
import { operationText, type NftObject, type Operation, type Verb } from './objects.js';

export class Transaction {
  private readonly ops: Operation[] = [];
  private firstError: ProxyError | null = null;

  constructor(
    readonly family: NftFamily,
    readonly table: string = TABLE_NAME,
  ) {}

  add(object: NftObject): this {
    return this.push('add', object);
  }
  delete(object: NftObject): this {
    return this.push('delete', object);
  }
  /** Flush a chain (its rules) or a set/map (its elements). */
  flush(object: NftObject): this {
    return this.push('flush', object);
  }

  get operations(): readonly Operation[] {
    return this.ops;
  }
  get numOperations(): number {
    return this.ops.length;
  }
  /** The first building error, if any; run() must refuse the transaction. */
  get error(): ProxyError | null {
    return this.firstError;
  }

  /**
   * One flat string (joined, not appended: appending line by line builds a
   * rope that costs several times the text's size until it is flattened;
   * bench/README.md, nftables-sync).
   */
  toString(): string {
    const lines = this.ops.map((op) => operationText(op, this.family, this.table));
    lines.push('');
    return lines.join('\n');
  }

  private push(verb: Verb, object: NftObject): this {
    const problem = validate(verb, object);
    if (problem !== null) {
      this.firstError ??= new ProxyError('KPT_INPUT_INVALID', `nftables ${verb} ${object.kind}: ${problem}`);
      return this;
    }
    this.ops.push({ verb, object });
    return this;
  }
}

const NAME_RE = /^[A-Za-z_.][A-Za-z0-9_./-]*$/;

function validate(verb: Verb, o: NftObject): string | null {
  if (verb === 'flush' && o.kind !== 'chain' && o.kind !== 'set' && o.kind !== 'map' && o.kind !== 'table') {
    return 'only tables, chains, sets and maps can be flushed';
  }
  if (o.kind === 'table') return null;
  const name = o.kind === 'rule' ? o.chain : o.kind === 'element' ? o.set : o.name;
  if (!NAME_RE.test(name) || name.length > 256) return `invalid name ${JSON.stringify(name)}`;
  if (o.kind === 'rule' && verb === 'add' && (o.body ? o.body.length === 0 : o.rule.trim() === '')) return 'empty rule';
  if (o.kind === 'rule' && verb !== 'add') return 'rules can only be added (chains are flushed instead)';
  if (o.kind === 'element' && o.key.length === 0) return 'element without key';
  if (o.kind === 'chain' && (o.type === undefined) !== (o.hook === undefined)) return 'base chains need type and hook';
  return null;
}
