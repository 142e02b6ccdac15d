// Sysctl writes are tested on a temporary directory tree, and for real only
// inside a network namespace this test creates (kpt-sys-<pid>), through a
// child process started with `ip netns exec`. The root namespace is only read.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { conntrackMax, ensureRouteLocalnet, setupConntrack, Sysctl } from './sysctl.js';
import { run } from './exec.js';
import { ProxyError } from '../core/errors.js';

async function fakeProc(values: Record<string, string>): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'kpt-sysctl-'));
  for (const [name, v] of Object.entries(values)) {
    await mkdir(dirname(join(root, name)), { recursive: true });
    await writeFile(join(root, name), v);
  }
  return root;
}

/** A /proc/sys we may read but not write, as a proxy without the privilege sees it (root ignores file modes). */
class ReadOnlySysctl extends Sysctl {
  override setInt(name: string): Promise<void> {
    return Promise.reject(new ProxyError('KPT_EXEC_FAILED', `open ${name}: permission denied`));
  }
}

test('conntrackMax: maxPerCore x cpus, floored by min, the product capped at 1048576, 0 = leave alone', () => {
  assert.equal(conntrackMax({ maxPerCore: 32768, min: 131072 }, 2), 131072);
  assert.equal(conntrackMax({ maxPerCore: 32768, min: 131072 }, 8), 262144);
  assert.equal(conntrackMax({ maxPerCore: 32768, min: 131072 }, 64), 1_048_576);
  assert.equal(conntrackMax({ maxPerCore: 0, min: 131072 }, 8), 0);
  assert.equal(conntrackMax({ maxPerCore: null, min: 131072 }, 8), 0);
  // Upstream caps the product only: a min above the cap is still the floor of a small product...
  assert.equal(conntrackMax({ maxPerCore: 32768, min: 2_000_000 }, 2), 2_000_000);
  // ...but a product above the cap gives the cap, whatever min says.
  assert.equal(conntrackMax({ maxPerCore: 32768, min: 2_000_000 }, 64), 1_048_576);
});

test('nf_conntrack_max is raised, never lowered; the hashsize still follows what we wanted', async (t) => {
  const root = await fakeProc({ 'sys/net/netfilter/nf_conntrack_max': '2000000\n', hashsize: '16384\n' });
  t.after(() => rm(root, { recursive: true, force: true }));
  const sysctl = new Sysctl(join(root, 'sys'));
  const opts = { sysctl, hashsizePath: join(root, 'hashsize'), numCPU: 64 };
  const r = await setupConntrack({ maxPerCore: 32768, min: 131072 }, opts);
  assert.equal(await sysctl.getInt('net/netfilter/nf_conntrack_max'), 2_000_000, 'a larger table is left alone');
  assert.deepEqual(r.changed, ['hashsize']);
  assert.equal((await readFile(join(root, 'hashsize'), 'utf8')).trim(), String(1_048_576 / 4));

  // Equal is enough too: no write, so a read-only sysctl (an LXC node) does not stop the proxy.
  const ro = await fakeProc({ 'sys/net/netfilter/nf_conntrack_max': '262144\n', hashsize: '65536\n' });
  t.after(() => rm(ro, { recursive: true, force: true }));
  const roSysctl = new ReadOnlySysctl(join(ro, 'sys'));
  const same = await setupConntrack(
    { maxPerCore: 32768, min: 131072 },
    { sysctl: roSysctl, hashsizePath: join(ro, 'hashsize'), numCPU: 8 },
  );
  assert.deepEqual(same.changed, []);

  // A smaller value is raised.
  await writeFile(join(root, 'sys/net/netfilter/nf_conntrack_max'), '65536\n');
  const up = await setupConntrack({ maxPerCore: 32768, min: 131072 }, opts);
  assert.deepEqual(up.changed, ['net/netfilter/nf_conntrack_max']);
  assert.equal(await sysctl.getInt('net/netfilter/nf_conntrack_max'), 1_048_576);
});

test('setupConntrack on a fake /proc/sys: writes only what differs; raises hashsize to max/4', async (t) => {
  const root = await fakeProc({
    'sys/net/netfilter/nf_conntrack_max': '65536\n',
    'sys/net/netfilter/nf_conntrack_tcp_timeout_established': '86400\n',
    'sys/net/netfilter/nf_conntrack_tcp_timeout_close_wait': '60\n',
    'sys/net/netfilter/nf_conntrack_tcp_be_liberal': '0\n',
    'sys/net/netfilter/nf_conntrack_udp_timeout': '30\n',
    'sys/net/netfilter/nf_conntrack_udp_timeout_stream': '120\n',
    hashsize: '16384\n',
  });
  t.after(() => rm(root, { recursive: true, force: true }));
  const sysctl = new Sysctl(join(root, 'sys'));
  const r = await setupConntrack(
    {
      maxPerCore: 32768,
      min: 131072,
      tcpEstablishedTimeout: 86400,
      tcpCloseWaitTimeout: 3600,
      tcpBeLiberal: true,
      udpTimeout: 0,
      udpStreamTimeout: null,
    },
    { sysctl, hashsizePath: join(root, 'hashsize'), numCPU: 8 },
  );
  assert.deepEqual(r.changed, [
    'net/netfilter/nf_conntrack_max',
    'hashsize',
    'net/netfilter/nf_conntrack_tcp_timeout_close_wait',
    'net/netfilter/nf_conntrack_tcp_be_liberal',
  ]);
  assert.deepEqual(r.warnings, []);
  assert.equal(await sysctl.getInt('net/netfilter/nf_conntrack_max'), 262144);
  assert.equal((await readFile(join(root, 'hashsize'), 'utf8')).trim(), '65536');
  assert.equal(await sysctl.getInt('net.netfilter.nf_conntrack_udp_timeout'), 30, 'dotted names work; 0 leaves it');
  const again = await setupConntrack(
    { maxPerCore: 32768, min: 131072, tcpCloseWaitTimeout: 3600, tcpBeLiberal: true },
    { sysctl, hashsizePath: join(root, 'hashsize'), numCPU: 8 },
  );
  assert.deepEqual(again.changed, [], 'idempotent');
});

