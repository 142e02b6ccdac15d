import { test } from 'node:test';
import assert from 'node:assert/strict';
import { makeNode, TEST_NODE } from '../../test/support/fixtures.js';
import { NodeTracker } from './nodetracker.js';

test('an update that changes nothing the rules read keeps the same NodeInfo object', () => {
  const t = new NodeTracker(TEST_NODE, {}, () => {});
  const zone = { 'topology.kubernetes.io/zone': 'a' };
  t.update(makeNode(TEST_NODE, { labels: zone }), false);
  const first = t.info();
  // A heartbeat: a new object with the same content (and a field the proxy does not read).
  const again = makeNode(TEST_NODE, { labels: zone });
  (again.metadata as { annotations?: Record<string, string> }).annotations = { seen: 'now' };
  const r = t.update(again, false);
  assert.deepEqual(r, { labelsChanged: false, podCIDRsChanged: false, ipsChanged: false });
  assert.equal(t.info(), first);
  // A label the proxy keeps: a new object, though not a topology change.
  t.update(makeNode(TEST_NODE, { labels: { ...zone, team: 'x' } }), false);
  assert.notEqual(t.info(), first);
  assert.equal(t.info().labels.team, 'x');
});
