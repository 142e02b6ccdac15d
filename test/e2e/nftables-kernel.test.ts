// NftablesDataplane against a real kernel, inside one throw-away network
// namespace (kpt-nft-<pid>-k). Never touches the root namespace. Checks:
// full sync state equals the Fake's; partial syncs write only the changed
// service; stale chains are deleted >= 1 s later; a failed transaction is
// followed by a repairing full sync; foreign tables are untouched; cleanup
// removes only our tables; and a real TCP connection to a ClusterIP is DNATed
// to a listener on the endpoint address.
import { ENDPOINT_LAYOUTS } from '../../src/dataplane/nftables/static.js';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { syncStateFromObjects } from '../../src/core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../../src/core/types.js';
import { Fake } from '../../src/dataplane/nftables/fake.js';
import { NftablesPlanner } from '../../src/platform/nftables/planner.js';
import { NftablesDataplane, cleanupNftablesLeftovers, nftRunner } from '../../src/platform/nftables/dataplane.js';
import { parseTableJSON } from '../../src/platform/nftables/readback.js';
import { FakeClock } from '../support/fakeclock.js';
import { endpoint, makeNode, makeService, makeSlice, slicePort, svcPort, withClusterIP } from '../support/fixtures.js';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../netns/cleanup.js';

const NS = `kpt-nft-${process.pid}-k`;
const NODE = '192.168.0.10';
const sh = (...args: string[]) => execFileSync('ip', ['netns', 'exec', NS, ...args], { encoding: 'utf8' });
const nft = (...args: string[]) => sh('nft', ...args);

/** Inside the netns: listen on LISTEN:8080, connect to the ClusterIP 10.96.100.10:80, print the greeting. */
const DNAT_CLIENT = `
  const net = require('node:net');
  const srv = net.createServer((s) => { s.end('hello from ' + s.localAddress + ':' + s.localPort + '\\n'); });
  srv.listen(8080, 'LISTEN', () => {
    const c = net.connect({ host: '10.96.100.10', port: 80 });
    let buf = ''; c.on('data', (d) => buf += d);
    c.on('end', () => { console.log(buf.trim()); srv.close(); });
    c.on('error', (e) => { console.log('ERR ' + e.code); process.exit(1); });
    setTimeout(() => { console.log('TIMEOUT'); process.exit(1); }, 5000).unref();
  });`;

const CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'none' },
  nodePortAddresses: [`${NODE}/32`],
  localhostNodePorts: false,
  localIPs: ['127.0.0.1', NODE],
};

