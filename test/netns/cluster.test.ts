// Tests of the namespace harness itself (no proxy involved): the plan is
// wired as documented, traffic flows pod-to-pod across nodes with source
// IPs preserved, clients see refusals and timeouts as bounded errors, and
// cleanup leaves nothing behind.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { NetnsCluster } from './cluster.js';
import { listNamespaces, sweepStaleNamespaces } from './cleanup.js';
import { newPrefix, pidOfNamespace } from './names.js';
import { ip } from './spawn.js';

describe('netns cluster harness', () => {
  let c: NetnsCluster;
  before(async () => {
    c = await NetnsCluster.create();
  });
  after(async () => {
    await c?.destroy();
  });

  it('names every namespace with the run prefix carrying our pid', () => {
    const names = c.namespaces();
    assert.equal(names.length, 1 + 1 + 1 + 2 + 4);
    for (const n of names) {
      assert.ok(n.startsWith(c.topo.prefix), n);
      assert.equal(pidOfNamespace(n), process.pid);
      assert.ok(listNamespaces().includes(n), `${n} exists`);
    }
  });

  it('carries TCP pod-to-pod across nodes and the server sees the pod source IP', async () => {
    const from = await c.agent('node1-a');
    const to = c.pod('node2-b');
    const r = await from.tcp(to.ip, 8080);
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.reply.pod, 'node2-b');
    assert.equal(r.reply.src.split(':')[0], c.pod('node1-a').ip);
  });

  it('carries UDP pod-to-pod across nodes from a fixed source port', async () => {
    const from = await c.agent('node2-a');
    const r = await from.udp(c.pod('node1-b').ip, 5353, { localPort: 40001 });
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.reply.pod, 'node1-b');
    assert.equal(r.reply.src, `${c.pod('node2-a').ip}:40001`);
  });

  it('lets the external client reach a node IP, and reports a refused port as ECONNREFUSED', async () => {
    const node2 = await c.agent('node2');
    await node2.serve([9090], []);
    const ext = await c.agent('ext');
    const ok = await ext.tcp(c.node('node2').ip, 9090);
    assert.ok(ok.ok, JSON.stringify(ok));
    assert.equal(ok.reply.src.split(':')[0], c.external.ip);
    const second = await ext.tcp(c.node('node2').ip, 9090, { bind: c.external.ip2 });
    assert.ok(second.ok && second.reply.src.startsWith(`${c.external.ip2}:`), JSON.stringify(second));
    const refused = await ext.tcp(c.node('node2').ip, 9091);
    assert.deepEqual([refused.ok, !refused.ok && refused.error], [false, 'ECONNREFUSED']);
  });

  it('blackholes unprogrammed Service IPs at the gateway: a bounded timeout, not a route error', async () => {
    // With no proxy, 10.96.0.0/16 follows the nodes' default route to a gateway that forwards nothing.
    for (const from of ['ext', 'node1-a']) {
      const r = await (await c.agent(from)).tcp('10.96.200.200', 80, { timeoutMs: 500 });
      assert.deepEqual([r.ok, !r.ok && r.error], [false, 'ETIMEDOUT'], from);
    }
  });

  it('keeps a held TCP connection usable for several exchanges', async () => {
    const a = await c.agent('node1-b');
    const opened = await a.open('k', c.pod('node2-a').ip, 8080);
    assert.ok(opened.ok, JSON.stringify(opened));
    const first = await a.send('k', 'one');
    const second = await a.send('k', 'two');
    assert.ok(first.ok && second.ok, JSON.stringify([first, second]));
    assert.deepEqual([first.reply.data, second.reply.data], ['one', 'two']);
    assert.equal(first.reply.src, second.reply.src, 'same connection, same source port');
    await a.closeConn('k');
    const gone = await a.send('k');
    assert.deepEqual([gone.ok, !gone.ok && gone.error], [false, 'ENOTCONN']);
  });
});

describe('netns cleanup', () => {
  it('destroy() removes every namespace it made', async () => {
    const c = await NetnsCluster.create({ nodeCount: 1, podsPerNode: 1 });
    const names = c.namespaces();
    assert.ok(names.every((n) => listNamespaces().includes(n)));
    await c.destroy();
    const left = listNamespaces();
    assert.deepEqual(
      names.filter((n) => left.includes(n)),
      [],
    );
  });

  it('the sweeper removes kpt- namespaces of dead pids and leaves live ones', async () => {
    // A pid that is certainly dead: a child that has already exited.
    const dead = spawnSync('true').pid!;
    const stale = `${newPrefix(dead)}stale`;
    const live = `${newPrefix()}live`;
    await ip(['netns', 'add', stale]);
    await ip(['netns', 'add', live]);
    try {
      const removed = sweepStaleNamespaces();
      assert.ok(removed.includes(stale));
      assert.ok(!listNamespaces().includes(stale));
      assert.ok(listNamespaces().includes(live));
    } finally {
      await ip(['netns', 'delete', live]);
      await ip(['netns', 'delete', stale]).catch(() => {});
    }
  });

  it('removes the namespaces when the test process is killed by SIGTERM', async () => {
    const script = `
      import { NetnsCluster } from ${JSON.stringify(new URL('./cluster.js', import.meta.url).href.replace(/\.js$/, import.meta.url.endsWith('.ts') ? '.ts' : '.js'))};
      const c = await NetnsCluster.create({ nodeCount: 1, podsPerNode: 1 });
      console.log(JSON.stringify(c.namespaces()));
      setInterval(() => {}, 1000);
    `;
    const { spawn } = await import('node:child_process');
    const args = import.meta.url.endsWith('.ts') ? ['--import', import.meta.resolve('tsx')] : [];
    const child = spawn(process.execPath, [...args, '--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const names = await new Promise<string[]>((res, rej) => {
      let out = '';
      child.stdout.on('data', (b: Buffer) => {
        out += b.toString();
        const line = out.split('\n').find((l) => l.startsWith('['));
        if (line) res(JSON.parse(line) as string[]);
      });
      child.once('exit', (code) => rej(new Error(`child exited ${code} before building`)));
    });
    assert.ok(names.length > 0 && names.every((n) => listNamespaces().includes(n)));
    child.kill('SIGTERM');
    await new Promise((res) => child.once('exit', res));
    const left = listNamespaces();
    assert.deepEqual(
      names.filter((n) => left.includes(n)),
      [],
    );
  });
});
