import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { once } from 'node:events';
import { ServiceHealthServer } from './servicehealth.js';

/** A port that was free a moment ago (the kernel picks it). */
async function freePort(): Promise<number> {
  const s = createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const { port } = s.address() as { port: number };
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

test('service health checks over real HTTP on 127.0.0.1: open, count, health, port change, close', async (t) => {
  let healthy = true;
  const failures: Array<[string, number]> = [];
  const hs = new ServiceHealthServer({
    listenAddresses: ['127.0.0.1'],
    isProxyHealthy: () => healthy,
    onListenFailed: (k, p) => failures.push([k, p]),
  });
  t.after(() => hs.close());
  const p1 = await freePort();
  await hs.syncServices(new Map([['ns/web', p1]]));
  assert.deepEqual(hs.open(), new Map([['ns/web', p1]]));

  let r = await fetch(`http://127.0.0.1:${p1}/any/path`);
  assert.equal(r.status, 503, 'no local endpoints yet');
  assert.equal(r.headers.get('x-load-balancing-endpoint-weight'), '0');
  await r.text();

  hs.syncEndpoints(new Map([['ns/web', 2]]));
  r = await fetch(`http://127.0.0.1:${p1}/`);
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('content-type'), 'application/json');
  assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(r.headers.get('x-load-balancing-endpoint-weight'), '2');
  assert.deepEqual(await r.json(), {
    service: { namespace: 'ns', name: 'web' },
    localEndpoints: 2,
    serviceProxyHealthy: true,
  });

  healthy = false;
  r = await fetch(`http://127.0.0.1:${p1}/`);
  assert.equal(r.status, 503, 'proxy unhealthy');
  assert.equal(((await r.json()) as { serviceProxyHealthy: boolean }).serviceProxyHealthy, false);
  healthy = true;

  const p2 = await freePort();
  await hs.syncServices(new Map([['ns/web', p2]]));
  await assert.rejects(fetch(`http://127.0.0.1:${p1}/`), 'old port closed');
  r = await fetch(`http://127.0.0.1:${p2}/`);
  assert.equal(r.status, 200, 'a re-opened service starts from the last endpoint sync');
  await r.text();

  await hs.syncServices(new Map());
  assert.equal(hs.open().size, 0);
  await assert.rejects(fetch(`http://127.0.0.1:${p2}/`));
  assert.deepEqual(failures, []);
});

test('a port clash is logged/counted, not fatal, and retried on the next sync', async (t) => {
  const blocker = createServer().listen(0, '127.0.0.1');
  await once(blocker, 'listening');
  const busy = (blocker.address() as { port: number }).port;
  const failures: Array<[string, number, string]> = [];
  const hs = new ServiceHealthServer({
    listenAddresses: ['127.0.0.1'],
    isProxyHealthy: () => true,
    onListenFailed: (k, p, e) => failures.push([k, p, (e as NodeJS.ErrnoException).code ?? '']),
  });
  t.after(() => hs.close());
  const ok = await freePort();
  await hs.syncServices(
    new Map([
      ['ns/clash', busy],
      ['ns/fine', ok],
    ]),
  );
  assert.deepEqual(failures, [['ns/clash', busy, 'EADDRINUSE']]);
  assert.deepEqual(hs.open(), new Map([['ns/fine', ok]]), 'the other service still serves');
  hs.syncEndpoints(
    new Map([
      ['ns/clash', 1],
      ['ns/fine', 1],
    ]),
  );

  await new Promise<void>((r) => blocker.close(() => r()));
  await hs.syncServices(
    new Map([
      ['ns/clash', busy],
      ['ns/fine', ok],
    ]),
  );
  assert.equal(hs.open().get('ns/clash'), busy, 'retried and opened');
  const r = await fetch(`http://127.0.0.1:${busy}/`);
  assert.equal(r.status, 200, 'took the count from the last endpoint sync');
  await r.text();
});

// ---- dual-stack on the real kernel, inside a namespace we own ---------------