before(
  () => {
    trackNamespace(NS);
    execFileSync('ip', ['netns', 'add', NS]);
    sh('ip', 'link', 'set', 'lo', 'up');
    sh('ip', 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth0p');
    sh('ip', 'link', 'set', 'eth0p', 'up');
    sh('ip', 'addr', 'add', `${NODE}/24`, 'dev', 'eth0');
    sh('ip', 'addr', 'add', '10.244.1.5/32', 'dev', 'eth0');
    sh('ip', 'link', 'set', 'eth0', 'up');
    sh('ip', 'route', 'add', '10.96.0.0/12', 'dev', 'eth0');
  },
  { timeout: 20_000 },
);
after(() => {
  deleteNamespaceSync(NS);
  untrackNamespace(NS);
});

function foreignSetup(): void {
  execFileSync('ip', ['netns', 'exec', NS, 'nft', '-f', '-'], {
    input:
      'add table ip foreign\nadd chain ip foreign c { type filter hook input priority 5 ; }\nadd rule ip foreign c tcp dport 9999 counter accept\nadd table inet kube-proxy\nadd chain inet kube-proxy keep\n',
  });
}

const svc = (name: string, ip: string, eps: string[]) => ({
  svc: withClusterIP(
    makeService('ns', name, (s) => {
      s.spec.ports = [svcPort('p80', 80, 'TCP', { targetPort: 8080 })];
    }),
    ip,
  ),
  slice: makeSlice('ns', name, 1, (s) => {
    s.endpoints = eps.map((e) => endpoint(e, { nodeName: e === '10.244.1.5' ? 'node-a' : 'node-b' }));
    s.ports = [slicePort('p80', 8080)];
  }),
});
function state(list: Array<ReturnType<typeof svc>>, changed: string[] | null): SyncState {
  return syncStateFromObjects({
    services: list.map((x) => x.svc),
    slices: list.map((x) => x.slice),
    family: 'IPv4',
    nodeName: 'node-a',
    node: makeNode('node-a', { internalIPs: [NODE] }),
    serviceCIDRs: ['10.96.0.0/12'],
    fullSync: changed === null,
    ...(changed ? { changedServices: changed } : {}),
  });
}

/** Kernel table vs Fake: same chains, sets, managed elements and rule counts per chain. */
function assertKernelMatches(fake: Fake, family: 'ip' | 'ip6' = 'ip'): void {
  const json = nft('-j', 'list', 'table', family, 'kube-proxy');
  const k = parseTableJSON(json, 'kube-proxy');
  const f = fake.snapshot();
  assert.deepEqual([...k.chains].sort(), [...f.chains].sort());
  assert.deepEqual([...k.sets].sort(), [...f.sets].sort());
  const norm = (els: ReadonlyMap<string, readonly { key: readonly string[]; value?: readonly string[] }[]>) =>
    [...els]
      .filter(([n]) => k.elements.has(n))
      .map(
        ([n, es]) =>
          `${n}: ${es
            .map((e) => `${e.key.join(' . ')}${e.value ? ' : ' + e.value.join(' ') : ''}`)
            .sort()
            .join(' | ')}`,
      )
      .sort();
  assert.deepEqual(norm(k.elements), norm(f.elements));
  const rules = new Map<string, number>();
  for (const item of (JSON.parse(json) as { nftables: Array<{ rule?: { chain: string } }> }).nftables) {
    if (item.rule) rules.set(item.rule.chain, (rules.get(item.rule.chain) ?? 0) + 1);
  }
  for (const [name, c] of fake.chains) assert.equal(rules.get(name) ?? 0, c.rules.length, `rules in ${name}`);
}

test('upstream layout loads on the kernel as the Fake holds it', { timeout: 30_000 }, async () => {
  const vias: string[] = [];
  const applied: Array<[number, boolean, string]> = [];
  const dp = new NftablesDataplane({
    config: CONFIG,
    netns: NS,
    layout: 'upstream',
    onTransaction: (_f, _s, _p, via) => vias.push(via),
    onApplied: (_f, ops, partial, via) => applied.push([ops, partial, via]),
  });
  const st = state(
    [svc('web', '10.96.100.10', ['10.244.1.5']), svc('api', '10.96.100.20', ['10.244.2.7', '10.244.2.8'])],
    null,
  );
  const st2 = state(
    [svc('web', '10.96.100.10', ['10.244.1.5']), svc('api', '10.96.100.20', ['10.244.2.7'])],
    ['ns/api'],
  );
  await dp.sync(st);
  assert.equal((await dp.sync(st2)).partial, true);
  const fake = new Fake('ip');
  const r = new NftablesPlanner(CONFIG, 'upstream');
  fake.run(r.plan(st, 0).tx);
  fake.run(r.plan(st2, 0).tx);
  assertKernelMatches(fake);
  assert.deepEqual(vias, ['netlink', 'netlink']);
  // After the kernel took each batch: the cold sync's operations, then the partial one's fewer.
  assert.deepEqual(
    applied.map(([, partial, via]) => [partial, via]),
    [
      [false, 'netlink'],
      [true, 'netlink'],
    ],
  );
  assert.ok(applied[0]![0] > applied[1]![0] && applied[1]![0] > 0, JSON.stringify(applied));
  await dp.cleanup();
  dp.close();
});

test(
  'IPv6: every layout loads as the Fake holds it, cold and partial syncs through netlink',
  { timeout: 30_000 },
  async () => {
    const cfg6: DataplaneConfig = {
      ...CONFIG,
      family: 'IPv6',
      nodePortAddresses: ['fd00:192::10/128'],
      localIPs: ['::1', 'fd00:192::10'],
      localDetector: { kind: 'cidr', cidrs: ['fd00:244::/64'] },
    };
    const v6 = (name: string, ip: string, eps: string[]) => ({
      svc: withClusterIP(
        makeService('ns', name, (s) => {
          s.spec.type = 'NodePort';
          s.spec.ports = [svcPort('p80', 80, 'TCP', { targetPort: 8080, nodePort: 30080 })];
        }),
        ip,
      ),
      slice: makeSlice('ns', name, 1, (s) => {
        s.addressType = 'IPv6';
        s.endpoints = eps.map((e, i) => endpoint(e, { nodeName: i === 0 ? 'node-a' : 'node-b' }));
        s.ports = [slicePort('p80', 8080)];
      }),
    });
    const st6 = (eps: string[], changed: string[] | null) =>
      syncStateFromObjects({
        services: [v6('web6', 'fd00:96::10', eps).svc],
        slices: [v6('web6', 'fd00:96::10', eps).slice],
        family: 'IPv6',
        nodeName: 'node-a',
        nodeIPs: { IPv6: 'fd00:192::10' },
        serviceCIDRs: ['fd00:96::/108'],
        fullSync: changed === null,
        ...(changed ? { changedServices: changed } : {}),
      });
    for (const layout of ENDPOINT_LAYOUTS) {
      const vias: string[] = [];
      const dp = new NftablesDataplane({
        config: cfg6,
        netns: NS,
        layout,
        onTransaction: (_f, _s, _p, via) => vias.push(via),
      });
      const fake = new Fake('ip6');
      const r = new NftablesPlanner(cfg6, layout);
      for (const st of [st6(['fd00:244::5', 'fd00:244::7'], null), st6(['fd00:244::5'], ['ns/web6'])]) {
        await dp.sync(st);
        fake.run(r.plan(st, 0).tx);
      }
      assertKernelMatches(fake, 'ip6');
      assert.deepEqual(vias, ['netlink', 'netlink']);
      await dp.cleanup();
      dp.close();
    }
  },
);

test('nftables dataplane on a real kernel', { timeout: 60_000 }, async (t) => {
  foreignSetup();
  const foreignBefore = nft('list', 'table', 'ip', 'foreign');
  const clock = new FakeClock(1_000_000);
  const scripts: string[] = [];
  const vias: string[] = [];
  const dp = new NftablesDataplane({
    config: CONFIG,
    netns: NS,
    clock,
    onTransaction: (_f, s, _p, via) => {
      scripts.push(s);
      vias.push(via);
    },
  });
  t.after(() => dp.close());
  const fake = new Fake('ip');
  const mirror = new NftablesPlanner(CONFIG, 'lean');
  const apply = async (st: SyncState) => {
    const out = await dp.sync(st);
    const m = mirror.plan(st, clock.now(), mirror.needsFullSync(st) ? fake.snapshot() : null);
    fake.run(m.tx);
    return out;
  };
  const web = svc('web', '10.96.100.10', ['10.244.1.5']);
  const api = svc('api', '10.96.100.20', ['10.244.2.7', '10.244.2.8']);

  await t.test('full sync loads the table as the Fake holds it', async () => {
    const out = await apply(state([web, api], null));
    assert.equal(out.partial, false);
    assertKernelMatches(fake);
    assert.match(
      nft('list', 'chain', 'ip', 'kube-proxy', 'services'),
      /ip daddr \. meta l4proto \. th dport vmap @service-ips/,
    );
  });

  await t.test('a real TCP connection to the ClusterIP reaches the endpoint listener', () => {
    assert.equal(sh('node', '-e', DNAT_CLIENT.replace('LISTEN', '10.244.1.5')).trim(), 'hello from 10.244.1.5:8080');
  });

  await t.test('a partial sync writes only the changed service, through netlink', async () => {
    scripts.length = 0;
    vias.length = 0;
    const api2 = svc('api', '10.96.100.20', ['10.244.2.7']);
    const out = await apply(state([web, api2], ['ns/api']));
    assert.equal(out.partial, true);
    assert.deepEqual(vias, ['netlink']);
    const lines = scripts[0]!.trim().split('\n');
    assert.ok(lines.length > 0 && lines.every((l) => l.includes('ns/api')), scripts[0]);
    assertKernelMatches(fake);
  });

  await t.test(
    'netlink-written rules read back exactly as nft -f would write them, and carry real traffic',
    async () => {
      sh('ip', 'addr', 'add', '10.244.1.6/32', 'dev', 'eth0');
      const web2 = svc('web', '10.96.100.10', ['10.244.1.6']);
      vias.length = 0;
      await apply(state([web2, svc('api', '10.96.100.20', ['10.244.2.7'])], ['ns/web']));
      assert.deepEqual(vias, ['netlink']);
      const chain = [...fake.chains.keys()].find((c) => c.startsWith('service-') && c.includes('ns/web'))!;
      const listed = nft('list', 'chain', 'ip', 'kube-proxy', chain)
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l.includes('dnat'));
      assert.deepEqual(
        listed,
        fake.chains.get(chain)!.rules.map((r) => r.rule),
      );
      assert.equal(sh('node', '-e', DNAT_CLIENT.replace('LISTEN', '10.244.1.6')).trim(), 'hello from 10.244.1.6:8080');
      await apply(state([web, svc('api', '10.96.100.20', ['10.244.2.7'])], ['ns/web']));
      assertKernelMatches(fake);
    },
  );

  await t.test('a deleted service chain is flushed now and deleted >= 1 s later', async () => {
    await apply(state([web], ['ns/api']));
    const chain = 'service-' + [...fake.chains.keys()].find((c) => c.includes('ns/api'))!.split('service-')[1];
    assert.match(nft('list', 'chains', 'ip'), new RegExp(chain.replaceAll('/', '\\/')));
    assert.equal(dp.pendingStaleChains(), 1);
    clock.advance(500);
    await apply(state([web], []));
    assert.equal(dp.pendingStaleChains(), 1);
    clock.advance(600);
    await apply(state([web], []));
    assert.equal(dp.pendingStaleChains(), 0);
    assert.doesNotMatch(nft('list', 'chains', 'ip'), /ns\/api/);
    assertKernelMatches(fake);
  });

  await t.test('after a failed transaction the next sync is full and repairs the table', async () => {
    nft('delete', 'element', 'ip', 'kube-proxy', 'service-ips', '{ 10.96.100.10 . tcp . 80 }');
    // Removing web's endpoints deletes that element again, which the kernel refuses.
    await assert.rejects(
      apply(state([svc('web', '10.96.100.10', [])], ['ns/web'])),
      (e: unknown) => (e as { code?: string }).code === 'KPT_SYNC_FAILED',
    );
    scripts.length = 0;
    const out = await dp.sync(state([web], []));
    assert.equal(out.partial, false);
    const fresh = new Fake('ip');
    fresh.run(new NftablesPlanner(CONFIG, 'lean').plan(state([web], null), clock.now()).tx);
    assertKernelMatches(fresh);
  });

  await t.test('foreign tables are untouched and cleanup removes only ours', async () => {
    assert.equal(nft('list', 'table', 'ip', 'foreign'), foreignBefore);
    await dp.cleanup();
    await cleanupNftablesLeftovers(nftRunner(NS));
    const tables = nft('list', 'tables');
    assert.doesNotMatch(tables, /table ip kube-proxy/);
    assert.match(tables, /table ip foreign/);
    assert.match(tables, /table inet kube-proxy/);
    assert.equal(nft('list', 'table', 'ip', 'foreign'), foreignBefore);
  });
});

