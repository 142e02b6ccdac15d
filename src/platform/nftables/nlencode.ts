// A Transaction as one nf_tables netlink batch: every operation the renderer
// writes, for every layout, encoded as nft 1.0.6 encodes the same `nft -f`
// line (rules: nlrule.ts, sets and elements: nlset.ts). The kernel applies
// the batch atomically, as it applies nft's.
//
// Two liberties that leave the kernel's state unchanged: element operations
// on one set that follow each other are sent as one message (nft sends one
// message per `add element` line; fewer messages mean fewer set lookups by
// name, which walk the table's list of sets), and within a run of element
// operations, those of one set are grouped (order inside a set is kept, so a
// delete still precedes the add that replaces it). Messages carry no
// NLM_F_ACK: the kernel reports failures anyway, and a 20k-Service cold sync
// would otherwise queue 200k acks.
import { finish, type Steps } from '../../core/steps.js';
import { isEndpointsMapName, TABLE_NAME, type NftFamily } from '../../dataplane/nftables/names.js';
import type { Chain, Element, NftMap, NftSet, Operation } from '../../dataplane/nftables/objects.js';
import { parseRule } from '../../dataplane/nftables/ruleparse.js';
import { NLM_F } from '../netlink/message.js';
import { writeExpr } from './nlexpr.js';
import { compileRule } from './nlrule.js';
import {
  elementSlots,
  NFPROTO,
  schemaOf,
  tlv,
  TYPE,
  anonElementLists,
  writeAnonSet,
  writeElement,
  writeIntervalSet,
  writeNamedSet,
  type SetSchema,
} from './nlset.js';
import { endpointsMapAttrs } from './nlmaps.js';
import { NlWriter } from './nlwriter.js';
import { ProxyError } from '../../core/errors.js';

export const NFNL_SUBSYS_NFTABLES = 10;
export const NFNL_MSG_BATCH_BEGIN = 16;
export const NFNL_MSG_BATCH_END = 17;
export const NFT_MSG = {
  NEWTABLE: 0,
  DELTABLE: 2,
  NEWCHAIN: 3,
  DELCHAIN: 5,
  NEWRULE: 6,
  DELRULE: 8,
  NEWSET: 9,
  DELSET: 11,
  NEWSETELEM: 12,
  DELSETELEM: 14,
  GETGEN: 16,
} as const;
export { NLM_F };

const HOOKS: Record<string, number> = { prerouting: 0, input: 1, forward: 2, output: 3, postrouting: 4 };
/** Element messages stay well under the 64 KiB an attribute's length can say. */
const ELEMENTS_PER_MESSAGE_BYTES = 32 << 10;

/** Schema of the 'maps' layout's endpoint maps (known by name even when this batch does not create them). */
const ENDPOINT_MAP_SCHEMA: SetSchema = { fields: [TYPE.INTEGER], interval: true, data: 'addrport' };

/** What made the batch unencodable: the operation and why. */
export class UnencodableError extends ProxyError {
  constructor(
    readonly op: Operation,
    why: string,
  ) {
    super('KPT_UNSUPPORTED', `nf_tables encoder: ${why}`);
    this.name = 'UnencodableError';
  }
}

export interface EncodedBatch {
  /** The batch's bytes in order, to be sent as one datagram (NetlinkSocket.sendv). */
  readonly chunks: readonly Buffer[];
  readonly bytes: number;
  /** Index of the operation a message (by sequence number) came from; -1 if none. */
  opOf(seq: number): number;
  readonly messages: number;
  readonly firstSeq: number;
  readonly lastSeq: number;
}

/**
 * Encodes operations into one batch. `schemas` is the caller's memory of the
 * sets and maps it created (needed to encode elements of sets created by an
 * earlier batch); this batch's `add set/map` operations update it.
 */
export class BatchEncoder {
  private readonly w = new NlWriter(1 << 20);
  private readonly nfproto: number;
  private seq: number;
  private readonly firstSeq: number;
  private setId = 0;
  private messages = 0;
  /** Operation index of each message, by seq - firstSeq (4 bytes a message, not a Map entry). */
  private opIndex = new Int32Array(1024);
  /** Element operations waiting to be grouped by set: set -> [op index, op][] in order. */
  private pending = new Map<string, Array<[number, Operation]>>();
  /** Interval sets of addresses this batch created and has not filled yet (see intervalSet). */
  private readonly emptyIntervalSets = new Set<string>();

  constructor(
    private readonly family: NftFamily,
    private readonly schemas: Map<string, SetSchema>,
    seq: number,
    private readonly table = TABLE_NAME,
  ) {
    this.nfproto = NFPROTO[family];
    this.firstSeq = seq;
    this.seq = seq;
    this.w.begin(NFNL_MSG_BATCH_BEGIN, NLM_F.REQUEST, this.seq++, 0, NFNL_SUBSYS_NFTABLES).end();
  }

  /** Add one operation; throws UnencodableError when it is outside what we encode. */
  add(op: Operation, index: number): void {
    if (op.object.kind === 'element' && op.verb !== 'flush') {
      let list = this.pending.get(op.object.set);
      if (!list) this.pending.set(op.object.set, (list = []));
      list.push([index, op]);
      return;
    }
    this.flushElements();
    this.object(op, index);
  }

