// Benchmark (never a test): iptables mode full and one-endpoint partial syncs at
// 1k/5k/10k Services x 5 endpoints, applied in a network namespace, beside
// iptables-restore alone loading the same rules. Prints a table and writes
// bench/out/iptables-sync.{json,svg,png}. Run as root:
//
//   node --import tsx bench/iptables-sync.ts [--sizes 1000,5000,10000] [--plain-max 5000]
//
// --plain-max N: also time plain `iptables-restore --noflush` (no whole-table
// cache request) for sizes <= N; it is quadratic (minutes at 5k+). Default 1000.
//
// Each size runs in a child process (so peak RSS is that size's alone) in a
// fresh namespace kpt-iptbench-<pid>-<rand>, removed on exit and on SIGINT.
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../test/netns/cleanup.js';
import { writeChart } from './lib/chart.js';
import { runChild, type ChildResult } from './lib/iptables-child.js';

const here = dirname(fileURLToPath(import.meta.url));
const OUT = join(here, 'out');

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function newNs(): string {
  const ns = `kpt-iptbench-${process.pid}-${randomBytes(2).toString('hex')}`;
  trackNamespace(ns);
  execFileSync('ip', ['netns', 'add', ns]);
  execFileSync('ip', ['netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up']);
  return ns;
}
function dropNs(ns: string): void {
  deleteNamespaceSync(ns);
  untrackNamespace(ns);
}

/** Wall seconds of one iptables-restore in ns (stdout discarded). */
function timeRestore(ns: string, file: string, flags: string[]): number {
  const t0 = performance.now();
  const r = spawnSync('ip', ['netns', 'exec', ns, 'iptables-restore', '-w', '5', ...flags], { input: readFileSync(file), stdio: ['pipe', 'ignore', 'pipe'], maxBuffer: 1 << 30 });
  const s = (performance.now() - t0) / 1000;
  if (r.status !== 0) throw new Error(`iptables-restore ${flags.join(' ')} failed: ${r.stderr.toString().slice(0, 500)}`);
  return s;
}

interface Floors {
  tableRestore: number;
  cacheRequest: number;
  plainNoflush: number | null;
  partialPlain: number;
  partialCacheRequest: number;
}

/** iptables-restore alone, each in a fresh namespace, on the exact inputs the proxy sent. */
function measureFloors(files: ChildResult['files'], plain: boolean): Floors {
  const fresh = <T>(fn: (ns: string) => T): T => { const ns = newNs(); try { return fn(ns); } finally { dropNs(ns); } };
  const tableRestore = fresh((ns) => timeRestore(ns, files.fullPlain, ['--counters']));
  const cacheRequest = fresh((ns) => timeRestore(ns, files.fullWithCache, ['--noflush', '--counters']));
  const plainNoflush = plain ? fresh((ns) => timeRestore(ns, files.fullPlain, ['--noflush', '--counters'])) : null;
  const partial = (f: string) => fresh((ns) => { timeRestore(ns, files.fullPlain, ['--counters']); return timeRestore(ns, f, ['--noflush', '--counters']); });
  return { tableRestore, cacheRequest, plainNoflush, partialPlain: partial(files.partialPlain), partialCacheRequest: partial(files.partialWithCache) };
}

function childMain(): void {
  const size = Number(arg('child'));
  const ns = arg('ns')!;
  runChild(size, ns, OUT).then((r) => {
    process.stdout.write(`RESULT ${JSON.stringify(r)}\n`);
  }).catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
}

