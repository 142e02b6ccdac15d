// Security checks against the real proxy in the namespace cluster:
//   - with no bind flags, the metrics server (/metrics, /statusz, /flagz)
//     listens on 127.0.0.1 only: reachable inside the node, refused from
//     outside; /healthz keeps upstream's 0.0.0.0:10256;
//   - at -v 9, with a kubeconfig holding a bearer token and a client
//     certificate and key, through API errors (401, 500, closed watches), no
//     log line carries the token, the key or the certificate;
//   - the route_localnet guard (CVE-2020-8558; iptables mode sets
//     route_localnet=1 for localhost NodePorts): a pod routing packets to the
//     node's 127.0.0.1 cannot reach a UDP service listening there. The same
//     datagrams do reach it once the guard is flushed, so the check can fail.
//     nftables mode leaves route_localnet at 0 (and nothing reaches it).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { E2EEnv } from '../netns/e2e.js';
import { E2E_MODES, ProxyProcess } from '../netns/proxy.js';
import { nsRun, nsSpawn, type NsProcess } from '../netns/spawn.js';

describe('metrics on 127.0.0.1 by default; no secret in logs at -v 9', { concurrency: false }, () => {
  let env: E2EEnv;
  let dir = '';
  let token = '';
  let keyBody: string[] = [];
  let certBody: string[] = [];
  let proxy: ProxyProcess | undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kpt-sec-'));
    // A client certificate and key next to the token (the test API server ignores client certificates).
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=kpt-secret-test',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    const pemBody = (f: string) =>
      readFileSync(join(dir, f), 'utf8')
        .split('\n')
        .filter((l) => l.length > 40 && !l.startsWith('-----'));
    keyBody = pemBody('key.pem');
    certBody = pemBody('cert.pem');
    env = await E2EEnv.start('iptables');
    // node1's proxy again, with the defaults for the bind addresses, -v 9 and a kubeconfig that adds a
    // client certificate and key to the harness's token.
    await env.proxy('node1').stop();
    const kc = JSON.parse(readFileSync(env.cp.kubeconfig, 'utf8')) as {
      users: Array<{ user: Record<string, string> }>;
    };
    const user = kc.users[0]!.user;
    token = user['token'] ?? '';
    const b64 = (f: string) => readFileSync(join(dir, f)).toString('base64');
    user['client-certificate-data'] = b64('cert.pem');
    user['client-key-data'] = b64('key.pem');
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, JSON.stringify(kc, null, 2), { mode: 0o600 });
    assert.ok(readFileSync(kubeconfig, 'utf8').includes('client-key-data'), 'the kubeconfig carries a client key');
    proxy = new ProxyProcess(
      env.cluster,
      env.cluster.node('node1'),
      'iptables',
      kubeconfig,
      ['-v', '9'],
      ['--metrics-bind-address', '--healthz-bind-address', '-v'],
    );
    await proxy.start();
  });

  after(async () => {
    await proxy?.dispose();
    await env?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the metrics server listens on 127.0.0.1 only; /healthz on every address', async () => {
    const ss = await nsRun(env.cluster.node('node1').ns, ['ss', '-Hltn']);
    const listening = ss.stdout
      .split('\n')
      .map((l) => l.trim().split(/\s+/)[3] ?? '')
      .filter((a) => a.endsWith(':10249') || a.endsWith(':10256'));
    assert.deepEqual(listening.sort(), ['0.0.0.0:10256', '127.0.0.1:10249'].sort(), ss.stdout);
    const inside = await env.cluster.agent('node1');
    for (const path of ['/metrics', '/statusz', '/flagz']) {
      const r = await inside.http(`http://127.0.0.1:10249${path}`, 3000);
      assert.equal(r.status, 200, `${path} inside the node: ${JSON.stringify(r).slice(0, 200)}`);
    }
    const outside = await (
      await env.cluster.agent('ext')
    ).http(`http://${env.cluster.node('node1').ip}:10249/metrics`, 3000);
    assert.notEqual(outside.status, 200, 'metrics from outside the node');
    const health = await (
      await env.cluster.agent('ext')
    ).http(`http://${env.cluster.node('node1').ip}:10256/healthz`, 3000);
    assert.equal(health.status, 200);
  });

  it('no bearer token, client key or certificate in any log line at -v 9, through API errors', async () => {
    assert.ok(token.length > 8 && keyBody.length > 0 && certBody.length > 0, 'the secrets to look for');
    // Error paths: refused requests (401, 500) and watches ended, so requests are retried and logged.
    // The faults stay armed until this proxy has logged them: the cluster's own proxies share the API
    // server, and a counted fault could be used up by them alone.
    await env.cp.injectFault({ kind: 'status', code: 401 });
    await env.cp.closeWatches();
    await env.waitFor(
      'the 401s in the log',
      async () => (/\b401\b|Unauthorized/.test(proxy!.log()) ? true : undefined),
      30_000,
    );
    await env.cp.clearFaults();
    await env.cp.injectFault({ kind: 'status', code: 500 });
    await env.cp.closeWatches();
    await env.waitFor('the 500s in the log', async () => (/\b500\b/.test(proxy!.log()) ? true : undefined), 30_000);
    // Retries under the armed fault keep adding error and backoff lines.
    await env.waitFor(
      'a -v 9 log of more than 50 lines',
      async () => (proxy!.log().split('\n').length > 50 ? true : undefined),
      30_000,
    );
    await env.cp.clearFaults();
    const log = proxy!.log();
    assert.ok(log.split('\n').length > 50, 'a -v 9 log to search');
    assert.ok(!log.includes(token), 'the bearer token is in the log');
    for (const l of [...keyBody, ...certBody])
      assert.ok(!log.includes(l), `key or certificate material in the log: ${l}`);
    assert.ok(!/client-key-data|BEGIN [A-Z ]*PRIVATE KEY/.test(log), 'key fields in the log');
  });
});