  finish(): EncodedBatch {
    this.flushElements();
    const lastSeq = this.seq;
    this.w.begin(NFNL_MSG_BATCH_END, NLM_F.REQUEST, this.seq++, 0, NFNL_SUBSYS_NFTABLES).end();
    const { firstSeq, opIndex } = this;
    return {
      chunks: this.w.chunks(),
      bytes: this.w.length,
      opOf: (seq) => (seq > firstSeq && seq < lastSeq ? opIndex[seq - firstSeq]! : -1),
      messages: this.messages,
      firstSeq,
      lastSeq,
    };
  }

  private begin(msg: number, flags: number, index: number): void {
    const seq = this.seq++;
    const k = seq - this.firstSeq;
    if (k >= this.opIndex.length) {
      const grown = new Int32Array(this.opIndex.length * 2);
      grown.set(this.opIndex);
      this.opIndex = grown;
    }
    this.opIndex[k] = index;
    this.messages++;
    this.w.begin((NFNL_SUBSYS_NFTABLES << 8) | msg, NLM_F.REQUEST | flags, seq, this.nfproto, 0);
    this.w.str(1, this.table);
  }

  private object(op: Operation, index: number): void {
    const o = op.object;
    const bad = (why: string) => new UnencodableError(op, why);
    switch (o.kind) {
      case 'table':
        if (op.verb === 'add') {
          this.begin(NFT_MSG.NEWTABLE, NLM_F.CREATE, index);
          this.w.u32be(2, 0);
          if (o.comment !== undefined) this.w.bytes(6, tlv(0, Buffer.from(`${o.comment}\0`)));
        } else if (op.verb === 'delete') this.begin(NFT_MSG.DELTABLE, 0, index);
        else throw bad('flush table is not written by the renderer');
        this.w.end();
        return;
      case 'chain':
        return this.chain(op.verb, o, index);
      case 'set':
      case 'map':
        return this.set(op, o, index);
      case 'rule': {
        if (op.verb !== 'add') throw bad('rules are only added');
        // The renderers give the body; a rule that comes as text only
        // (written by hand) is read back into one.
        const body = o.body ?? parseRule(o.rule);
        const c = body === null ? null : compileRule(body, this.family);
        if (!c) throw bad(`rule outside the encoder's grammar (or its family): ${o.rule}`);
        const ids = c.anon.map((a) => {
          const id = ++this.setId;
          this.begin(NFT_MSG.NEWSET, NLM_F.CREATE, index);
          writeAnonSet(this.w, a, id);
          this.w.end();
          for (const writeList of anonElementLists(a)) {
            this.begin(NFT_MSG.NEWSETELEM, NLM_F.CREATE, index);
            this.w.str(2, a.kind === 'addrs' ? '__set%d' : '__map%d').u32be(4, id);
            writeList(this.w);
            this.w.end();
          }
          return id;
        });
        this.begin(NFT_MSG.NEWRULE, NLM_F.CREATE | NLM_F.APPEND, index);
        this.w.str(2, o.chain);
        const list = this.w.nest(4);
        for (const e of c.exprs) writeExpr(this.w, e, ids);
        this.w.close(list);
        if (o.comment !== undefined) this.w.bytes(7, tlv(0, Buffer.from(`${o.comment}\0`)));
        this.w.end();
        return;
      }
      case 'element':
        // Element flushes do not exist (flush the set instead).
        throw bad('elements cannot be flushed');
    }
  }

  private chain(verb: Operation['verb'], c: Chain, index: number): void {
    if (verb === 'delete') {
      this.begin(NFT_MSG.DELCHAIN, 0, index);
      this.w.str(3, c.name).end();
      return;
    }
    if (verb === 'flush') {
      this.begin(NFT_MSG.DELRULE, 0, index);
      this.w.str(2, c.name).end();
      return;
    }
    this.begin(NFT_MSG.NEWCHAIN, NLM_F.CREATE, index);
    this.w.str(3, c.name);
    if (c.type !== undefined) {
      const hook = HOOKS[c.hook ?? ''];
      if (hook === undefined) throw new UnencodableError({ verb, object: c }, `unknown hook ${c.hook}`);
      this.w.str(7, c.type);
      const h = this.w.nest(4);
      this.w
        .u32be(1, hook)
        .i32be(2, c.priority ?? 0)
        .close(h);
    }
    if (c.comment !== undefined) this.w.bytes(12, tlv(0, Buffer.from(`${c.comment}\0`)));
    this.w.end();
  }