/** Elements of the 'maps' layout's endpoint maps in the kernel, as "map: lo-hi : ip . port | ...". */
function kernelEndpointMaps(): string[] {
  const doc = JSON.parse(nft('-j', 'list', 'maps', 'ip')) as {
    nftables: Array<{
      map?: { name: string; table: string; elem?: Array<[{ range: [number, number] }, { concat: [string, number] }]> };
    }>;
  };
  return doc.nftables
    .flatMap((i) => (i.map && i.map.table === 'kube-proxy' && i.map.name.startsWith('endpoints-') ? [i.map] : []))
    .map(
      (m) =>
        `${m.name}: ${(m.elem ?? [])
          .map(([k, v]) => `${k.range[0]}-${k.range[1]} : ${v.concat[0]} . ${v.concat[1]}`)
          .sort()
          .join(' | ')}`,
    )
    .sort();
}
function fakeEndpointMaps(fake: Fake): string[] {
  return [...fake.sets]
    .filter(([n]) => n.startsWith('endpoints-'))
    .map(
      ([n, s]) =>
        `${n}: ${[...s.elements.values()]
          .map((e) => `${e.key[0]} : ${e.value!.join(' . ')}`)
          .sort()
          .join(' | ')}`,
    )
    .sort();
}

test(
  'maps layout: endpoint changes, new and deleted services go through netlink, element-only for endpoints; real traffic follows',
  { timeout: 60_000 },
  async (t) => {
    const clock = new FakeClock(5_000_000);
    const scripts: string[] = [];
    const vias: string[] = [];
    const dp = new NftablesDataplane({
      config: CONFIG,
      netns: NS,
      clock,
      layout: 'maps',
      onTransaction: (_f, s, _p, via) => {
        scripts.push(s);
        vias.push(via);
      },
    });
    t.after(() => dp.close());
    const fake = new Fake('ip');
    const mirror = new NftablesPlanner(CONFIG, 'maps');
    const apply = async (st: SyncState) => {
      const out = await dp.sync(st);
      fake.run(mirror.plan(st, clock.now(), mirror.needsFullSync(st) ? fake.snapshot() : null).tx);
      return out;
    };
    const matches = () => {
      assertKernelMatches(fake);
      assert.deepEqual(kernelEndpointMaps(), fakeEndpointMaps(fake));
    };
    if (!sh('ip', 'addr', 'show', 'dev', 'eth0').includes('10.244.1.6/32'))
      sh('ip', 'addr', 'add', '10.244.1.6/32', 'dev', 'eth0');
    const api = svc('api', '10.96.100.20', ['10.244.2.7', '10.244.2.8', '10.244.2.9']);

    await t.test('full sync: one fixed dnat rule per policy chain, intervals partition 0..720719', async () => {
      await apply(state([svc('web', '10.96.100.10', ['10.244.1.5']), api], null));
      matches();
      const apiMap = kernelEndpointMaps().find((m) => m.includes('ns/api'))!;
      assert.match(
        apiMap,
        /0-240239 : 10\.244\.2\.7 \. 8080 \| 240240-480479 : 10\.244\.2\.8 \. 8080 \| 480480-720719 : 10\.244\.2\.9 \. 8080$/,
      );
      assert.equal(sh('node', '-e', DNAT_CLIENT.replace('LISTEN', '10.244.1.5')).trim(), 'hello from 10.244.1.5:8080');
    });

    await t.test(
      'an endpoint change is a map flush + elements through netlink, and traffic goes to the new endpoint',
      async () => {
        scripts.length = 0;
        vias.length = 0;
        await apply(state([svc('web', '10.96.100.10', ['10.244.1.6']), api], ['ns/web']));
        assert.deepEqual(vias, ['netlink']);
        const lines = scripts[0]!.trim().split('\n');
        // Elements only: the endpoint map, and the hairpin set for the local endpoint that left.
        assert.ok(
          lines.every((l) =>
            /^(flush map ip kube-proxy endpoints-service-|(add|delete) element ip kube-proxy (endpoints-service-|hairpin-connections ))/.test(
              l,
            ),
          ),
          JSON.stringify(scripts[0]),
        );
        assert.ok(lines.some((l) => l.startsWith('flush map')));
        matches();
        assert.equal(
          sh('node', '-e', DNAT_CLIENT.replace('LISTEN', '10.244.1.6')).trim(),
          'hello from 10.244.1.6:8080',
        );
      },
    );

    await t.test(
      'a new service (map, chain, rule, elements) and a deleted one (chain flushed, map deleted) go through netlink',
      async () => {
        vias.length = 0;
        const web = svc('web', '10.96.100.10', ['10.244.1.6']);
        await apply(state([web, api, svc('db', '10.96.100.30', ['10.244.3.1', '10.244.3.2'])], ['ns/db']));
        await apply(state([web, svc('db', '10.96.100.30', ['10.244.3.1', '10.244.3.2'])], ['ns/api']));
        assert.deepEqual(vias, ['netlink', 'netlink']);
        matches();
        assert.ok(!kernelEndpointMaps().some((m) => m.includes('ns/api')));
        const db = [...fake.chains.keys()].find((c) => c.startsWith('service-') && c.includes('ns/db'))!;
        assert.match(
          nft('list', 'chain', 'ip', 'kube-proxy', db),
          /meta l4proto tcp dnat ip to numgen random mod 720720 map @endpoints-service-/,
        );
      },
    );

    await t.test('a second full sync rewrites the maps in place and matches again', async () => {
      await apply(state([svc('web', '10.96.100.10', ['10.244.1.6']), svc('db', '10.96.100.30', ['10.244.3.1'])], null));
      matches();
      await dp.cleanup();
    });
  },
);