const CHILD = `
import { ServiceHealthServer } from ${JSON.stringify(new URL('./servicehealth.js', import.meta.url).href)};
import { healthCheckListenAddresses } from ${JSON.stringify(new URL('../engine/servicehealth.js', import.meta.url).href)};
import { execFileSync } from 'node:child_process';
const [cidrs4, cidrs6] = JSON.parse(process.argv[1]);
const localIPs4 = ['127.0.0.1', '10.99.0.1'];
const localIPs6 = ['::1', 'fd00:99::1'];
const failures = [];
const hs = new ServiceHealthServer({
  listenAddresses: healthCheckListenAddresses([
    { family: 'IPv4', nodePortAddresses: cidrs4, localIPs: localIPs4 },
    { family: 'IPv6', nodePortAddresses: cidrs6, localIPs: localIPs6 },
  ]),
  isProxyHealthy: () => true,
  onListenFailed: (k, p, e) => failures.push(e.message),
});
await hs.syncServices(new Map([['ns/web', 31001]]));
hs.syncEndpoints(new Map([['ns/web', 3]]));
const answers = {};
for (const host of ['127.0.0.1', '10.99.0.1', '[::1]', '[fd00:99::1]']) {
  try {
    const r = await fetch('http://' + host + ':31001/');
    answers[host] = r.status + ' ' + (await r.json()).localEndpoints;
  } catch (e) { answers[host] = 'refused'; }
}
const sockets = execFileSync('ss', ['-ltnH', 'sport = :31001'], { encoding: 'utf8' })
  .split('\\n').map((l) => l.trim().split(/\\s+/)[3]).filter(Boolean).sort();
await hs.close();
console.log(JSON.stringify({ failures, answers, sockets }));
`;

test('real kernel (root): dual-stack health checks, one socket per family, both families answer', async (t) => {
  const { execFileSync } = await import('node:child_process');
  const { newPrefix } = await import('../../test/netns/names.js');
  const { deleteNamespaceSync, trackNamespace, untrackNamespace } = await import('../../test/netns/cleanup.js');
  const ns = `${newPrefix()}svchealth`;
  trackNamespace(ns);
  t.after(() => {
    deleteNamespaceSync(ns);
    untrackNamespace(ns);
  });
  const ip = (...a: string[]) => execFileSync('ip', ['-n', ns, ...a]);
  execFileSync('ip', ['netns', 'add', ns]);
  ip('link', 'set', 'lo', 'up');
  ip('link', 'add', 'd0', 'type', 'veth', 'peer', 'name', 'd1');
  ip('link', 'set', 'd0', 'up');
  ip('link', 'set', 'd1', 'up');
  ip('addr', 'add', '10.99.0.1/24', 'dev', 'd0');
  ip('addr', 'add', 'fd00:99::1/64', 'dev', 'd0', 'nodad');
  const child = (cidrs: [string[] | null, string[] | null]) =>
    JSON.parse(
      execFileSync(
        'ip',
        ['netns', 'exec', ns, process.execPath, '--input-type=module', '-e', CHILD, JSON.stringify(cidrs)],
        { encoding: 'utf8', timeout: 20_000 },
      ),
    ) as { failures: string[]; answers: Record<string, string>; sockets: string[] };

  // nodePortAddresses unset: each family's wildcard, two sockets, every address of both families answers.
  const all = child([null, null]);
  assert.deepEqual(all.failures, []);
  assert.deepEqual(all.sockets, ['0.0.0.0:31001', '[::]:31001']);
  assert.deepEqual(all.answers, {
    '127.0.0.1': '200 3',
    '10.99.0.1': '200 3',
    '[::1]': '200 3',
    '[fd00:99::1]': '200 3',
  });

  // Per-family nodePortAddresses: each family binds its own selection (the IPv6 one is not lost).
  const sel = child([['10.99.0.0/24'], ['fd00:99::/64']]);
  assert.deepEqual(sel.failures, []);
  assert.deepEqual(sel.sockets, ['10.99.0.1:31001', '[fd00:99::1]:31001']);
  assert.deepEqual(sel.answers, {
    '127.0.0.1': 'refused',
    '10.99.0.1': '200 3',
    '[::1]': 'refused',
    '[fd00:99::1]': '200 3',
  });
});
