// The IPVS Fake refuses what the kernel and the tools refuse (each case was
// checked in the QEMU guest: Debian 6.1, ipset 7.17, iptables-nft 1.8.9).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Fake } from './fake.js';
import type { VirtualServer } from './objects.js';

const vs = (over: Partial<VirtualServer> = {}): VirtualServer => ({
  family: 'IPv4',
  protocol: 'TCP',
  address: '10.96.0.10',
  port: 80,
  scheduler: 'rr',
  flags: 0,
  timeout: 0,
  ...over,
});
const rs = { address: '10.244.1.5', port: 8080, weight: 1 };

test('IPVS requests: errnos as the kernel answers, and a refused request does not stop the rest', () => {
  const f = new Fake();
  const failures = f.applyIpvs([
    { op: 'add-service', vs: vs() },
    { op: 'add-service', vs: vs() },
    { op: 'add-service', vs: vs({ address: '10.96.0.11', scheduler: 'nosuch' }) },
    { op: 'del-service', vs: vs({ address: '10.96.0.12' }) },
    { op: 'edit-service', vs: vs({ address: '10.96.0.12' }) },
    { op: 'add-dest', vs: vs({ address: '10.96.0.12' }), rs },
    { op: 'add-dest', vs: vs(), rs },
    { op: 'add-dest', vs: vs(), rs },
    { op: 'add-dest', vs: vs(), rs: { address: 'fd00::5', port: 80, weight: 1 } },
    { op: 'edit-dest', vs: vs(), rs: { ...rs, port: 9 } },
    { op: 'del-dest', vs: vs(), rs: { ...rs, port: 9 } },
    { op: 'edit-dest', vs: vs(), rs: { ...rs, weight: 0 } },
  ]);
  assert.deepEqual(
    failures.map((x) => [x.op.op, x.errno]),
    [
      ['add-service', 17],
      ['add-service', 2],
      ['del-service', 3],
      ['edit-service', 3],
      ['add-dest', 3],
      ['add-dest', 17],
      ['add-dest', 22],
      ['edit-dest', 2],
      ['del-dest', 2],
    ],
  );
  assert.deepEqual(
    f.listDests(vs()).map((d) => [d.address, d.weight]),
    [['10.244.1.5', 0]],
  );
  f.applyIpvs([{ op: 'del-service', vs: vs() }]);
  assert.deepEqual(f.listServices(), []);
});

test('ipset restore: a syntax error applies nothing; a refused line stops there, earlier lines stay', () => {
  const f = new Fake();
  assert.throws(() => f.ipsetRestore('create A bitmap:port range 0-65535\nadd A 1\nbogus line\n'), /Syntax error/);
  assert.deepEqual(f.setNames(), []);
  f.ipsetRestore('create A bitmap:port range 0-65535\nadd A 1\n');
  assert.throws(() => f.ipsetRestore('add A 2\nadd A 1\nadd A 3\n'), /already added/);
  assert.deepEqual([...f.members('A')!].sort(), ['1', '2']);
  f.ipsetRestore('add A 1 -exist\ndel A 9 -exist\n');
  assert.throws(() => f.ipsetRestore('del A 9\n'), /not added/);
  assert.throws(() => f.ipsetRestore('add A 70000\n'), /not a bitmap:port member/);
  assert.throws(() => f.ipsetRestore('create A hash:ip family inet -exist\n'), /already exists/);
  f.ipsetRestore('create A bitmap:port range 0-65535 -exist\n');
});

test('ipset members are kept in ipset save form: host nets lose the prefix, protocols are lower case', () => {
  const f = new Fake();
  f.ipsetRestore(
    [
      'create N hash:ip,port,net family inet hashsize 1024 maxelem 65536',
      'add N 1.2.3.4,TCP:80,10.0.0.1/32',
      'add N 1.2.3.4,tcp:80,10.0.0.0/8',
      'create N6 hash:ip,port,net family inet6',
      'add N6 2001:DB8::1,udp:53,2001:db8::5/128',
      '',
    ].join('\n'),
  );
  assert.deepEqual([...f.members('N')!].sort(), ['1.2.3.4,tcp:80,10.0.0.0/8', '1.2.3.4,tcp:80,10.0.0.1']);
  assert.deepEqual([...f.members('N6')!], ['2001:db8::1,udp:53,2001:db8::5']);
  assert.throws(() => f.ipsetRestore('add N 1.2.3.4,tcp:80,0.0.0.0/0\n'), /not a hash:ip,port,net member/);
  assert.throws(() => f.ipsetRestore('add N fd00::1,tcp:80,10.0.0.0/8\n'), /not a hash:ip,port,net member/);
});

test('iptables rules may only match sets that exist, and a matched set cannot be destroyed', () => {
  const f = new Fake();
  const rules = '*filter\n:KUBE-X - [0:0]\n-A KUBE-X -m set --match-set S dst -j ACCEPT\nCOMMIT\n';
  assert.throws(() => f.iptablesRestore(rules), /Set S doesn't exist/);
  f.ipsetRestore('create S hash:ip family inet\n');
  f.iptablesRestore(rules);
  assert.throws(() => f.ipsetRestore('destroy S\n'), /in use by a kernel component/);
  f.iptablesRestore('*filter\n:KUBE-X - [0:0]\nCOMMIT\n');
  f.ipsetRestore('destroy S\n');
  assert.deepEqual(f.setNames(), []);
});

test('the dummy link holds normalised addresses; dump prints every part', () => {
  const f = new Fake();
  assert.deepEqual(f.changeAddresses(true, ['10.96.0.10']), [
    { address: '10.96.0.10', error: 'ENODEV: no kube-ipvs0' },
  ]);
  f.ensureDummy();
  assert.deepEqual(f.changeAddresses(true, ['10.96.0.010', 'FD00::A', 'nonsense']), [
    { address: 'nonsense', error: 'EINVAL' },
  ]);
  assert.deepEqual(f.dummyAddresses(), ['10.96.0.10', 'fd00::a']);
  f.applyIpvs([
    { op: 'add-service', vs: vs({ flags: 1, timeout: 10800 }) },
    { op: 'add-dest', vs: vs(), rs },
  ]);
  f.ipsetRestore(
    'create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536\nadd KUBE-CLUSTER-IP 10.96.0.10,tcp:80\n',
  );
  const d = f.dump();
  assert.match(d, /-A -t 10\.96\.0\.10:80 -s rr -p 10800\n-a -t 10\.96\.0\.10:80 -r 10\.244\.1\.5:8080 -m -w 1/);
  assert.match(d, /# ip addr show kube-ipvs0\n10\.96\.0\.10\nfd00::a/);
  assert.match(d, /add KUBE-CLUSTER-IP 10\.96\.0\.10,tcp:80/);
  assert.equal(f.deleteDummy(), true);
  assert.equal(f.hasDummy(), false);
});