  private set(op: Operation, o: NftSet | NftMap, index: number): void {
    if (op.verb === 'delete' || op.verb === 'flush') {
      this.begin(op.verb === 'delete' ? NFT_MSG.DELSET : NFT_MSG.DELSETELEM, 0, index);
      this.w.str(2, o.name).end();
      return;
    }
    const id = ++this.setId;
    this.begin(NFT_MSG.NEWSET, NLM_F.CREATE, index);
    const ok =
      o.kind === 'map' && o.typeOf !== undefined
        ? endpointsMapAttrs(this.w, this.family, o.name, o.typeOf, o.flags, id)
        : writeNamedSet(this.w, o, id);
    if (!ok) throw new UnencodableError(op, `set or map type outside the encoder's grammar: ${o.type}`);
    this.w.end();
    const schema = o.kind === 'map' && o.typeOf !== undefined ? ENDPOINT_MAP_SCHEMA : schemaOf(o);
    if (schema) this.schemas.set(o.name, schema);
    if (schema && isAddressIntervalSet(schema)) this.emptyIntervalSets.add(o.name);
  }

  /**
   * The elements of an interval set of addresses, all in one message as nft
   * sends them (nlset.ts writeIntervalSet). nft computes them from what its
   * cache holds, so only the batch that creates the set, adding only, is
   * encoded here; anything else is left to nft.
   */
  private intervalSet(set: string, ops: ReadonlyArray<[number, Operation]>): void {
    const [index, first] = ops[0]!;
    if (!this.emptyIntervalSets.delete(set) || ops.some(([, op]) => op.verb !== 'add'))
      throw new UnencodableError(first, `elements of interval set ${set} outside the batch that creates it`);
    this.begin(NFT_MSG.NEWSETELEM, NLM_F.CREATE, index);
    this.w.str(2, set);
    if (
      !writeIntervalSet(
        this.w,
        this.family,
        ops.map(([, op]) => (op.object as Element).key.join(' . ')),
      )
    )
      throw new UnencodableError(first, `elements of ${set} that are not distinct addresses or prefixes`);
    this.w.end();
  }

  private schemaFor(set: string): SetSchema | undefined {
    return this.schemas.get(set) ?? (isEndpointsMapName(set) ? ENDPOINT_MAP_SCHEMA : undefined);
  }

  /** The pending element operations, grouped by set, consecutive same-verb ones in one message. */
  private flushElements(): void {
    finish(this.flushElementsSteps());
  }

  /** flushElements() as resumable steps, one per STEP_OPERATIONS elements. */
  *flushElementsSteps(): Steps<void> {
    if (this.pending.size === 0) return;
    let n = 0;
    const pending = this.pending;
    this.pending = new Map();
    for (const [set, ops] of pending) {
      const schema = this.schemaFor(set);
      if (!schema) throw new UnencodableError(ops[0]![1], `elements of a set we do not know: ${set}`);
      if (isAddressIntervalSet(schema)) {
        this.intervalSet(set, ops);
        continue;
      }
      let open: { verb: string; list: number; slot: number; start: number } | null = null;
      const close = () => {
        if (!open) return;
        this.w.close(open.list).end();
        open = null;
      };
      for (const [index, op] of ops) {
        if (++n % STEP_OPERATIONS === 0) yield;
        const add = op.verb === 'add';
        if (
          open !== null &&
          ((open as { verb: string }).verb !== op.verb || this.w.length - open.start > ELEMENTS_PER_MESSAGE_BYTES)
        )
          close();
        if (open === null) {
          this.begin(add ? NFT_MSG.NEWSETELEM : NFT_MSG.DELSETELEM, add ? NLM_F.CREATE : 0, index);
          this.w.str(2, set);
          open = { verb: op.verb, list: this.w.nest(3), slot: 1, start: this.w.length };
        }
        const o = open as { slot: number };
        if (!writeElement(this.w, this.family, o.slot, schema, op.object as Element, add))
          throw new UnencodableError(op, `element does not fit ${set}: ${JSON.stringify(op.object)}`);
        o.slot += elementSlots(schema);
      }
      close();
    }
  }
}

function isAddressIntervalSet(s: SetSchema): boolean {
  return (
    s.interval &&
    s.data === 'none' &&
    s.fields.length === 1 &&
    (s.fields[0] === TYPE.IPADDR || s.fields[0] === TYPE.IP6ADDR)
  );
}

/** Encode a whole transaction's operations on `table` (throws UnencodableError). */
export function encodeBatch(
  ops: readonly Operation[],
  family: NftFamily,
  schemas: Map<string, SetSchema>,
  seq: number,
  table: string = TABLE_NAME,
): EncodedBatch {
  return finish(encodeBatchSteps(ops, family, schemas, seq, table));
}

/** Operations encoded per step of encodeBatchSteps(). */
const STEP_OPERATIONS = 512;

/** encodeBatch() as resumable steps (src/core/steps.ts), for a writer that gives the event loop turns. */
export function* encodeBatchSteps(
  ops: readonly Operation[],
  family: NftFamily,
  schemas: Map<string, SetSchema>,
  seq: number,
  table: string = TABLE_NAME,
): Steps<EncodedBatch> {
  const enc = new BatchEncoder(family, schemas, seq, table);
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i]!;
    // The elements gathered so far are encoded when another kind of operation follows, in steps too.
    if (op.object.kind !== 'element' || op.verb === 'flush') yield* enc.flushElementsSteps();
    enc.add(op, i);
    if ((i + 1) % STEP_OPERATIONS === 0) yield;
  }
  yield* enc.flushElementsSteps();
  return enc.finish();
}
