import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Keyed, ObjectOp } from '../core/objects.js';
import { Reconciler } from './reconciler.js';

type Kind = 'set' | 'chain' | 'element';
const spec = { order: ['set', 'chain', 'element'] as const, same: (a: string, b: string) => a === b };
const o = (kind: Kind, key: string, value = key): Keyed<Kind, string> => ({ kind, key, value });
const show = (ops: ObjectOp<Kind, string>[]) =>
  ops.map((op) =>
    op.op === 'put'
      ? `put ${op.kind} ${op.key}=${op.value}${op.before === undefined ? '' : ` (was ${op.before})`}`
      : `delete ${op.kind} ${op.key}`,
  );

describe('Reconciler', () => {
  it('puts in kind order and deletes in reverse order', () => {
    const r = new Reconciler<Kind, string>(spec);
    const first = r.plan([['svc', [o('element', 'e1'), o('chain', 'c1'), o('set', 's1')]]], false);
    assert.equal(first.full, true, 'the first plan is full: nothing is known yet');
    assert.deepEqual(show(first.ops), ['put set s1=s1', 'put chain c1=c1', 'put element e1=e1']);
    const gone = r.plan([['svc', []]], false);
    assert.deepEqual(show(gone.ops), ['delete element e1', 'delete chain c1', 'delete set s1']);
    assert.equal(r.size, 0);
  });

  it('writes nothing for an unchanged object and replaces a changed one', () => {
    const r = new Reconciler<Kind, string>(spec);
    r.plan([['svc', [o('chain', 'c1', 'rules-a'), o('element', 'e1')]]], false);
    assert.deepEqual(show(r.plan([['svc', [o('chain', 'c1', 'rules-a'), o('element', 'e1')]]], false).ops), []);
    assert.deepEqual(show(r.plan([['svc', [o('chain', 'c1', 'rules-b'), o('element', 'e1')]]], false).ops), [
      'put chain c1=rules-b (was rules-a)',
    ]);
  });

  it('keeps an object two owners share until the last one withdraws', () => {
    const r = new Reconciler<Kind, string>(spec);
    r.plan(
      [
        ['a', [o('element', 'shared')]],
        ['b', [o('element', 'shared')]],
      ],
      false,
    );
    assert.deepEqual(show(r.plan([['a', []]], false).ops), []);
    assert.equal(r.wanted('element', 'shared'), true);
    assert.deepEqual(show(r.plan([['b', []]], false).ops), ['delete element shared']);
  });

  it('merges the values several owners want', () => {
    const r = new Reconciler<'addr', number>({
      order: ['addr'],
      same: (a, b) => a === b,
      merge: (_k, vs) => vs.reduce((x, y) => x | y, 0),
    });
    const p1 = r.plan(
      [
        ['a', [{ kind: 'addr', key: '10.0.0.1', value: 1 }]],
        ['b', [{ kind: 'addr', key: '10.0.0.1', value: 4 }]],
      ],
      false,
    );
    assert.deepEqual(p1.ops, [{ op: 'put', kind: 'addr', key: '10.0.0.1', value: 5 }]);
    const p2 = r.plan([['b', []]], false);
    assert.deepEqual(p2.ops, [{ op: 'put', kind: 'addr', key: '10.0.0.1', value: 1, before: 5 }]);
  });

  it('without merge, the latest owner to ask sets the value', () => {
    const r = new Reconciler<Kind, string>(spec);
    r.plan([['a', [o('element', 'k', 'from-a')]]], false);
    assert.deepEqual(show(r.plan([['b', [o('element', 'k', 'from-b')]]], false).ops), [
      'put element k=from-b (was from-a)',
    ]);
    assert.deepEqual(show(r.plan([['b', []]], false).ops), ['put element k=from-a (was from-b)']);
  });

  it('a partial plan leaves owners it is not given alone; a full plan withdraws them', () => {
    const r = new Reconciler<Kind, string>(spec);
    r.plan(
      [
        ['a', [o('chain', 'ca')]],
        ['b', [o('chain', 'cb')]],
      ],
      false,
    );
    assert.deepEqual(show(r.plan([['a', [o('chain', 'ca')]]], false).ops), []);
    const full = r.plan([['a', [o('chain', 'ca')]]], true);
    assert.equal(full.full, true);
    assert.deepEqual(show(full.ops), ['delete chain cb']);
    assert.deepEqual([...r.owners()], ['a']);
  });

  it('a full plan after adopt deletes what nobody wants and rewrites what it cannot see', () => {
    const r = new Reconciler<Kind, string>(spec);
    r.adopt([
      { kind: 'chain', key: 'kept', value: null },
      { kind: 'chain', key: 'orphan', value: null },
      { kind: 'element', key: 'same', value: 'v' },
      { kind: 'element', key: 'changed', value: 'old' },
    ]);
    const p = r.plan(
      [['svc', [o('chain', 'kept', 'rules'), o('element', 'same', 'v'), o('element', 'changed', 'new')]]],
      true,
    );
    assert.deepEqual(show(p.ops), [
      'put chain kept=rules (was null)',
      'put element changed=new (was old)',
      'delete chain orphan',
    ]);
    assert.equal(r.applied('element', 'same'), 'v');
  });

  it('after failed(), the next plan is full, needs live state and starts from nothing', () => {
    const r = new Reconciler<Kind, string>(spec);
    r.plan(
      [
        ['a', [o('chain', 'ca')]],
        ['b', [o('chain', 'cb')]],
      ],
      false,
    );
    assert.equal(r.needsLive(), false);
    r.failed();
    assert.equal(r.needsLive(), true);
    assert.equal(r.size, 0);
    const p = r.plan([['a', [o('chain', 'ca')]]], false);
    assert.equal(p.full, true, 'forced full');
    assert.deepEqual(show(p.ops), ['put chain ca=ca'], 'without adopt the datapath is taken as empty');
  });

  it('an owner asking again keeps what it lists, in any order, and withdraws only what it left out', () => {
    const r = new Reconciler<Kind, string>(spec);
    r.plan([['a', [o('chain', 'c1'), o('element', 'e1'), o('element', 'e2')]]], false);
    assert.deepEqual(show(r.plan([['a', [o('chain', 'c1'), o('element', 'e1'), o('element', 'e2')]]], false).ops), []);
    assert.deepEqual(show(r.plan([['a', [o('element', 'e2'), o('chain', 'c1'), o('element', 'e1')]]], false).ops), []);
    assert.deepEqual(show(r.plan([['a', [o('element', 'e2'), o('element', 'e1')]]], false).ops), ['delete chain c1']);
    assert.deepEqual(
      [...r.ownedBy('a')].map(([, k]) => k),
      ['e2', 'e1'],
    );
  });

  it('an unchanged object asked again remembers the newer value, alone or shared', () => {
    type V = { readonly v: number; readonly n: number };
    const r = new Reconciler<'addr', V>({ order: ['addr'], same: (a, b) => a.v === b.v });
    const at = (v: number, n: number) => ({ kind: 'addr' as const, key: 'k', value: { v, n } });
    r.plan([['a', [at(1, 1)]]], false);
    assert.deepEqual(r.plan([['a', [at(1, 2)]]], true).ops, []);
    assert.deepEqual(r.applied('addr', 'k'), { v: 1, n: 2 });
    assert.deepEqual(r.plan([['b', [at(1, 3)]]], false).ops, []);
    assert.deepEqual(r.applied('addr', 'k'), { v: 1, n: 3 });
    assert.deepEqual(r.plan([['a', [at(2, 4)]]], false).ops, [
      { op: 'put', kind: 'addr', key: 'k', value: { v: 2, n: 4 }, before: { v: 1, n: 3 } },
    ]);
    assert.deepEqual(r.plan([['b', []]], false).ops, []);
    assert.deepEqual(r.applied('addr', 'k'), { v: 2, n: 4 });
  });

  it('refuses a kind the spec does not order', () => {
    const r = new Reconciler<Kind, string>(spec);
    assert.throws(() => r.plan([['a', [{ kind: 'rule' as Kind, key: 'x', value: 'x' }]]], false), { code: 'KPT_BUG' });
  });

  it('names the owners of an object, the one whose value it holds last', () => {
    const r = new Reconciler<Kind, string>(spec);
    r.plan(
      [
        ['a', [o('element', 'k', 'from-a')]],
        ['b', [o('element', 'k', 'from-b')]],
      ],
      false,
    );
    assert.deepEqual(r.ownersOf('element', 'k'), ['a', 'b']);
    r.plan([['a', [o('element', 'k', 'again-a')]]], false);
    assert.deepEqual(r.ownersOf('element', 'k'), ['b', 'a'], 'asking again makes a the latest');
    assert.equal(r.applied('element', 'k'), 'again-a');
    r.plan([['b', []]], false);
    assert.deepEqual(r.ownersOf('element', 'k'), ['a']);
    r.plan([['a', []]], false);
    assert.deepEqual(r.ownersOf('element', 'k'), []);
    assert.deepEqual(r.ownersOf('chain', 'never'), []);
  });

  it('the same key under two kinds is two objects', () => {
    const r = new Reconciler<Kind, string>(spec);
    const p = r.plan([['a', [o('set', 'x', 'as-set'), o('chain', 'x', 'as-chain')]]], false);
    assert.deepEqual(show(p.ops), ['put set x=as-set', 'put chain x=as-chain']);
    assert.equal(r.size, 2);
    assert.equal(r.applied('chain', 'x'), 'as-chain');
    assert.deepEqual(show(r.plan([['a', [o('set', 'x', 'as-set')]]], false).ops), ['delete chain x']);
    assert.equal(r.applied('set', 'x'), 'as-set');
    assert.equal(r.applied('element', 'x'), undefined);
  });

  it('reports what one owner holds', () => {
    const r = new Reconciler<Kind, string>(spec);
    r.plan([['a', [o('chain', 'ca'), o('element', 'ea')]]], false);
    assert.deepEqual(
      [...r.ownedBy('a')],
      [
        ['chain', 'ca'],
        ['element', 'ea'],
      ],
    );
    assert.deepEqual([...r.ownedBy('nobody')], []);
  });

  it('counts and lists the wanted objects of a kind, shared ones once, adopted-but-unwanted ones not', () => {
    const r = new Reconciler<'addr' | 'rule', number>({
      order: ['addr', 'rule'],
      same: (a, b) => a === b,
      merge: (_k, vs) => Math.max(...vs),
    });
    const wanted = (kind: 'addr' | 'rule') => [...r.wantedOf(kind)].map((o) => `${o.key}=${o.value}`).sort();
    r.adopt([
      { kind: 'addr', key: 'live', value: 1 },
      { kind: 'addr', key: 'a', value: 1 },
    ]);
    assert.equal(r.countOf('addr'), 0, 'adopted objects belong to nobody yet');
    assert.deepEqual(wanted('addr'), []);
    r.plan(
      [
        [
          'x',
          [
            { kind: 'addr', key: 'a', value: 1 },
            { kind: 'rule', key: 'r', value: 7 },
          ],
        ],
        [
          'y',
          [
            { kind: 'addr', key: 'a', value: 3 },
            { kind: 'addr', key: 'b', value: 2 },
          ],
        ],
      ],
      true,
    );
    assert.equal(r.countOf('addr'), 2, 'the shared address counts once; the unwanted live one is gone');
    assert.equal(r.countOf('rule'), 1);
    assert.deepEqual(wanted('addr'), ['a=3', 'b=2'], 'the merged value');
    r.plan([['y', []]], false);
    assert.equal(r.countOf('addr'), 1, 'x still wants a');
    assert.deepEqual(wanted('addr'), ['a=1']);
    r.plan([['x', [{ kind: 'addr', key: 'a', value: 1 }]]], false);
    assert.equal(r.countOf('rule'), 0);
    assert.equal(r.countOf('addr'), 1, 'asked again: still one');
    r.failed();
    assert.equal(r.countOf('addr'), 0);
    assert.deepEqual(wanted('addr'), []);
  });

  it('adopt over an earlier memory takes only what the datapath holds now', () => {
    const r = new Reconciler<Kind, string>(spec);
    r.plan([['svc', [o('chain', 'kept'), o('chain', 'lost'), o('element', 'changed', 'v1')]]], false);
    // The datapath lost one chain and holds another value for the element; one object is someone's leftover.
    r.adopt([
      { kind: 'chain', key: 'kept', value: 'kept' },
      { kind: 'element', key: 'changed', value: 'v0' },
      { kind: 'element', key: 'stray', value: 'x' },
    ]);
    assert.equal(r.applied('chain', 'lost'), undefined, 'forgotten: the datapath does not hold it');
    assert.equal(r.wanted('chain', 'kept'), false, 'adopted objects belong to nobody until asked again');
    assert.deepEqual([...r.owners()], []);
    const p = r.plan([['svc', [o('chain', 'kept'), o('chain', 'lost'), o('element', 'changed', 'v1')]]], true);
    assert.deepEqual(show(p.ops), ['put chain lost=lost', 'put element changed=v1 (was v0)', 'delete element stray']);
    assert.equal(r.size, 3);
  });

  it('a plan of many owners touches each object once, and owners listed again keep what they still want', () => {
    const r = new Reconciler<Kind, string>(spec);
    const owners = Array.from(
      { length: 50 },
      (_, i) => [`o${i}`, [o('set', 'shared'), o('element', `e${i}`)]] as const,
    );
    const first = r.plan(owners, true);
    assert.equal(first.ops.length, 51, 'the shared set is put once');
    const again = r.plan(
      owners.map(([k, objs]) => [k, k === 'o7' ? [objs[0]!] : objs] as const),
      true,
    );
    assert.deepEqual(show(again.ops), ['delete element e7']);
    assert.equal(r.countOf('set'), 1);
    assert.equal(r.countOf('element'), 49);
  });
});
