// nftables mode repairs its table when another actor changes it, on the real
// kernel (src/platform/nftables/monitor.ts):
//   1. In a throw-away namespace, against the NftablesDataplane: its own syncs
//      (cold, partial, stale deletes, full) are never reported; changes to
//      other tables, and to `inet kube-proxy`, are not either; `nft delete
//      table ip kube-proxy` is reported for ip only, and the next sync writes
//      the table back exactly as it was; a commit by others while we apply
//      ours is noticed through the generation count.
//   2. In the namespace cluster (dual-stack), with probers of a stable
//      Service: `nft delete table ip kube-proxy`, then `ip6`, then a deleted
//      base chain are repaired within 5 s each (measured and printed), each
//      counted, posted as an Event and shown in /statusz, and a change to a
//      foreign table leaves the proxy alone.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { nftFamily, TABLE_NAME, type NftFamily } from '../../src/dataplane/nftables/names.js';
import { NftablesDataplane } from '../../src/platform/nftables/dataplane.js';
import { MONITOR_POLL_MS, NftMonitor } from '../../src/platform/nftables/monitor.js';
import { kitchenSinkSteps, richCases } from '../support/nftables-rich.js';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../netns/cleanup.js';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, service, webPorts } from '../netns/fixtures.js';
import { dumpAllForeign, foreignDiff } from '../netns/foreign.js';
import { newPrefix } from '../netns/names.js';
import { describeProbes, Prober } from '../netns/prober.js';
import { RepairProbe } from '../netns/repair.js';
import { nsRun } from '../netns/spawn.js';
import { CLUSTER_CIDR, CLUSTER_CIDR6 } from '../netns/topology.js';
import { FakeClock } from '../support/fakeclock.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** `nft list table` text in a stable order: chains and sets print in creation order, which a rewrite changes. */
const canonical = (listing: string) =>
  listing
    .trim()
    .replace(/\n}$/, '') // the table's closing brace, after whichever block is last
    .split(/\n\s*\n/)
    .map((b) => b.trim())
    .sort()
    .join('\n\n');

