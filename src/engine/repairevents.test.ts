import { test } from 'node:test';
import assert from 'node:assert/strict';
import { REPAIR_EVENT_REASON, repairEventObserver } from './repairevents.js';

test('each repair posts one Warning-worthy note naming mode, family, reason, detail and time taken', () => {
  const posted: string[][] = [];
  const o = repairEventObserver((reason, action, note) => posted.push([reason, action, note]));
  o.driftDetected({ family: 'IPv4', mode: 'iptables', reason: 'rules_changed', detail: 'x' });
  assert.equal(posted.length, 0, 'noticing is not yet a repair');
  o.datapathRepaired({
    family: 'IPv6',
    mode: 'ebpf',
    reason: 'program_detached',
    detail: 'eth0/ingress',
    seconds: 1.2345,
    at: 0,
  });
  assert.deepEqual(posted, [
    [REPAIR_EVENT_REASON, 'Repair', 'ebpf IPv6 datapath repaired in 1235 ms after program_detached: eth0/ingress'],
  ]);
});
