// Benchmark (never a test): how fast the REAL proxy applies a change after an
// API-server outage, after a 410 relist, and on a quiet cluster. Per mode, the
// test API server (seeded with N Services x 5 endpoints) and bin/kube-proxy-ts
// with default flags run in a fresh network namespace; a change replaces one
// endpoint of one Service with a fresh address, and the time is taken when
// that address first appears in a rule the kernel committed (bench/lib/nlmon,
// the nf_tables notifications). Scenarios:
//   outage:    the API server stops (every connection dropped), stays away
//              --outage seconds, a change is made meanwhile, it comes back:
//              time from its return to the rule;
//   outage+410: the same, with the history compacted during the outage, so
//              the proxy's watches get 410 Gone and it must relist;
//   410:       history compacted and every watch ended, so the watches
//              resume, get 410 and relist; a change is made 20 ms later,
//              during the relist: time from the change;
//   quiet:     one change on a quiet cluster (> minSyncPeriod since the last
//              sync): time from the change (its trigger time) to the rule;
//   burst:     a second change 200 ms after one on a quiet cluster.
// Prints a table (median and max of --repeat) and writes
// bench/out/recovery.{json,svg,png}.
//
// The API host closes a watch's connection when the watch ends (as the real
// server may), and the table counts the TLS handshakes it saw aborted.
//
// --watch-list off runs the proxy with --feature-gates WatchListClient=false
// (its informers list and watch instead of streaming their state). Before
// the scenarios, the bench waits for the proxy's start-up handover (the
// removal of other modes' state, which holds the syncs queued meanwhile).
//
//   node --import tsx bench/recovery.ts [--services 1000] [--modes iptables,nftables] [--outage 10] [--repeat 5]
//                                       [--scenarios outage,outage+410,410,quiet,burst] [--watch-list on|off]
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../test/netns/spawn.js';
import { writeChart } from './lib/chart.js';
import { arg, BenchCluster, buildDist, type KernelMonitor, loadNote, median, runBench } from './lib/cluster.js';

const SERVICES = Number(arg('services', '1000'));
const MODES = arg('modes', 'iptables,nftables').split(',');
const OUTAGE_S = Number(arg('outage', '10'));
const REPEAT = Number(arg('repeat', '5'));
const WATCH_LIST = arg('watch-list', 'on') !== 'off';
const OUT = join(REPO_ROOT, 'bench', 'out');
const ALL_SCENARIOS = ['outage', 'outage+410', '410', 'quiet', 'burst'] as const;
type Scenario = (typeof ALL_SCENARIOS)[number];
const SCENARIOS = arg('scenarios', ALL_SCENARIOS.join(','))
  .split(',')
  .filter((s): s is Scenario => (ALL_SCENARIOS as readonly string[]).includes(s));

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
let nextService = 1;
/** A different Service each time, so every change is a real one. */
const pick = (): number => (nextService++ * 7919) % SERVICES;

/** Wait for the address in the kernel; latency from `from` (epoch ms), or NaN after 60 s. */
async function seen(mon: KernelMonitor, ip: string, after: number, from: number): Promise<number> {
  const t = await Promise.race([mon.expect(ip, after), sleep(60_000).then(() => NaN)]);
  return (t - from) / 1000;
}

async function once(c: BenchCluster, mon: KernelMonitor, s: Scenario): Promise<number> {
  switch (s) {
    case 'outage':
    case 'outage+410': {
      await c.command('stop');
      await sleep(OUTAGE_S * 1000);
      const ch = await c.command('change', { service: pick() });
      if (s === 'outage+410') await c.command('compact');
      const back = Number((await c.command('start'))['at']);
      return seen(mon, String(ch['ip']), Number(ch['at']), back);
    }
    case '410': {
      // History gone and every watch ended: the watches resume, get 410 and relist; the change lands meanwhile.
      await c.command('compact');
      await c.command('closeWatches');
      await sleep(20);
      const ch = await c.command('change', { service: pick() });
      return seen(mon, String(ch['ip']), Number(ch['at']), Number(ch['at']));
    }
    case 'quiet': {
      const ch = await c.command('change', { service: pick() });
      return seen(mon, String(ch['ip']), Number(ch['at']), Number(ch['at']));
    }
    case 'burst': {
      await c.command('change', { service: pick() });
      await sleep(200);
      const ch = await c.command('change', { service: pick() });
      return seen(mon, String(ch['ip']), Number(ch['at']), Number(ch['at']));
    }
  }
}

interface Row {
  mode: string;
  scenario: Scenario;
  latenciesS: number[];
  medianS: number;
  maxS: number;
  /** TLS handshakes the API server saw opened and dropped during the scenario's runs. */
  abortedHandshakes: number;
}

async function main(): Promise<void> {
  buildDist();
  mkdirSync(OUT, { recursive: true });
  const rows: Row[] = [];
  for (const mode of MODES) {
    const c = await BenchCluster.start({ services: SERVICES, endpoints: 5 });
    try {
      const px = c.startProxy(mode, WATCH_LIST ? [] : ['--feature-gates', 'WatchListClient=false']);
      await c.waitHealthy();
      for (let i = 0; i < 600 && !px.log().includes('Handover done'); i++) await sleep(100);
      const mon = await c.monitor();
      await sleep(3000);
      for (const s of SCENARIOS) {
        const latenciesS: number[] = [];
        const aborted = Number((await c.command('stats'))['abortedHandshakes']);
        for (let r = 0; r < REPEAT; r++) {
          // Quiet before each run: longer than minSyncPeriod (1 s) and the reconnects of the last one.
          await sleep(3000);
          latenciesS.push(await once(c, mon, s));
        }
        const abortedHandshakes = Number((await c.command('stats'))['abortedHandshakes']) - aborted;
        const row = {
          mode,
          scenario: s,
          latenciesS,
          medianS: median(latenciesS),
          maxS: Math.max(...latenciesS),
          abortedHandshakes,
        };
        rows.push(row);
        console.log(
          `${mode} ${s}: ${latenciesS.map((x) => x.toFixed(2)).join(' ')} s (median ${row.medianS.toFixed(2)}, max ${row.maxS.toFixed(2)}), ${abortedHandshakes} aborted handshakes ${loadNote()}`,
        );
      }
      mon.stop();
    } finally {
      await c.dispose();
    }
  }
  console.log(
    `\n${SERVICES} Services x 5 endpoints, outages of ${OUTAGE_S} s, ${REPEAT} runs each, default flags` +
      (WATCH_LIST ? '' : ' and --feature-gates WatchListClient=false'),
  );
  console.log('| mode | scenario | median (s) | max (s) | aborted handshakes |');
  console.log('|---|---|---:|---:|---:|');
  for (const r of rows) {
    console.log(
      `| ${r.mode} | ${r.scenario} | ${r.medianS.toFixed(2)} | ${r.maxS.toFixed(2)} | ${r.abortedHandshakes} |`,
    );
  }
  writeFileSync(join(OUT, 'recovery.json'), JSON.stringify({ services: SERVICES, outageS: OUTAGE_S, rows }, null, 2));
  const png = writeChart(join(OUT, 'recovery'), {
    title: `Change applied after (${SERVICES} Services, median of ${REPEAT})`,
    yLabel: 'seconds',
    series: MODES,
    groups: SCENARIOS.map((s) => ({
      label: s,
      values: MODES.map((m) => rows.find((r) => r.mode === m && r.scenario === s)?.medianS ?? null),
    })),
  });
  console.log(png ? `wrote ${png}` : 'wrote recovery.svg (no PNG converter)');
}

runBench(main);