function main(): void {
  const sizes = (arg('sizes') ?? '1000,5000,10000').split(',').map(Number);
  const plainMax = Number(arg('plain-max') ?? 1000);
  mkdirSync(OUT, { recursive: true });
  const rows: Array<{ size: number; child: ChildResult; floors: Floors }> = [];
  for (const size of sizes) {
    const ns = newNs();
    let child: ChildResult;
    try {
      const r = spawnSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--child', String(size), '--ns', ns], { encoding: 'utf8', maxBuffer: 1 << 26, stdio: ['ignore', 'pipe', 'inherit'] });
      const line = r.stdout.split('\n').find((l) => l.startsWith('RESULT '));
      if (r.status !== 0 || !line) throw new Error(`child for ${size} failed (status ${r.status})`);
      child = JSON.parse(line.slice(7)) as ChildResult;
    } finally {
      dropNs(ns);
    }
    const floors = measureFloors(child.files, size <= plainMax);
    rows.push({ size, child, floors });
    report(rows.at(-1)!);
  }
  writeFileSync(join(OUT, 'iptables-sync.json'), JSON.stringify(rows, null, 2));
  summary(rows);
  const png = writeChart(join(OUT, 'iptables-sync'), {
    title: 'iptables mode sync time (Services x 5 endpoints, iptables 1.8.9 nf_tables)', yLabel: 'seconds (log)', log: true,
    series: ['proxy full sync', 'restore alone, -S (correct floor)', 'whole-table restore (flushes foreign rules)', 'plain --noflush restore', 'proxy partial sync', 'partial restore alone (floor)'],
    groups: rows.map(({ size, child: c, floors: f }) => ({
      label: `${size / 1000}k Services`,
      values: [c.full.totalS, f.cacheRequest, f.tableRestore, f.plainNoflush, c.partial.totalS, Math.min(f.partialPlain, f.partialCacheRequest)],
    })),
  });
  console.log(png ? `chart: ${png}` : 'chart: SVG only (rsvg-convert unavailable)');
}

function report({ size, child: c, floors: f }: { size: number; child: ChildResult; floors: Floors }): void {
  const s = (v: number | null) => (v === null ? '   -  ' : v.toFixed(3).padStart(7));
  console.log(`\n== ${size} Services x 5 endpoints (${c.natRules} nat rules, ${c.natChains} nat chains)`);
  console.log(`proxy full sync (fresh)   total ${s(c.full.totalS)}  render ${s(c.full.renderS)}  restore ${s(c.full.restoreS)}  other ${s(c.full.otherS)}  cache request ${c.full.wholeTableCache}`);
  console.log(`proxy full sync (loaded)  total ${s(c.fullAgain.totalS)}  render ${s(c.fullAgain.renderS)}  restore ${s(c.fullAgain.restoreS)}  other ${s(c.fullAgain.otherS)}`);
  console.log(`proxy partial (1 endpoint) total ${s(c.partial.totalS)}  render ${s(c.partial.renderS)}  restore ${s(c.partial.restoreS)}  other ${s(c.partial.otherS)}  cache request ${c.partial.wholeTableCache}`);
  console.log(`restore alone: -S ${s(f.cacheRequest)}  whole table ${s(f.tableRestore)}  plain --noflush ${s(f.plainNoflush)}  partial plain ${s(f.partialPlain)}  partial -S ${s(f.partialCacheRequest)}`);
  console.log(`peak RSS of the proxy process: ${(c.maxRssKiB / 1024).toFixed(1)} MiB`);
}

function summary(rows: Array<{ size: number; child: ChildResult; floors: Floors }>): void {
  console.log('\n| Services | full sync s | render % | restore-alone floor s | full/floor | partial s | partial floor s | partial/floor | peak RSS MiB |');
  console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const { size, child: c, floors: f } of rows) {
    const floor = Math.min(f.cacheRequest, f.plainNoflush ?? Infinity);
    const pfloor = Math.min(f.partialPlain, f.partialCacheRequest);
    console.log(`| ${size} | ${c.full.totalS.toFixed(2)} | ${((100 * c.full.renderS) / c.full.totalS).toFixed(1)} | ${floor.toFixed(2)} | ${(c.full.totalS / floor).toFixed(2)} | ${c.partial.totalS.toFixed(3)} | ${pfloor.toFixed(3)} | ${(c.partial.totalS / pfloor).toFixed(2)} | ${(c.maxRssKiB / 1024).toFixed(1)} |`);
  }
}

if (arg('child') !== undefined) childMain();
else main();