describe('nftables monitor: foreign changes to our table are reported, our own are not', { concurrency: false }, () => {
  const NS = `${newPrefix()}mon`;
  const nft = (...args: string[]) => execFileSync('ip', ['netns', 'exec', NS, 'nft', ...args], { encoding: 'utf8' });
  const reports: Record<NftFamily, string[]> = { ip: [], ip6: [] };
  const dps: NftablesDataplane[] = [];
  const clock = new FakeClock();
  const cases = (['IPv4', 'IPv6'] as const).map((f) => richCases().find((c) => c.family === f)!);
  const steps = cases.map((c) => kitchenSinkSteps(c.family));

  before(() => {
    trackNamespace(NS);
    execFileSync('ip', ['netns', 'add', NS]);
    for (const c of cases) {
      const dp = new NftablesDataplane({ config: c.config, netns: NS, clock });
      dp.watchDrift((d) => reports[nftFamily(c.family)].push(`${d.reason}: ${d.detail}`));
      dps.push(dp);
    }
  });
  after(() => {
    for (const dp of dps) dp.close();
    deleteNamespaceSync(NS);
    untrackNamespace(NS);
  });

  const settle = () => sleep(3 * MONITOR_POLL_MS);
  const clear = () => {
    reports.ip.length = 0;
    reports.ip6.length = 0;
  };

  it('our own syncs (cold, partial, stale deletes, full) are not reported', async () => {
    for (let i = 0; i < steps[0]!.length; i++) {
      for (const [k, dp] of dps.entries()) {
        const step = steps[k]![i]!; // a restart step is one more full sync here
        clock.advance(step.advanceMs ?? 10);
        await dp.sync(step.state);
      }
    }
    await settle();
    assert.deepEqual(reports, { ip: [], ip6: [] });
  });

  it('other tables, and the inet family, are not ours', async () => {
    nft('add', 'table', 'ip', 'other');
    nft('add', 'chain', 'ip', 'other', 'c');
    nft('delete', 'table', 'ip', 'other');
    nft('add', 'table', 'inet', TABLE_NAME);
    nft('delete', 'table', 'inet', TABLE_NAME);
    await settle();
    assert.deepEqual(reports, { ip: [], ip6: [] });
  });

  it('nft delete table ip kube-proxy is reported for ip only, and the next sync writes it back as it was', async () => {
    const before = canonical(nft('list', 'table', 'ip', TABLE_NAME));
    nft('delete', 'table', 'ip', TABLE_NAME);
    await settle();
    assert.equal(reports.ip6.length, 0, `ip6 untouched: ${reports.ip6.join('; ')}`);
    assert.equal(reports.ip.length, 1, `one report per poll: ${reports.ip.join('; ')}`);
    assert.match(reports.ip[0]!, /^rules_changed: .*delete table kube-proxy/);
    clear();
    const last = steps[0]![steps[0]!.length - 1]!.state;
    // The engine's next sync is marked full; the dataplane repairs even from a partial one.
    const out = await dps[0]!.sync({ ...last, fullSync: false, changedServices: new Set() });
    assert.equal(out.partial, false, 'the sync after the report is full');
    assert.equal(canonical(nft('list', 'table', 'ip', TABLE_NAME)), before);
    await settle();
    assert.deepEqual(reports, { ip: [], ip6: [] }, 'the repair itself is ours');
  });

  it('a deleted element, rule or chain of ours is reported too', async () => {
    nft('flush', 'chain', 'ip6', TABLE_NAME, 'nat-output');
    await settle();
    assert.equal(reports.ip6.length, 1);
    assert.match(reports.ip6[0]!, /^rules_changed: .*delete rule kube-proxy nat-output/);
    assert.equal(reports.ip.length, 0);
  });

  it('a commit by others while we apply ours is noticed (generation count)', async () => {
    clear();
    const mon = await NftMonitor.open(NS);
    assert.ok(mon, 'the dataplanes opened the shared monitor');
    await mon.ownChange(() => {
      nft('add', 'table', 'ip', 'ours-in-this-test'); // stands for our batch
      nft('add', 'table', 'ip', 'someone-else'); // a commit by another process meanwhile
    });
    nft('delete', 'table', 'ip', 'ours-in-this-test');
    nft('delete', 'table', 'ip', 'someone-else');
    await settle();
    assert.equal(reports.ip.length, 1, reports.ip.join('; '));
    assert.match(reports.ip[0]!, /^changes_unaccounted: 1 nf_tables commit\(s\) by others/);
    assert.equal(reports.ip6.length, 1, 'which table it touched is unknown: every family is told');
  });
});

const V4 = '10.96.60.10';
const V6 = 'fd00:10:96::6010';

