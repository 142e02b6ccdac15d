// The real image, built and run here: deploy/image/build makes the OCI image
// (twice: the second build, re-packing cached parts, must give the same
// digest; `deploy/image/build --check-reproducible` compares two builds from
// scratch, too slow for every run), umoci
// unpacks it as a runtime bundle, and an OCI runtime runs it as the DaemonSet
// runs its pod (test/deploy/ocibundle.ts): host network = a test namespace,
// privileged, the ConfigMap and service account mounted, in-cluster config
// against the test API server. Then: the Service's rules are programmed, the
// image carries every tool, iptables-wrapper picked the host's backend,
// /healthz answers, and SIGTERM ends it with exit 0 and the rules in place.
//
// Runtime: crun when it works here, else runc. (On this CI host crun stops at
// "cgroups in hybrid mode not supported", and podman cannot raise
// RLIMIT_NOFILE without CAP_SYS_RESOURCE; runc runs the same bundle.)
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { run } from '../../src/platform/exec.js';
import { trackChild, untrackChild } from '../netns/cleanup.js';
import { REPO_ROOT } from '../netns/spawn.js';
import { loadManifests, only, type ConfigMap, type DaemonSet, type PodWorld } from '../deploy/manifests.js';
import { newNamespace, type TestNamespace } from '../deploy/netns.js';
import { writePodBundle } from '../deploy/ocibundle.js';
import { ApiHost, seedNodeAndWeb } from '../deploy/apihostclient.js';

const NODE = 'node-img';
const NODE_IP = '192.168.77.10';
const CLUSTER_IP = '172.30.0.51';
const ID = `kpt-${process.pid}-image`;

const installed = (t: string): boolean => existsSync(`/usr/bin/${t}`) || existsSync(`/usr/sbin/${t}`);

async function ensureTools(): Promise<void> {
  const missing = ['umoci', 'runc'].filter((t) => !installed(t));
  if (missing.length === 0) return;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  await run('apt-get', ['-q', '-o', 'DPkg::Lock::Timeout=600', 'update'], { env });
  await run(
    'apt-get',
    ['install', '-y', '-q', '-o', 'DPkg::Lock::Timeout=600', '--no-install-recommends', ...missing],
    { env },
  );
}

/** Build the image into `out`; returns the digest (the script's last line) and the seconds it took. */
async function build(out: string, extra: string[] = []): Promise<{ digest: string; seconds: number }> {
  const t0 = Date.now();
  const r = await run(join(REPO_ROOT, 'deploy/image/build'), ['--out', out, ...extra]);
  const digest = r.stdout.trim().split('\n').at(-1) ?? '';
  console.log(r.stdout.trim());
  return { digest, seconds: (Date.now() - t0) / 1000 };
}