test('a Service whose port name is over 128 bytes loads, its element comment cut to 128 (PR #139516)', async (t) => {
  const dp = new NftablesDataplane({ config: CONFIG, netns: NS, clock: new FakeClock(9_000_000) });
  t.after(() => dp.close());
  const ns = 'loft-acme-platform-services-team-dev-v-shared-workloads-ns-001';
  const name = 'my-api-svc-x-my-api-namespace-x-acme-shared-vcluster--a1b2c3d4e';
  const long = withClusterIP(
    makeService(ns, name, (s) => {
      s.spec.ports = [svcPort('http', 80)];
    }),
    '10.96.100.77',
  );
  // No endpoints, so its no-endpoint-services element carries "<ns>/<name>:http" (131 bytes) as comment.
  // Over netlink the kernel would take all 131 (it allows 256 bytes of user data), but nft refuses
  // comments over 128 and upstream cuts them, so what the table holds matches upstream's.
  const st = syncStateFromObjects({
    services: [long],
    slices: [],
    family: 'IPv4',
    nodeName: 'node-a',
    node: makeNode('node-a', { internalIPs: [NODE] }),
    serviceCIDRs: ['10.96.0.0/12'],
    fullSync: true,
  });
  await dp.sync(st);
  const listed = JSON.parse(nft('-j', 'list', 'map', 'ip', 'kube-proxy', 'no-endpoint-services')) as {
    nftables: Array<{ map?: { elem?: unknown[] } }>;
  };
  const text = JSON.stringify(listed);
  assert.ok(text.includes(JSON.stringify(`${ns}/${name}:http`.slice(0, 128))), text);
  assert.ok(!text.includes(`${name}:http`), 'the whole name is not there');
});