describe('nftables mode repairs a wiped table within 5 s (namespace cluster)', { concurrency: false }, () => {
  let env: E2EEnv;
  let probers: Prober[] = [];
  let foreignBefore: Map<string, string>;
  const report: string[] = [];

  before(async () => {
    env = await E2EEnv.start('nftables', {
      cluster: { ipv6: true },
      dropFlags: ['--cluster-cidr'],
      proxyArgs: ['--cluster-cidr', `${CLUSTER_CIDR},${CLUSTER_CIDR6}`],
    });
    const ports = webPorts();
    const eps = [{ pod: env.cluster.pod('node1-a') }, { pod: env.cluster.pod('node1-b') }];
    await env.apply(
      service({ name: 'stable', clusterIP: V4, clusterIPs: [V4, V6], ports }),
      endpointSlice('stable', eps, ports, 'stable-v4'),
      endpointSlice('stable', eps, ports, 'stable-v6', 'IPv6'),
    );
    await env.waitReachable('node2-b', 'tcp', V4, 80);
    await env.waitReachable('node2-b', 'tcp', V6, 80);
    foreignBefore = await dumpAllForeign(env.cluster.namespaces());
    probers = [
      await Prober.start(env.cluster, 'node2-b', V4, 80, { intervalMs: 50, timeoutMs: 2000 }),
      await Prober.start(env.cluster, 'node2-b', V6, 80, { intervalMs: 50, timeoutMs: 2000 }),
    ];
  });

  after(async () => {
    const stats = await Promise.all(probers.map((p) => p.stop().catch(() => null)));
    const foreignAfter = env ? await dumpAllForeign(env.cluster.namespaces()).catch(() => null) : null;
    for (const line of report) console.log(`nftables-repair: ${line}`);
    stats.forEach((s, i) => {
      if (s) console.log(`nftables-repair: prober ${probers[i]!.target}: ${describeProbes(s)}`);
    });
    await env?.dispose();
    if (foreignAfter) assert.equal(foreignDiff(foreignBefore, foreignAfter), '', 'foreign state changed');
  });

  const node2 = () => env.cluster.node('node2').ns;
  const nft = (...args: string[]) => nsRun(node2(), ['nft', ...args]);
  const failed = async () => (await Promise.all(probers.map((p) => p.stats()))).map((s) => s.failed);

  /**
   * Break the rules with `fault`, then time how long until `check` passes
   * again (polled every 20 ms) and the Service answers from node2's pod.
   */
  async function repairTime(
    what: string,
    fam: NftFamily,
    fault: () => Promise<unknown>,
    check: () => Promise<boolean>,
  ): Promise<void> {
    const before = canonical((await nft('list', 'table', fam, TABLE_NAME)).stdout);
    const failed0 = await failed();
    const mark = env.proxy('node2').logMark();
    const t0 = Date.now();
    await fault();
    let back = -1;
    while (Date.now() - t0 < 15_000) {
      if (await check()) {
        back = Date.now() - t0;
        break;
      }
      await sleep(20);
    }
    assert.ok(back >= 0, `${what}: not repaired within 15 s`);
    const { ms: answered } = await env.waitReachable('node2-b', 'tcp', fam === 'ip' ? V4 : V6, 80, {}, 10_000);
    const failed1 = await failed();
    report.push(
      `${what}: rules back after ${back} ms, Service answering after ${back + answered} ms at most; ` +
        `failed probes v4 ${failed1[0]! - failed0[0]!}, v6 ${failed1[1]! - failed0[1]!}`,
    );
    assert.ok(back <= 5000, `${what}: repaired after ${back} ms (target 5 s)`);
    const now = canonical((await nft('list', 'table', fam, TABLE_NAME)).stdout);
    assert.equal(now, before, `${what}: the table is as it was`);
    assert.match(env.proxy('node2').logSince(mark), /Rules changed by another actor/);
  }

  const tableBack = (fam: NftFamily) => async () =>
    (await nsRun(node2(), ['nft', 'list', 'tables', fam])).stdout.includes(`table ${fam} ${TABLE_NAME}`);

  it('nft delete table ip kube-proxy', async () => {
    await repairTime('delete table ip', 'ip', () => nft('delete', 'table', 'ip', TABLE_NAME), tableBack('ip'));
  });

  it('nft delete table ip6 kube-proxy', async () => {
    await repairTime('delete table ip6', 'ip6', () => nft('delete', 'table', 'ip6', TABLE_NAME), tableBack('ip6'));
  });

  it('a deleted base chain of ours (nat-prerouting)', async () => {
    await repairTime(
      'delete chain ip nat-prerouting',
      'ip',
      () => nft('delete', 'chain', 'ip', TABLE_NAME, 'nat-prerouting'),
      async () => (await nsRun(node2(), ['nft', 'list', 'chains', 'ip'])).stdout.includes('chain nat-prerouting'),
    );
  });

  it('the repairs are counted (metric), posted (Event) and shown (/statusz) per family', async () => {
    for (const [family, n] of [
      ['IPv4', 2],
      ['IPv6', 1],
    ] as const) {
      const probe = new RepairProbe(env, 'node2', 'nftables', family);
      assert.ok((await probe.repairsMetric('rules_changed')) >= n, `${family}: kubeproxy_ts_datapath_repairs_total`);
      const st = await probe.status();
      assert.ok(st.repairs >= n && st.lastRepair?.reason === 'rules_changed', JSON.stringify(st));
      const { value } = await env.waitFor(`${family}: DatapathRepaired Events`, async () => {
        const e = await probe.events();
        return e.length >= 1 ? e : undefined;
      });
      assert.equal(value[0]!.type, 'Warning');
    }
  });

  it('a change to a foreign table leaves the proxy alone', async () => {
    const mark = env.proxy('node2').logMark();
    await nft('add', 'table', 'ip', 'someone-else');
    await nft('add', 'chain', 'ip', 'someone-else', 'c');
    await nft('delete', 'table', 'ip', 'someone-else');
    await sleep(2000);
    assert.doesNotMatch(env.proxy('node2').logSince(mark), /Rules changed by another actor/);
  });
});
