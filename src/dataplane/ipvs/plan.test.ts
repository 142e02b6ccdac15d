// planOps: the reconciler's ops for IPVS objects turned into the platform's
// requests, one behaviour per test: adds and edits, revivals of draining real
// servers, retirements (lingering or gone, with or without their virtual
// server), virtual servers that may not be deleted, and the ipset script,
// address lists and rules flag.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ObjectOp } from '../../core/objects.js';
import {
  PRESENT,
  destKey,
  virtualServerKey,
  type IpvsKind,
  type IpvsValue,
  type RealServer,
  type VirtualServer,
} from './objects.js';
import { setObject } from './driver.js';
import { planOps, type PlanOptions } from './plan.js';

type Op = ObjectOp<IpvsKind, IpvsValue>;
const vs = (address: string, protocol: 'TCP' | 'UDP' = 'TCP', scheduler = 'rr'): VirtualServer => ({
  family: 'IPv4',
  protocol,
  address,
  port: 80,
  scheduler,
  flags: 0,
  timeout: 0,
});
const rs = (address: string, weight = 1): RealServer => ({ address, port: 8080, weight });
const vsValue = (v: VirtualServer): IpvsValue => ({ t: 'vs', vs: v });
const rsValue = (v: VirtualServer, r: RealServer): IpvsValue => ({ t: 'rs', vs: v, rs: r });
const putVS = (v: VirtualServer, before?: VirtualServer): Op => ({
  op: 'put',
  kind: 'vs',
  key: virtualServerKey(v),
  value: vsValue(v),
  ...(before ? { before: vsValue(before) } : {}),
});
const putRS = (v: VirtualServer, r: RealServer, before?: RealServer): Op => ({
  op: 'put',
  kind: 'rs',
  key: destKey(v, r),
  value: rsValue(v, r),
  ...(before ? { before: rsValue(v, before) } : {}),
});
const delRS = (v: VirtualServer, r: RealServer): Op => ({
  op: 'delete',
  kind: 'rs',
  key: destKey(v, r),
  before: rsValue(v, r),
});
const delVS = (v: VirtualServer): Op => ({ op: 'delete', kind: 'vs', key: virtualServerKey(v), before: vsValue(v) });
const none = { owners: [], lingering: new Map() };
const show = (p: ReturnType<typeof planOps>) => ({
  ops: p.ops.map((o) => `${o.op} ${o.vs.address}${'rs' in o ? ` ${o.rs.address} w${o.rs.weight}` : ''}`),
  retired: p.retired.map(
    (r) =>
      `${r.vs.address} ${r.rs.address} w${r.rs.weight}${r.lingering ? ' lingering' : ''}${r.vsKept ? '' : ' with its vs'}`,
  ),
  revived: p.revived.map((r) => `${r.vs.address} ${r.rs.address} w${r.rs.weight}`),
});

test('puts become adds and edits; a real server wanted again while it drains is revived, not added', () => {
  const a = vs('10.96.0.1');
  const b = vs('10.96.0.2', 'TCP', 'lc');
  const draining: PlanOptions['draining'] = new Map([[destKey(a, rs('10.0.0.3')), { vs: a, rs: rs('10.0.0.3') }]]);
  const p = planOps(
    [
      putVS(a),
      putVS(b, vs('10.96.0.2')),
      putRS(a, rs('10.0.0.1')),
      putRS(a, rs('10.0.0.3')),
      putRS(b, rs('10.0.0.2'), rs('10.0.0.2', 0)),
    ],
    { family: 'IPv4', desired: none, draining },
  );
  assert.deepEqual(show(p), {
    ops: ['add-service 10.96.0.1', 'edit-service 10.96.0.2', 'add-dest 10.96.0.1 10.0.0.1 w1'],
    retired: [],
    revived: ['10.96.0.1 10.0.0.3 w1', '10.96.0.2 10.0.0.2 w1'],
  });
});

