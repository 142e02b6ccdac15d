import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ipvsSchedulerNote, isLbAlgorithm, LB_ALGORITHMS, usesMaglevTable } from './lbalgorithm.js';

describe('lb algorithms', () => {
  it('knows its four names and nothing else', () => {
    assert.deepEqual(LB_ALGORITHMS, ['random', 'round-robin', 'maglev', 'source-hash']);
    for (const a of LB_ALGORITHMS) assert.ok(isLbAlgorithm(a));
    for (const x of ['rr', 'Maglev', '', 1, undefined, 'roundrobin']) assert.ok(!isLbAlgorithm(x), String(x));
    assert.deepEqual(
      LB_ALGORITHMS.filter((a) => usesMaglevTable(a)),
      ['maglev', 'source-hash'],
    );
  });

  it('maps the IPVS schedulers with an equivalent to the annotation value that keeps them', () => {
    assert.equal(ipvsSchedulerNote(''), null);
    assert.equal(ipvsSchedulerNote('  '), null);
    const want: Record<string, string> = { rr: 'round-robin', sh: 'source-hash', mh: 'maglev' };
    for (const [s, a] of Object.entries(want)) {
      const n = ipvsSchedulerNote(s)!;
      assert.equal(n.equivalent, a);
      assert.match(n.message, new RegExp(`kube-proxy-ts/lb-algorithm: ${a}\\b`));
    }
  });

  it('says that the others have no equivalent', () => {
    for (const s of ['wrr', 'lc', 'wlc', 'lblc', 'lblcr', 'dh', 'sed', 'nq', 'fo', 'ovf', 'twos', 'bogus']) {
      const n = ipvsSchedulerNote(s)!;
      assert.equal(n.equivalent, null, s);
      assert.equal(n.scheduler, s);
      assert.match(n.message, /no equivalent/);
    }
  });
});