describe('the OCI image: built reproducibly, run as the DaemonSet runs it', { concurrency: false }, () => {
  const tmp = mkdtempSync(join(tmpdir(), 'kpt-image-'));
  const bundle = join(tmp, 'bundle');
  let first: { digest: string; seconds: number };
  let second: { digest: string; seconds: number };
  let ns: TestNamespace;
  let api: ApiHost;
  let runtime = '';
  let proc: ChildProcess | undefined;
  let log = '';
  let exited: Promise<number | null> = Promise.resolve(null);
  const natRules = async () => (await ns.run(['iptables-save', '-t', 'nat'])).stdout;
  const inContainer = async (script: string) =>
    (await run(runtime, ['exec', ID, 'sh', '-c', script], { allowFailure: true })).stdout;

  before(async () => {
    await ensureTools();
    first = await build(join(tmp, 'oci-a'));
    second = await build(join(tmp, 'oci-b'));
    await run('umoci', [
      'unpack',
      '--image',
      `${join(tmp, 'oci-a')}:${JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).version}`,
      bundle,
    ]);

    ns = await newNamespace('img');
    await ns.run(['ip', 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth1']);
    await ns.run(['ip', 'link', 'set', 'eth1', 'up']);
    await ns.run(['ip', 'addr', 'add', `${NODE_IP}/24`, 'dev', 'eth0']);
    await ns.run(['ip', 'link', 'set', 'eth0', 'up']);
    const saDir = join(tmp, 'sa');
    api = await ApiHost.start(ns.name, saDir);
    await seedNodeAndWeb(api, NODE, NODE_IP, CLUSTER_IP);
    await api.create('endpointslices', {
      metadata: { namespace: 'default', name: 'web-1', labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
      endpoints: [{ addresses: ['10.244.1.5'], conditions: { ready: true }, nodeName: NODE }],
    });

    const manifests = loadManifests();
    const ds = only<DaemonSet>(manifests, 'DaemonSet');
    const cm = only<ConfigMap>(manifests, 'ConfigMap');
    const conf = parse(cm.data['config.conf']!) as { conntrack: Record<string, unknown> };
    conf.conntrack['maxPerCore'] = 0; // nf_conntrack_max is global: leave it, as kind does
    const world: PodWorld = {
      nodeName: NODE,
      configMaps: {
        [cm.metadata!.name!]: {
          ...cm.data,
          'config.conf': stringify(conf),
          'api-server-host': api.host,
          'api-server-port': String(api.port),
        },
      },
      serviceEnv: { KUBERNETES_SERVICE_HOST: '172.30.0.1', KUBERNETES_SERVICE_PORT: '443' },
    };
    writePodBundle({
      bundle,
      netnsPath: `/run/netns/${ns.name}`,
      spec: ds.spec.template.spec,
      container: ds.spec.template.spec.containers[0]!,
      world,
      saDir,
      hostDir: join(tmp, 'host'),
      cgroupsPath: ID,
    });
    // Nothing may outlive a crashed run: the container dies with the namespace (cleanup.ts kills its pids).
    process.on('exit', () => {
      try {
        if (runtime) execFileSync(runtime, ['delete', '-f', ID], { stdio: 'ignore' });
      } catch {
        // nothing to delete, or no runtime: the namespace's cleanup kills what is left
      }
    });
    // Only installed runtimes: ensureTools installs runc; crun is tried first where a machine has it.
    for (const rt of ['crun', 'runc'].filter(installed)) {
      runtime = rt;
      log = '';
      proc = spawn(rt, ['run', '--bundle', bundle, ID], { stdio: ['ignore', 'pipe', 'pipe'] });
      trackChild(proc.pid);
      proc.stdout!.on('data', (b: Buffer) => (log += b.toString()));
      proc.stderr!.on('data', (b: Buffer) => (log += b.toString()));
      exited = new Promise((res) => {
        proc!.once('exit', (code) => (untrackChild(proc!.pid), res(code)));
        proc!.once('error', (e) => ((log += String(e)), res(null)));
      });
      const started = await Promise.race([
        exited.then(() => false),
        new Promise((r) => setTimeout(() => r(true), 3000)),
      ]);
      if (started) break;
      console.log(`${rt} cannot run the bundle here: ${log.trim()}`);
      await run(rt, ['delete', '-f', ID], { allowFailure: true });
      runtime = '';
    }
    if (!runtime) throw new Error('no OCI runtime could run the image (see above)');
    console.log(`runtime: ${runtime}`);
  });

  after(async () => {
    // A failed delete must not keep the API host below alive (the file would never end).
    if (runtime) await run(runtime, ['delete', '-f', ID], { allowFailure: true }).catch((e) => console.log(String(e)));
    if (api) await api.stop();
    ns?.dispose();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('builds reproducibly: building again (from the cached layers and parts) gives the same digest', () => {
    console.log(`build: ${first.seconds.toFixed(0)} s (${first.digest}); rebuild: ${second.seconds.toFixed(0)} s`);
    assert.match(first.digest, /^sha256:[0-9a-f]{64}$/);
    assert.equal(second.digest, first.digest);
  });

  it('the DaemonSet command runs in the image: in-cluster config, host network, the Service programmed', async () => {
    const deadline = Date.now() + 60_000;
    while (!(await natRules()).includes(CLUSTER_IP)) {
      assert.ok(Date.now() < deadline, `no rules for ${CLUSTER_IP} after 60 s:\n${log}`);
      await new Promise((r) => setTimeout(r, 500));
    }
    const rules = await natRules();
    assert.match(rules, new RegExp(`-d ${CLUSTER_IP.replace(/\./g, '\\.')}/32 .*-j KUBE-SVC-`));
    assert.match(rules, /--to-destination 10\.244\.1\.5:8080/);
    const healthz = async () =>
      (
        await ns.run(
          [
            process.execPath,
            '-e',
            'fetch("http://127.0.0.1:10256/healthz").then((r) => process.exit(r.status === 200 ? 0 : 1), () => process.exit(1))',
          ],
          { allowFailure: true },
        )
      ).code === 0;
    while (!(await healthz())) {
      assert.ok(Date.now() < deadline, `/healthz not 200 in the host network:\n${log}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  });

  it('carries every tool, both iptables backends behind the wrapper (which chose the host nft), libbpf and the BPF objects, and the kube-proxy alias', async () => {
    const out = await inContainer(
      'for t in nft conntrack ipset ipvsadm nfacct ip sysctl modprobe xtables-nft-multi xtables-legacy-multi node kube-proxy kube-proxy-ts; do command -v $t >/dev/null || echo "missing $t"; done; ' +
        'ls /usr/lib/x86_64-linux-gnu/libbpf.so.1 >/dev/null || echo "missing libbpf"; readlink /usr/sbin/iptables; kube-proxy --version; ' +
        // The ebpf mode's object where its loader looks, and libbpf loadable by that loader.
        'test -s /opt/kube-proxy-ts/dist/bpf/kpt.o || echo "missing kpt.o"; ' +
        'node -e \'import("/opt/kube-proxy-ts/dist/src/platform/ebpf/libbpf.js").then((m) => console.log("libbpf loads:", m.libbpfAvailable()))\'',
    );
    assert.doesNotMatch(out, /missing/, out);
    assert.match(out, /^\/usr\/sbin\/xtables-nft-multi$/m);
    assert.match(out, /^kube-proxy-ts v\d+\.\d+\.\d+$/m);
    assert.match(out, /^libbpf loads: true$/m);
  });

  it('SIGTERM: exit 0, rules left in place', async () => {
    const before = (await natRules()).split('\n').filter((l) => l.startsWith('-A KUBE-'));
    await run(runtime, ['kill', ID, 'TERM']);
    assert.equal(await exited, 0, log);
    assert.match(log, /Stopped; rules are left in place/);
    const left = (await natRules()).split('\n').filter((l) => l.startsWith('-A KUBE-'));
    assert.deepEqual(left, before);
  });
});