test('a real server no longer wanted is retired, lingering or gone; one going with its virtual server is not drained', () => {
  const a = vs('10.96.0.1', 'UDP');
  const b = vs('10.96.0.2');
  const p = planOps([delRS(a, rs('10.0.0.1')), delRS(a, rs('10.0.0.2')), delRS(b, rs('10.0.0.3')), delVS(b)], {
    family: 'IPv4',
    desired: { owners: [], lingering: new Map([['UDP/10.96.0.1:80', new Set(['10.0.0.2:8080'])]]) },
  });
  assert.deepEqual(show(p), {
    ops: ['del-service 10.96.0.2'],
    retired: ['10.96.0.1 10.0.0.1 w1', '10.96.0.1 10.0.0.2 w1 lingering', '10.96.0.2 10.0.0.3 w1 with its vs'],
    revived: [],
  });
});

test('a virtual server that may not be deleted (--ipvs-exclude-cidrs) stays, and so do its real servers', () => {
  const x = vs('10.99.0.1');
  const p = planOps([delRS(x, rs('10.0.0.1')), delVS(x)], {
    family: 'IPv4',
    desired: none,
    deletable: (v) => v.address !== '10.99.0.1',
  });
  assert.deepEqual(show(p), { ops: [], retired: ['10.99.0.1 10.0.0.1 w1 with its vs'], revived: [] });
});

test('draining real servers of a re-rendered virtual server are reported again, at weight 0; others are not', () => {
  const a = vs('10.96.0.1', 'UDP');
  const b = vs('10.96.0.2', 'UDP');
  const draining: PlanOptions['draining'] = new Map([
    [destKey(a, rs('10.0.0.1')), { vs: a, rs: rs('10.0.0.1') }],
    [destKey(a, rs('10.0.0.2')), { vs: a, rs: rs('10.0.0.2') }],
    [destKey(b, rs('10.0.0.3')), { vs: b, rs: rs('10.0.0.3') }],
  ]);
  const owners: PlanOptions['desired']['owners'] = [
    ['ns/a', [{ kind: 'vs', key: virtualServerKey(a), value: vsValue(a) }]],
  ];
  const lingering = new Map([[virtualServerKey(a), new Set(['10.0.0.2:8080'])]]);
  const p = planOps([], { family: 'IPv4', desired: { owners, lingering }, draining });
  assert.deepEqual(show(p).retired, ['10.96.0.1 10.0.0.1 w0', '10.96.0.1 10.0.0.2 w0 lingering']);
});

test('sets, members and addresses: one ipset script (creates, adds, then deletions) and the address lists; rules', () => {
  const ops: Op[] = [
    { op: 'put', ...setObject('KUBE-6-CLUSTER-IP', 'hash:ip,port') },
    { op: 'put', kind: 'KUBE-CLUSTER-IP', key: 'fd00::1,tcp:80', value: PRESENT },
    { op: 'put', kind: 'bind', key: 'fd00::1', value: PRESENT },
    { op: 'delete', kind: 'bind', key: 'fd00::2', before: PRESENT },
    { op: 'delete', kind: 'KUBE-CLUSTER-IP', key: 'fd00::2,tcp:80', before: PRESENT },
    {
      op: 'delete',
      kind: 'set',
      key: 'KUBE-6-LOOP-BACK',
      before: setObject('KUBE-6-LOOP-BACK', 'hash:ip,port,ip').value,
    },
  ];
  const p = planOps(ops, { family: 'IPv6', desired: none });
  assert.equal(
    p.ipsetScript,
    'create KUBE-6-CLUSTER-IP hash:ip,port family inet6 hashsize 1024 maxelem 65536 -exist\n' +
      'add KUBE-6-CLUSTER-IP fd00::1,tcp:80 -exist\n' +
      'del KUBE-6-CLUSTER-IP fd00::2,tcp:80 -exist\n' +
      'destroy KUBE-6-LOOP-BACK\n',
  );
  assert.deepEqual([p.addAddresses, p.delAddresses], [['fd00::1'], ['fd00::2']]);
  assert.equal(p.rulesChanged, false);
  const drop = { ip: 'fd00::9', protocol: 'tcp' as const, port: 80 };
  assert.equal(
    planOps([{ op: 'put', kind: 'rule', key: 'fd00::9,tcp:80', value: { t: 'drop', rule: drop } }], {
      family: 'IPv6',
      desired: none,
    }).rulesChanged,
    true,
  );
  assert.equal(planOps([], { family: 'IPv6', desired: none }).ipsetScript, '');
});
