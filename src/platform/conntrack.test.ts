// Unit tests of parsing and argument building with a fake CLI, then a real
// kernel test inside network namespaces this test creates and removes
// (kpt-ct-<pid>-*): real UDP conntrack entries through a DNAT rule, listed
// with our code, one deleted, verified with `conntrack -L`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { conntrackReconciler, Conntrack, flushUDPFlows, parseConntrackList, type ConntrackExec } from './conntrack.js';
import { openCtNetlink } from './conntracknl.js';
import { NETLINK_PROTOCOL, openNetlink } from './netlink/index.js';
import { benchEndpoint, newEntryRequest } from '../../test/support/conntrack.js';
import { isStaleUDPFlow, staleFlowIndex } from '../core/conntrack.js';
import type { Endpoint, ServicePort, SyncState } from '../core/types.js';
import { FakeClock } from '../../test/support/fakeclock.js';
import { run } from './exec.js';

const LIST = [
  'ipv4     2 udp      17 29 src=10.250.0.1 dst=172.30.0.10 sport=40002 dport=53 [UNREPLIED] src=10.250.0.2 dst=10.250.0.1 sport=5354 dport=40002 mark=0 use=1',
  'ipv4     2 udp      17 170 src=10.0.0.07 dst=10.96.0.10 sport=1 dport=53 src=10.244.1.5 dst=10.0.0.7 sport=53 dport=1 [ASSURED] mark=0 zone=3 use=1',
  'ipv4     2 tcp      6 431999 ESTABLISHED src=1.1.1.1 dst=2.2.2.2 sport=1 dport=2 src=2.2.2.2 dst=1.1.1.1 sport=2 dport=1 use=1',
  'ipv4     2 udp      17 29 src=bogus dst=172.30.0.10 sport=1 dport=53 src=10.250.0.2 dst=10.250.0.1 sport=5354 dport=1',
  'ipv4     2 udp      17 29 src=10.0.0.1 dst=172.30.0.10 sport=99999 dport=53 src=10.250.0.2 dst=10.250.0.1 sport=5354 dport=1',
  'garbage',
  '',
].join('\n');

test('parseConntrackList: orig and reply groups, normalised IPs, malformed lines skipped', () => {
  assert.deepEqual(parseConntrackList(LIST, 'IPv4'), [
    {
      proto: 'udp',
      origSrc: '10.250.0.1',
      origDst: '172.30.0.10',
      origSrcPort: 40002,
      origDstPort: 53,
      replySrc: '10.250.0.2',
      replySrcPort: 5354,
    },
    {
      proto: 'udp',
      origSrc: '10.0.0.7',
      origDst: '10.96.0.10',
      origSrcPort: 1,
      origDstPort: 53,
      replySrc: '10.244.1.5',
      replySrcPort: 53,
    },
  ]);
  const v6 =
    'ipv6     10 udp      17 29 src=fd00::1 dst=FD00:0:0:0::10 sport=5000 dport=53 [UNREPLIED] src=fd00::2 dst=fd00::1 sport=5354 dport=5000 mark=0 use=1';
  assert.deepEqual(parseConntrackList(v6, 'IPv6'), [
    {
      proto: 'udp',
      origSrc: 'fd00::1',
      origDst: 'fd00::10',
      origSrcPort: 5000,
      origDstPort: 53,
      replySrc: 'fd00::2',
      replySrcPort: 5354,
    },
  ]);
  assert.deepEqual(parseConntrackList(v6, 'IPv4'), [], 'wrong family dropped');
});