test('an unwritable hashsize is a warning; an unwritable sysctl is an error with a code', async (t) => {
  const root = await fakeProc({ 'sys/net/netfilter/nf_conntrack_max': '1\n' });
  t.after(() => rm(root, { recursive: true, force: true }));
  const sysctl = new Sysctl(join(root, 'sys'));
  const r = await setupConntrack(
    { maxPerCore: 10, min: 0 },
    { sysctl, hashsizePath: join(root, 'missing-dir', 'hashsize'), numCPU: 1 },
  );
  assert.deepEqual(r.changed, ['net/netfilter/nf_conntrack_max']);
  assert.equal(r.warnings.length, 1);
  await assert.rejects(setupConntrack({ tcpBeLiberal: true }, { sysctl: new Sysctl(join(root, 'nope')) }), {
    code: 'KPT_EXEC_FAILED',
  });
  assert.throws(() => sysctl.path('net/../../etc/passwd'), { code: 'KPT_INPUT_INVALID' });
  assert.equal(
    sysctl.path('net/ipv4/conf/eth0.100/route_localnet'),
    join(root, 'sys', 'net/ipv4/conf/eth0.100/route_localnet'),
  );
  assert.equal(sysctl.path('net.ipv4.ip_forward'), join(root, 'sys', 'net/ipv4/ip_forward'));
});

// ---- real kernel: inside a namespace we own --------------------------------

const NS = `kpt-sys-${process.pid}`;
const KEYS = [
  'net/netfilter/nf_conntrack_tcp_timeout_close_wait',
  'net/netfilter/nf_conntrack_tcp_be_liberal',
  'net/netfilter/nf_conntrack_udp_timeout',
  'net/netfilter/nf_conntrack_udp_timeout_stream',
  'net/ipv4/conf/all/route_localnet',
];

async function readIn(ns: string | null, key: string): Promise<string> {
  const args = ns ? ['netns', 'exec', ns, 'cat', `/proc/sys/${key}`] : null;
  return args ? (await run('ip', args)).stdout.trim() : (await readFile(`/proc/sys/${key}`, 'utf8')).trim();
}

test('real kernel (root): per-netns conntrack sysctls and route_localnet written inside a namespace only', async (t) => {
  const cleanup = () => run('ip', ['netns', 'del', NS], { allowFailure: true });
  const onSig = () => {
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSig);
  process.once('SIGTERM', onSig);
  t.after(async () => {
    await cleanup();
    process.off('SIGINT', onSig);
    process.off('SIGTERM', onSig);
  });
  await cleanup();
  await run('ip', ['netns', 'add', NS]);
  // Make sure conntrack is initialised in the namespace (its sysctls appear with the first netfilter user).
  await run('ip', ['netns', 'exec', NS, 'nft', '-f', '-'], {
    input: 'table ip kptsys { chain c { type filter hook input priority 0; ct state established accept; }; }\n',
  });

  const rootBefore = await Promise.all(KEYS.map((k) => readIn(null, k)));
  const mod = new URL('./sysctl' + (import.meta.url.endsWith('.ts') ? '.ts' : '.js'), import.meta.url).href;
  const script = `const m = await import(${JSON.stringify(mod)});
    const r = await m.setupConntrack({ maxPerCore: 0, tcpCloseWaitTimeout: 1234, tcpBeLiberal: true, udpTimeout: 47, udpStreamTimeout: 131 });
    const rl = await m.ensureRouteLocalnet();
    process.stdout.write(JSON.stringify({ changed: r.changed, rl }));`;
  const loader = import.meta.url.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const out = await run('ip', ['netns', 'exec', NS, process.execPath, ...loader, '--input-type=module', '-e', script]);
  const res = JSON.parse(out.stdout) as { changed: string[]; rl: boolean };
  assert.deepEqual(res.changed.sort(), KEYS.slice(0, 4).sort());
  assert.equal(res.rl, true);

  assert.deepEqual(await Promise.all(KEYS.map((k) => readIn(NS, k))), ['1234', '1', '47', '131', '1']);
  assert.deepEqual(await Promise.all(KEYS.map((k) => readIn(null, k))), rootBefore, 'root namespace untouched');
});

test('ensureRouteLocalnet on a fake tree', async (t) => {
  const root = await fakeProc({ 'net/ipv4/conf/all/route_localnet': '0\n' });
  t.after(() => rm(root, { recursive: true, force: true }));
  assert.equal(await ensureRouteLocalnet(new Sysctl(root)), true);
  assert.equal(await ensureRouteLocalnet(new Sysctl(root)), false);
});