describe('the route_localnet guard (CVE-2020-8558)', { concurrency: false }, () => {
  for (const mode of E2E_MODES.filter((m) => m === 'iptables' || m === 'nftables')) {
    describe(mode, { concurrency: false }, () => {
      let env: E2EEnv;
      let local: NsProcess | undefined;
      before(async () => {
        env = await E2EEnv.start(mode);
        const node = env.cluster.node('node1');
        // A UDP service on the node's loopback only; it prints what reaches it (one way is enough to prove reach).
        local = nsSpawn(node.ns, ['python3', '-u', '-c', UDP_SINK]);
        // The pod routes 127.0.0.1 to its node, as an attacker's pod can in its own netns.
        const pod = env.cluster.pod('node1-a');
        await nsRun(pod.ns, ['ip', 'route', 'del', 'local', '127.0.0.0/8', 'dev', 'lo', 'table', 'local']);
        await nsRun(pod.ns, ['ip', 'route', 'del', 'local', '127.0.0.1', 'dev', 'lo', 'table', 'local']);
        await nsRun(pod.ns, ['sysctl', '-qw', 'net.ipv4.conf.all.route_localnet=1']);
        await nsRun(pod.ns, ['ip', 'route', 'add', '127.0.0.1/32', 'via', node.podGateway, 'dev', 'eth0']);
        await env.waitFor('the loopback sink', async () => (local!.log().includes('ready') ? true : undefined));
      });
      after(async () => {
        await local?.stop();
        await env?.dispose();
      });

      /** Datagrams from the pod that reached the node's loopback sink. */
      async function sendAndCount(): Promise<number> {
        const before = local!.log().split('got').length;
        await nsRun(env.cluster.pod('node1-a').ns, ['python3', '-c', UDP_SEND]);
        await new Promise((r) => setTimeout(r, 700));
        return local!.log().split('got').length - before;
      }

      it('a pod cannot reach a service on the node 127.0.0.1', async () => {
        const node = env.cluster.node('node1');
        const sysctl = await nsRun(node.ns, ['sysctl', '-n', 'net.ipv4.conf.all.route_localnet']);
        assert.equal(await sendAndCount(), 0, "the pod reached the node's loopback service");
        if (mode === 'nftables') {
          assert.equal(sysctl.stdout.trim(), '0', 'nftables mode leaves route_localnet alone');
          return;
        }
        assert.equal(sysctl.stdout.trim(), '1', 'iptables mode sets route_localnet (localhost NodePorts)');
        // Without the guard the same datagrams get through: the check above could fail.
        const rules = await nsRun(node.ns, ['iptables', '-S', 'KUBE-FIREWALL']);
        assert.match(rules.stdout, /127\.0\.0\.0\/8.*DROP/, rules.stdout);
        // The proxy repairs a flushed chain of its own within a second (drift repair), so it is
        // paused while the guard is gone, and resumed to put the guard back.
        const pid = env.proxy('node1').pid;
        process.kill(pid, 'SIGSTOP');
        try {
          await nsRun(node.ns, ['iptables', '-F', 'KUBE-FIREWALL']);
          assert.ok((await sendAndCount()) > 0, 'without the guard the datagrams reach the loopback service');
        } finally {
          process.kill(pid, 'SIGCONT');
        }
        // ...and the repair restores it: the pod is shut out again.
        await env.waitFor('the guard repaired', async () => {
          const again = await nsRun(node.ns, ['iptables', '-S', 'KUBE-FIREWALL']);
          return /127\.0\.0\.0\/8.*DROP/.test(again.stdout) ? true : undefined;
        });
        assert.equal(await sendAndCount(), 0, 'the repaired guard stops the pod again');
      });
    });
  }
});

const UDP_SINK = [
  'import socket',
  's = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)',
  "s.bind(('127.0.0.1', 9099))",
  "print('ready', flush=True)",
  'while True:',
  '    d, a = s.recvfrom(100)',
  "    print('got', a, flush=True)",
].join('\n');
const UDP_SEND = [
  'import socket',
  's = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)',
  "for _ in range(3): s.sendto(b'x', ('127.0.0.1', 9099))",
].join('\n');
