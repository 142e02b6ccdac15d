// The restart decision (upstream NodeManager) and the watch that acts on it, with the fake clock.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../../test/support/fakeclock.js';
import { makeNode } from '../../test/support/fixtures.js';
import { NodeTracker } from './nodetracker.js';
import { NODE_WATCH_INTERVAL_MS, NodeChangeWatch, nodeRestartReason, type NodeAddresses } from './nodewatch.js';

const START: NodeAddresses = { nodeIPs: { IPv4: '192.168.0.2', IPv6: 'fd00::2' }, podCIDRs: ['10.244.1.0/24'] };

describe('nodeRestartReason', () => {
  it('a changed address of either family restarts', () => {
    assert.equal(
      nodeRestartReason(START, { ...START, nodeIPs: { ...START.nodeIPs, IPv4: '192.168.0.9' } }, false),
      "the node's IPv4 address changed from 192.168.0.2 to 192.168.0.9",
    );
    assert.match(
      nodeRestartReason(START, { ...START, nodeIPs: { ...START.nodeIPs, IPv6: 'fd00::9' } }, false)!,
      /IPv6 address changed from fd00::2 to fd00::9/,
    );
  });

  it('an address that appears or disappears, or an unchanged node, does not', () => {
    assert.equal(nodeRestartReason(START, START, true), null);
    assert.equal(nodeRestartReason(START, { ...START, nodeIPs: { IPv4: '192.168.0.2' } }, false), null);
    assert.equal(nodeRestartReason({ ...START, nodeIPs: {} }, START, false), null);
  });

  it('podCIDRs count only when the local detector is built from them (NodeCIDR)', () => {
    const moved = { ...START, podCIDRs: ['10.244.9.0/24'] };
    assert.equal(nodeRestartReason(START, moved, false), null);
    assert.equal(
      nodeRestartReason(START, moved, true),
      "the node's podCIDRs changed from 10.244.1.0/24 to 10.244.9.0/24",
    );
  });
});

describe('NodeChangeWatch', () => {
  function setup(initialized = true) {
    const clock = new FakeClock();
    let node: NodeAddresses | null = START;
    let ready = initialized;
    const reasons: string[] = [];
    const view = { isInitialized: () => ready, reportedNode: () => node };
    const watch = new NodeChangeWatch(view, START, false, clock, (why) => reasons.push(why));
    return {
      clock,
      reasons,
      watch,
      set: (n: NodeAddresses | null) => (node = n),
      ready: () => (ready = true),
    };
  }

  it('checks every interval and reports a change once, then stops', () => {
    const w = setup();
    w.clock.advance(NODE_WATCH_INTERVAL_MS * 3);
    assert.deepEqual(w.reasons, []);
    assert.equal(w.clock.pending(), 1);
    w.set({ ...START, nodeIPs: { IPv4: '192.168.0.3' } });
    w.clock.advance(NODE_WATCH_INTERVAL_MS - 1);
    assert.deepEqual(w.reasons, [], 'not before the next check');
    w.clock.advance(1);
    assert.deepEqual(w.reasons, ["the node's IPv4 address changed from 192.168.0.2 to 192.168.0.3"]);
    assert.equal(w.clock.pending(), 0);
    w.clock.advance(NODE_WATCH_INTERVAL_MS * 10);
    assert.equal(w.reasons.length, 1);
  });

  it('does not judge before the proxier is initialized or the Node was seen', () => {
    const w = setup(false);
    w.set({ ...START, nodeIPs: { IPv4: '192.168.0.3' } });
    w.clock.advance(NODE_WATCH_INTERVAL_MS * 2);
    assert.deepEqual(w.reasons, []);
    w.ready();
    w.set(null);
    w.clock.advance(NODE_WATCH_INTERVAL_MS);
    assert.deepEqual(w.reasons, []);
    w.set({ ...START, nodeIPs: { IPv4: '192.168.0.3' } });
    w.clock.advance(NODE_WATCH_INTERVAL_MS);
    assert.equal(w.reasons.length, 1);
  });

  it('cancel() leaves no timer armed', () => {
    const w = setup();
    w.watch.cancel();
    assert.equal(w.clock.pending(), 0);
    w.set({ ...START, nodeIPs: { IPv4: '192.168.0.3' } });
    w.clock.advance(NODE_WATCH_INTERVAL_MS * 2);
    assert.deepEqual(w.reasons, []);
  });
});

describe('NodeTracker.reported (what the watch compares)', () => {
  it('is what the Node itself reports, never the --bind-address override', () => {
    const t = new NodeTracker('n1', { IPv4: '10.9.9.9' }, () => {});
    assert.equal(t.reported(), null, 'null until the Node is seen');
    t.update(makeNode('n1', { internalIPs: ['192.168.0.2'], podCIDRs: ['10.244.1.0/24'] }), false);
    assert.deepEqual(t.reported(), { nodeIPs: { IPv4: '192.168.0.2' }, podCIDRs: ['10.244.1.0/24'] });
    assert.equal(t.info().nodeIPs.IPv4, '10.9.9.9');
    // A setting that differs from the Node's address is no reason to restart.
    assert.equal(nodeRestartReason(t.reported()!, t.reported()!, true), null);
  });
});