test('deleteFlows: exact filters, duplicates once, "0 deleted" is not an error, other failures reported', async () => {
  const calls: string[][] = [];
  const fake: ConntrackExec = async (args) => {
    calls.push([...args]);
    if (args.includes('10.244.9.9'))
      return { code: 1, stdout: '', stderr: 'conntrack v1.4.7 (conntrack-tools): 0 flow entries have been deleted.\n' };
    if (args.includes('10.244.6.6'))
      return { code: 1, stdout: '', stderr: 'conntrack v1.4.7 (conntrack-tools): Operation not permitted\n' };
    return { code: 0, stdout: '', stderr: 'conntrack v1.4.7 (conntrack-tools): 2 flow entries have been deleted.\n' };
  };
  const ct = new Conntrack(fake);
  const flow = {
    proto: 'udp' as const,
    origSrc: '10.0.0.1',
    origDst: '10.96.0.10',
    origSrcPort: 40000,
    origDstPort: 53,
    replySrc: '10.244.1.5',
    replySrcPort: 53,
  };
  const r = await ct.deleteFlows('IPv4', [
    flow,
    { ...flow },
    { origDst: '10.96.0.10', origDstPort: 53, replySrc: '10.244.9.9', replySrcPort: 53 },
    { origDst: '10.96.0.10', origDstPort: 53, replySrc: '10.244.6.6', replySrcPort: 53 },
    { origDst: 'nope', origDstPort: 1, replySrc: '1.1.1.1', replySrcPort: 1 },
  ]);
  assert.equal(calls.length, 3);
  assert.deepEqual(calls[0], [
    '-D',
    '-p',
    'udp',
    '-f',
    'ipv4',
    '--orig-dst',
    '10.96.0.10',
    '--orig-port-dst',
    '53',
    '--reply-src',
    '10.244.1.5',
    '--reply-port-src',
    '53',
    '--orig-src',
    '10.0.0.1',
    '--orig-port-src',
    '40000',
  ]);
  assert.deepEqual(calls[1], [
    '-D',
    '-p',
    'udp',
    '-f',
    'ipv4',
    '--orig-dst',
    '10.96.0.10',
    '--orig-port-dst',
    '53',
    '--reply-src',
    '10.244.9.9',
    '--reply-port-src',
    '53',
  ]);
  assert.equal(r.deleted, 2);
  assert.equal(r.errors.length, 1);
  assert.match(r.errors[0]!, /Operation not permitted/);
});

test('conntrackReconciler: lists, lets the core pick stale flows, deletes only those, reports metrics', async () => {
  const deletes: string[][] = [];
  const fake: ConntrackExec = async (args) => {
    if (args[0] === '-L') return { code: 0, stdout: LIST, stderr: '' };
    deletes.push([...args]);
    return { code: 0, stdout: '', stderr: '1 flow entries have been deleted.' };
  };
  const sp = {
    key: 'kube-system/dns:dns',
    protocol: 'UDP',
    clusterIP: '10.96.0.10',
    port: 53,
    nodePort: 0,
    loadBalancerVIPs: [],
    externalIPs: [],
  } as unknown as ServicePort;
  const ep = { key: '10.244.2.2:53', ip: '10.244.2.2', port: 53, serving: true, ready: true } as unknown as Endpoint;
  const state = {
    family: 'IPv4',
    services: new Map([[sp.key, sp]]),
    endpoints: new Map([[sp.key, [ep]]]),
  } as unknown as SyncState;
  const reports: Array<[string, number]> = [];
  const metrics = { conntrackReconciled: (f: string, _s: number, n: number) => reports.push([f, n]) };
  const hook = conntrackReconciler(new Conntrack(fake), metrics, new FakeClock());
  const index = staleFlowIndex(state);
  assert.equal(await hook.listAndDelete('IPv4', (f) => isStaleUDPFlow(index, f)), 1);
  assert.deepEqual(reports, [['IPv4', 1]]);
  assert.equal(deletes.length, 1, 'only the flow to 10.96.0.10:53 answered by a gone endpoint');
  assert.deepEqual(
    deletes[0],
    [
      '-D',
      '-p',
      'udp',
      '-f',
      'ipv4',
      '--orig-dst',
      '10.96.0.10',
      '--orig-port-dst',
      '53',
      '--reply-src',
      '10.244.1.5',
      '--reply-port-src',
      '53',
    ],
    'one filter per (frontend, stale endpoint), without the client',
  );
});

// ---- real kernel, inside namespaces we own ---------------------------------

const PREFIX = `kpt-ct-${process.pid}`;
const CLIENT = `${PREFIX}-c`;
const SERVER = `${PREFIX}-s`;

async function sh(cmd: string, args: string[], input?: string): Promise<string> {
  return (await run(cmd, args, { input })).stdout;
}

async function removeNamespaces(): Promise<void> {
  for (const ns of [CLIENT, SERVER]) await run('ip', ['netns', 'del', ns], { allowFailure: true });
}

function onSignalCleanup(sig: NodeJS.Signals) {
  const h = () => {
    void removeNamespaces().finally(() => process.exit(130));
  };
  process.once(sig, h);
  return () => process.off(sig, h);
}

