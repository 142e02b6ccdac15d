// The real bin/kube-proxy-ts with --profiling, in a network namespace of its
// own and standalone (--manifests: no API server needed): a CPU profile and a
// heap profile fetched over HTTP from the metrics address read back with a
// pprof decoder and name the proxy's own code; the heap snapshot is refused
// to a client that is not on loopback. Without --profiling the paths are 404.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { Profile } from 'pprof-format';
import { stringify } from 'yaml';
import { deleteNamespaceSync, removeTempDir, tempDir, trackNamespace, untrackNamespace } from '../netns/cleanup.js';
import { newPrefix } from '../netns/names.js';
import { E2E_MODES, proxyArgv } from '../netns/proxy.js';
import { nsRun, nsSpawn, type NsProcess } from '../netns/spawn.js';

const mode = E2E_MODES[0] ?? 'iptables';
const ns = `${newPrefix()}pprof`;
const NODE = 'pprof-node';
/** The namespace's own address, not loopback: the client's source when it connects to it. */
const NODE_IP = '192.0.2.10';
const METRICS = '127.0.0.1:10249';

/** GET url from inside the namespace; the body lands in a file (profiles are binary). */
async function get(dir: string, url: string): Promise<{ status: number; body: Buffer }> {
  const out = join(dir, 'body');
  const r = await nsRun(ns, ['curl', '-sS', '-o', out, '-w', '%{http_code}', '--max-time', '60', url], {
    allowFailure: true,
  });
  const status = Number(r.stdout);
  return { status, body: status > 0 ? readFileSync(out) : Buffer.alloc(0) };
}

/** Function names and file names of a decoded pprof profile. */
function functions(p: Profile): { name: string; file: string }[] {
  const s = (i: number | bigint) => p.stringTable.strings[Number(i)] ?? '';
  return p.function.map((f) => ({ name: s(f.name), file: s(f.filename) }));
}
const sampleTypes = (p: Profile) =>
  p.sampleType.map((t) => `${p.stringTable.strings[Number(t.type)]}/${p.stringTable.strings[Number(t.unit)]}`);
/** Our compiled sources (dist/src/...) or, run from source, src/... */
const ours = (file: string) => /\/(dist\/)?src\/(platform|engine|core|cmd|dataplane)\//.test(file);

describe(`profiling on the real proxy (${mode}, standalone)`, { concurrency: false }, () => {
  const dir = tempDir('kpt-pprof-');
  const manifests = join(dir, 'manifests');
  let proxy: NsProcess | undefined;

  async function start(profiling: boolean): Promise<void> {
    proxy = nsSpawn(ns, [
      ...proxyArgv(),
      '--manifests',
      manifests,
      '--hostname-override',
      NODE,
      '--proxy-mode',
      mode,
      '--healthz-bind-address',
      '127.0.0.1:10256',
      // Every address, so the namespace's own address reaches it too (the heap snapshot refusal).
      '--metrics-bind-address',
      '0.0.0.0:10249',
      '--conntrack-max-per-core',
      '0',
      ...(profiling ? ['--profiling'] : []),
    ]);
    for (let i = 0; ; i++) {
      if (proxy.child.exitCode !== null) assert.fail(`proxy exited ${proxy.child.exitCode}:\n${proxy.log()}`);
      if ((await get(dir, 'http://127.0.0.1:10256/healthz')).status === 200) return;
      if (i > 300) assert.fail(`proxy not healthy:\n${proxy.log()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  async function stop(): Promise<void> {
    await proxy?.stop(5000);
    proxy = undefined;
  }

  before(() => {
    trackNamespace(ns);
    execFileSync('ip', ['netns', 'add', ns]);
    execFileSync('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    // A veth pair with both ends inside: the namespace gets an address of its own (no dummy module here).
    execFileSync('ip', ['-n', ns, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth1']);
    execFileSync('ip', ['-n', ns, 'addr', 'add', `${NODE_IP}/24`, 'dev', 'eth0']);
    execFileSync('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
    execFileSync('ip', ['-n', ns, 'link', 'set', 'eth1', 'up']);
    execFileSync('mkdir', [manifests]);
    const node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: NODE, labels: { 'kubernetes.io/hostname': NODE } },
      spec: { podCIDR: '10.244.0.0/24', podCIDRs: ['10.244.0.0/24'] },
      status: { addresses: [{ type: 'InternalIP', address: NODE_IP }] },
    };
    writeFileSync(join(manifests, 'node.yaml'), stringify(node));
  });
  after(async () => {
    await stop();
    deleteNamespaceSync(ns);
    untrackNamespace(ns);
    removeTempDir(dir);
  });

  it('with --profiling: a CPU profile and a heap profile in pprof format, naming our functions', async () => {
    await start(true);
    const index = await get(dir, `http://${METRICS}/debug/pprof/`);
    assert.equal(index.status, 200);
    assert.match(index.body.toString(), /href="\/debug\/pprof\/profile"/);

    // Give the proxy work while it is sampled: the metrics server's handlers are ours.
    const cpu = get(dir, `http://${METRICS}/debug/pprof/profile?seconds=1`);
    const busy = join(dir, 'busy');
    for (let i = 0; i < 5; i++)
      await nsRun(ns, ['curl', '-sS', '-o', busy, `http://${METRICS}/metrics`, `http://${METRICS}/statusz`], {
        allowFailure: true,
      });
    const r = await cpu;
    assert.equal(r.status, 200, r.body.toString());
    const p = Profile.decode(gunzipSync(r.body));
    assert.deepEqual(sampleTypes(p), ['samples/count', 'cpu/nanoseconds']);
    assert.ok(p.sample.length > 0, 'CPU samples');
    assert.ok(
      p.sample.every((s) => Number(s.value[0]) > 0 && s.locationId.length > 0),
      'each sample has a count and a stack',
    );
    const fns = functions(p);
    assert.ok(
      fns.some((f) => ours(f.file) && f.name !== '(anonymous)'),
      `a named function of ours among ${JSON.stringify(fns.map((f) => `${f.name} ${f.file}`))}`,
    );

    const h = await get(dir, `http://${METRICS}/debug/pprof/heap`);
    assert.equal(h.status, 200, h.body.toString());
    const hp = Profile.decode(gunzipSync(h.body));
    assert.deepEqual(sampleTypes(hp), ['objects/count', 'space/bytes']);
    assert.ok(hp.sample.length > 0, 'heap samples');
    const bytes = hp.sample.reduce((a, s) => a + Number(s.value[1]), 0);
    assert.ok(bytes > 1024 * 1024, `in-use bytes sampled since start-up: ${bytes}`);
    assert.ok(
      functions(hp).some((f) => ours(f.file)),
      'allocations from our code',
    );
  });

  it('the heap snapshot is refused to a client that is not on loopback', async () => {
    const r = await get(dir, `http://${NODE_IP}:10249/debug/pprof/heapsnapshot`);
    assert.equal(r.status, 403);
    assert.match(r.body.toString(), /loopback clients only/);
    // The same client reaches the rest of the metrics server from that address.
    assert.equal((await get(dir, `http://${NODE_IP}:10249/debug/pprof/`)).status, 200);
    await stop();
  });

  it('without --profiling, /debug/pprof/ is 404', async () => {
    await start(false);
    for (const path of ['/debug/pprof/', '/debug/pprof/profile?seconds=1', '/debug/pprof/heap'])
      assert.equal((await get(dir, `http://${METRICS}${path}`)).status, 404, path);
    assert.equal((await get(dir, `http://${METRICS}/metrics`)).status, 200);
  });
});