async function sendUDP(ns: string, src: string, srcPorts: number[], dst: string, port: number): Promise<void> {
  const type = src.includes(':') ? 'udp6' : 'udp4';
  const script =
    `const d=require('dgram');let n=${srcPorts.length};for(const sp of ${JSON.stringify(srcPorts)}){const s=d.createSocket('${type}');` +
    `s.bind(sp,'${src}',()=>s.send('x',${port},'${dst}',()=>{s.close();if(--n===0)process.exit(0);}));}`;
  await sh('ip', ['netns', 'exec', ns, process.execPath, '-e', script]);
}

/**
 * Client and server namespaces joined by a veth; the server DNATs UDP to
 * 172.30.0.10:53 and [fd00:30::10]:53 to its own :5354, so every flow has a
 * NATed reply tuple, as a Service's has.
 */
async function buildNamespaces(): Promise<void> {
  await removeNamespaces();
  const vc = `kptc${process.pid}`.slice(0, 15);
  const vs = `kpts${process.pid}`.slice(0, 15);
  await sh('ip', ['netns', 'add', CLIENT]);
  await sh('ip', ['netns', 'add', SERVER]);
  await sh('ip', ['link', 'add', vc, 'netns', CLIENT, 'type', 'veth', 'peer', 'name', vs, 'netns', SERVER]);
  await sh('ip', ['-n', CLIENT, 'addr', 'add', '10.250.0.1/24', 'dev', vc]);
  await sh('ip', ['-n', SERVER, 'addr', 'add', '10.250.0.2/24', 'dev', vs]);
  await sh('ip', ['-n', CLIENT, 'addr', 'add', 'fd00:250::1/64', 'dev', vc, 'nodad']);
  await sh('ip', ['-n', SERVER, 'addr', 'add', 'fd00:250::2/64', 'dev', vs, 'nodad']);
  for (const [ns, dev] of [
    [CLIENT, vc],
    [SERVER, vs],
  ] as const) {
    await sh('ip', ['-n', ns, 'link', 'set', dev, 'up']);
    await sh('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
  }
  // Static neighbours: the client's packets leave at once, without waiting for ARP/ND.
  const mac = (JSON.parse(await sh('ip', ['-n', SERVER, '-j', 'link', 'show', vs])) as Array<{ address: string }>)[0]!
    .address;
  for (const ip of ['10.250.0.2', 'fd00:250::2'])
    await sh('ip', ['-n', CLIENT, 'neigh', 'replace', ip, 'lladdr', mac, 'dev', vc, 'nud', 'permanent']);
  await sh('ip', ['-n', CLIENT, 'route', 'add', '172.30.0.0/24', 'via', '10.250.0.2']);
  await sh('ip', ['-n', CLIENT, 'route', 'add', 'fd00:30::/64', 'via', 'fd00:250::2']);
  await sh(
    'ip',
    ['netns', 'exec', SERVER, 'nft', '-f', '-'],
    'table ip kpt { chain pre { type nat hook prerouting priority -100; ip daddr 172.30.0.10 udp dport 53 dnat to 10.250.0.2:5354; }; }\n' +
      'table ip6 kpt6 { chain pre { type nat hook prerouting priority -100; ip6 daddr fd00:30::10 udp dport 53 dnat to [fd00:250::2]:5354; }; }\n',
  );
}

function withNamespaces(t: { after(fn: () => Promise<void>): void }): Promise<void> {
  const offs = [onSignalCleanup('SIGINT'), onSignalCleanup('SIGTERM')];
  t.after(async () => {
    await removeNamespaces();
    offs.forEach((f) => f());
  });
  return buildNamespaces();
}

async function sendFlows(): Promise<void> {
  await sendUDP(CLIENT, '10.250.0.1', [40001, 40002, 40003], '172.30.0.10', 53);
  await sendUDP(CLIENT, 'fd00:250::1', [41001, 41002], 'fd00:30::10', 53);
}

test('real kernel (root): list UDP flows (IPv4 and IPv6) through DNAT rules and delete selected ones', async (t) => {
  await withNamespaces(t);
  await sendFlows();

  const ct = new Conntrack((args) =>
    run('ip', ['netns', 'exec', SERVER, 'conntrack', ...args], { allowFailure: true }),
  );
  const flows = (await ct.listUDPFlows('IPv4')).filter((f) => f.origDst === '172.30.0.10');
  assert.deepEqual(flows.map((f) => f.origSrcPort).sort(), [40001, 40002, 40003]);
  for (const f of flows) {
    assert.deepEqual([f.origSrc, f.origDstPort, f.replySrc, f.replySrcPort], ['10.250.0.1', 53, '10.250.0.2', 5354]);
  }
  const flows6 = (await ct.listUDPFlows('IPv6')).filter((f) => f.origDst === 'fd00:30::10');
  assert.deepEqual(flows6.map((f) => [f.origSrc, f.origSrcPort, f.replySrc, f.replySrcPort]).sort(), [
    ['fd00:250::1', 41001, 'fd00:250::2', 5354],
    ['fd00:250::1', 41002, 'fd00:250::2', 5354],
  ]);
  assert.deepEqual(await ct.deleteFlows('IPv6', [flows6.find((f) => f.origSrcPort === 41001)!]), {
    deleted: 1,
    errors: [],
  });
  assert.deepEqual(
    (await ct.listUDPFlows('IPv6')).filter((f) => f.origDst === 'fd00:30::10').map((f) => f.origSrcPort),
    [41002],
  );
  assert.equal((await ct.listUDPFlows('IPv4')).length, 3, 'IPv6 deletion left IPv4 alone');

  const victim = flows.find((f) => f.origSrcPort === 40002)!;
  const r = await ct.deleteFlows('IPv4', [victim]);
  assert.deepEqual(r, { deleted: 1, errors: [] });
  const again = await ct.deleteFlows('IPv4', [victim]);
  assert.deepEqual(again, { deleted: 0, errors: [] }, 'already gone is not an error');

  const listed = await sh('ip', ['netns', 'exec', SERVER, 'conntrack', '-L', '-p', 'udp', '-f', 'ipv4']);
  assert.match(listed, /sport=40001 dport=53/);
  assert.match(listed, /sport=40003 dport=53/);
  assert.doesNotMatch(listed, /sport=40002 dport=53/);

  // Without the original source, every flow to the VIP answered by that endpoint goes (upstream's filter).
  const bulk = await ct.deleteFlows('IPv4', [
    { origDst: '172.30.0.10', origDstPort: 53, replySrc: '10.250.0.2', replySrcPort: 5354 },
  ]);
  assert.equal(bulk.deleted, 2);
  assert.deepEqual(
    (await ct.listUDPFlows('IPv4')).filter((f) => f.origDst === '172.30.0.10'),
    [],
  );
});

test('real kernel (root): ctnetlink lists what the CLI lists, deletes exact tuples, misses are not errors', async (t) => {
  await withNamespaces(t);
  await sendFlows();
  const nl = await openCtNetlink(SERVER);
  assert.ok(nl, 'netlink is available here (koffi)');
  t.after(() => nl.close());
  const cli = new Conntrack((args) =>
    run('ip', ['netns', 'exec', SERVER, 'conntrack', ...args], { allowFailure: true }),
  );
  const key = (f: { origSrc: string; origSrcPort: number; origDst: string; replySrc: string; replySrcPort: number }) =>
    `${f.origSrc}:${f.origSrcPort}>${f.origDst}<${f.replySrc}:${f.replySrcPort}`;
  for (const fam of ['IPv4', 'IPv6'] as const) {
    const viaNl = nl.listUDPFlows(fam).map(key).sort();
    assert.deepEqual(viaNl, (await cli.listUDPFlows(fam)).map(key).sort(), `${fam}: same entries as conntrack -L`);
    assert.equal(viaNl.length, fam === 'IPv4' ? 3 : 2);
  }
  const six = nl.listUDPFlows('IPv6');
  assert.deepEqual(
    six.map((f) => [f.origSrc, f.origSrcPort, f.origDst, f.origDstPort, f.replySrc, f.replySrcPort]).sort(),
    [
      ['fd00:250::1', 41001, 'fd00:30::10', 53, 'fd00:250::2', 5354],
      ['fd00:250::1', 41002, 'fd00:30::10', 53, 'fd00:250::2', 5354],
    ],
  );
  // Exact deletion: only 40002 goes; deleting it again is ENOENT, not an error.
  const v4 = nl.listUDPFlows('IPv4');
  const victim = v4.find((f) => f.origSrcPort === 40002)!;
  assert.deepEqual(nl.deleteStale('IPv4', [victim]), { deleted: 1, errors: [] });
  assert.deepEqual(nl.deleteStale('IPv4', [victim]), { deleted: 0, errors: [] });
  const listed = await sh('ip', ['netns', 'exec', SERVER, 'conntrack', '-L', '-p', 'udp', '-f', 'ipv4']);
  assert.match(listed, /sport=40001 dport=53/);
  assert.match(listed, /sport=40003 dport=53/);
  assert.doesNotMatch(listed, /sport=40002 dport=53/);
  assert.deepEqual(nl.deleteStale('IPv6', six), { deleted: 2, errors: [] });
  assert.deepEqual(nl.listUDPFlows('IPv6'), []);
  assert.equal(nl.listUDPFlows('IPv4').length, 2, 'IPv6 deletion left IPv4 alone');
  // A record without the kernel's tuple bytes is encoded from its fields.
  const { tuple: _raw, ...plain } = nl.listUDPFlows('IPv4').find((f) => f.origSrcPort === 40001)!;
  assert.deepEqual(nl.deleteFlows('IPv4', [plain]), { deleted: 1, errors: [] });
  assert.deepEqual(
    nl.listUDPFlows('IPv4').map((f) => f.origSrcPort),
    [40003],
  );
  // A record without the original source cannot name one entry.
  const partial = nl.deleteFlows('IPv4', [
    { origDst: '172.30.0.10', origDstPort: 53, replySrc: '10.250.0.2', replySrcPort: 5354 },
  ]);
  assert.equal(partial.deleted, 0);
  assert.match(partial.errors[0]!, /not a complete IPv4 UDP tuple/);
});

test('real kernel (root): flushUDPFlows deletes every client flow to a service address and gone endpoint over ctnetlink', async (t) => {
  await withNamespaces(t);
  await sendFlows();
  const nl = await openCtNetlink(SERVER);
  assert.ok(nl, 'netlink is available here (koffi)');
  t.after(() => nl.close());
  // Another endpoint port of the same address: nothing of it is listed, nothing goes.
  const other = { origDst: '172.30.0.10', origDstPort: 53, replySrc: '10.250.0.2', replySrcPort: 5355 };
  assert.deepEqual(await flushUDPFlows(nl, 'IPv4', [other]), { deleted: 0, errors: [] });
  assert.equal(nl.listUDPFlows('IPv4').length, 3);
  // One target names all three clients' entries (ctnetlink deletes need each one's exact tuple).
  const gone = { ...other, replySrcPort: 5354 };
  assert.deepEqual(await flushUDPFlows(nl, 'IPv4', [gone, gone]), { deleted: 3, errors: [] });
  assert.deepEqual(nl.listUDPFlows('IPv4'), []);
  assert.equal(nl.listUDPFlows('IPv6').length, 2, 'the IPv4 flush left IPv6 alone');
  // Addresses in another spelling match their normalised form.
  const six = { origDst: 'fd00:30:0:0::10', origDstPort: 53, replySrc: 'FD00:250::2', replySrcPort: 5354 };
  assert.deepEqual(await flushUDPFlows(nl, 'IPv6', [six]), { deleted: 2, errors: [] });
  assert.deepEqual(await flushUDPFlows(nl, 'IPv6', []), { deleted: 0, errors: [] });
});

test('real kernel (root): a ctnetlink dump of many datagrams lists every entry once', async (t) => {
  await withNamespaces(t);
  const sock = await openNetlink(NETLINK_PROTOCOL.NETFILTER, { netns: SERVER });
  assert.ok(sock);
  const n = 3000;
  try {
    assert.ok(sock.ackAll(Array.from({ length: n }, (_, i) => newEntryRequest(i, 7))).every((r) => r.errno === 0));
  } finally {
    sock.close();
  }
  const nl = (await openCtNetlink(SERVER))!;
  t.after(() => nl.close());
  const flows = nl.listUDPFlows('IPv4');
  assert.equal(new Set(flows.map((f) => `${f.origSrc}:${f.origSrcPort}`)).size, n, 'no entry lost or repeated');
  assert.ok(
    flows.every((f) => f.replySrc === benchEndpoint(Number(f.origDst.split('.')[3]))),
    'tuples decoded intact',
  );
  assert.deepEqual(nl.deleteStale('IPv4', flows), { deleted: n, errors: [] });
  assert.deepEqual(nl.listUDPFlows('IPv4'), []);
});

test('deleteFlows: a CLI that cannot be spawned is reported per filter, never thrown', async () => {
  const ct = new Conntrack(async () => {
    throw new Error('spawn conntrack ENOENT');
  });
  const r = await ct.deleteFlows('IPv6', [
    { origDst: 'fd00::10', origDstPort: 53, replySrc: 'fd00::2', replySrcPort: 53 },
  ]);
  assert.equal(r.deleted, 0);
  assert.equal(r.errors.length, 1);
  assert.match(r.errors[0]!, /ENOENT/);
  await assert.rejects(ct.listUDPFlows('IPv4'), /ENOENT/, 'a failed listing rejects');
});
