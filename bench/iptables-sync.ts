// Benchmark (never a test): iptables mode full and one-endpoint partial syncs at
// 1k/5k/10k Services x 5 endpoints, applied in a network namespace, beside
// iptables-restore alone loading the same rules. Prints a table and writes
// bench/out/iptables-sync.{json,svg,png}. Run as root:
//
//   node --import tsx bench/iptables-sync.ts [--sizes 1000,5000,10000] [--plain-max 5000]
//
// --node-flags "<flags>": V8/node flags for the measured child process.
// --plain-max N: also time plain `iptables-restore --noflush` (no whole-table
// cache request) for sizes <= N; it is quadratic (minutes at 5k+). Default 1000.
//
// Each size runs in a child process (so peak RSS is that size's alone) in a
// fresh namespace kpt-iptbench-<pid>-<rand>, removed on exit and on SIGINT.
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../test/netns/cleanup.js';
import { writeChart } from './lib/chart.js';
import { cpuNow, cpuSince } from './lib/cputime.js';
import { runChild, type ChildResult } from './lib/iptables-child.js';

const here = dirname(fileURLToPath(import.meta.url));
/** bench/out, also when running compiled from bench/out/dist/bench/. */
const OUT = here.includes(`${join('bench', 'out', 'dist')}`) ? join(here, '..', '..') : join(here, 'out');

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

/** One iptables-restore alone: wall seconds and its CPU seconds (user + sys, incl. kernel work). */
interface Timing {
  wallS: number;
  cpuS: number;
}

/** Time one iptables-restore in ns (stdout discarded). */
function timeRestore(ns: string, file: string, flags: string[]): Timing {
  const input = readFileSync(file);
  const c0 = cpuNow();
  const t0 = performance.now();
  const r = spawnSync('ip', ['netns', 'exec', ns, 'iptables-restore', '-w', '5', ...flags], {
    input,
    stdio: ['pipe', 'ignore', 'pipe'],
    maxBuffer: 1 << 30,
  });
  const wallS = (performance.now() - t0) / 1000;
  const cpuS = cpuSince(c0).childrenS;
  if (r.status !== 0)
    throw new Error(`iptables-restore ${flags.join(' ')} failed: ${r.stderr.toString().slice(0, 500)}`);
  return { wallS, cpuS };
}

interface Floors {
  tableRestore: Timing;
  cacheRequest: Timing;
  plainNoflush: Timing | null;
  /** The full input with -S again on a table that already holds it (the loaded full sync's floor). */
  cacheRequestLoaded: Timing;
  partialPlain: Timing;
  partialCacheRequest: Timing;
}

/** iptables-restore alone, each in a fresh namespace, on the exact inputs the proxy sent. */
function measureFloors(files: ChildResult['files'], plain: boolean): Floors {
  const fresh = <T>(fn: (ns: string) => T): T => {
    const ns = newNs();
    try {
      return fn(ns);
    } finally {
      dropNs(ns);
    }
  };
  const tableRestore = fresh((ns) => timeRestore(ns, files.fullPlain, ['--counters']));
  const cacheRequest = fresh((ns) => timeRestore(ns, files.fullWithCache, ['--noflush', '--counters']));
  const plainNoflush = plain ? fresh((ns) => timeRestore(ns, files.fullPlain, ['--noflush', '--counters'])) : null;
  const loaded = (f: string) =>
    fresh((ns) => {
      timeRestore(ns, files.fullPlain, ['--counters']);
      return timeRestore(ns, f, ['--noflush', '--counters']);
    });
  return {
    tableRestore,
    cacheRequest,
    plainNoflush,
    cacheRequestLoaded: loaded(files.fullWithCache),
    partialPlain: loaded(files.partialPlain),
    partialCacheRequest: loaded(files.partialWithCache),
  };
}

/**
 * The child runs compiled JavaScript when possible: under tsx the process
 * carries the loader's extra isolate (~35 MiB RSS) and transpiles at load,
 * which would distort the RSS and CPU numbers. Compiles the project with tsc
 * into bench/out/dist (errors in unrelated work-in-progress files do not stop
 * the emit); falls back to tsx if that yields nothing.
 */
function compiledChild(): string[] {
  const self = fileURLToPath(import.meta.url);
  if (self.endsWith('.js')) return [self];
  const dist = join(OUT, 'dist');
  spawnSync('npx', ['tsc', '-p', join(here, '..', 'tsconfig.json'), '--outDir', dist, '--sourceMap', 'false'], {
    stdio: 'ignore',
  });
  const js = join(dist, 'bench', 'iptables-sync.js');
  if (existsSync(js)) return [js];
  console.log('note: tsc emitted nothing; the child runs under tsx (RSS +~35 MiB)');
  return ['--import', 'tsx', self];
}

function childMain(): void {
  const size = Number(arg('child'));
  const ns = arg('ns')!;
  runChild(size, ns, OUT)
    .then((r) => {
      process.stdout.write(`RESULT ${JSON.stringify(r)}\n`);
    })
    .catch((e: unknown) => {
      console.error(e);
      process.exit(1);
    });
}

function main(): void {
  const sizes = (arg('sizes') ?? '1000,5000,10000').split(',').map(Number);
  const plainMax = Number(arg('plain-max') ?? 1000);
  mkdirSync(OUT, { recursive: true });
  const childCmd = compiledChild();
  // V8 flags for the measured process (e.g. the ones bin/kube-proxy-ts sets), space-separated.
  const nodeFlags = (arg('node-flags') ?? '').split(' ').filter((f) => f !== '');
  if (nodeFlags.length > 0) console.log(`child node flags: ${nodeFlags.join(' ')}`);
  const rows: Row[] = [];
  for (const size of sizes) {
    const ns = newNs();
    let child: ChildResult;
    try {
      const r = spawnSync(process.execPath, [...nodeFlags, ...childCmd, '--child', String(size), '--ns', ns], {
        encoding: 'utf8',
        maxBuffer: 1 << 26,
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const line = r.stdout.split('\n').find((l) => l.startsWith('RESULT '));
      if (r.status !== 0 || !line) throw new Error(`child for ${size} failed (status ${r.status})`);
      child = JSON.parse(line.slice(7)) as ChildResult;
    } finally {
      dropNs(ns);
    }
    const floors = measureFloors(child.files, size <= plainMax);
    for (const f of Object.values(child.files)) rmSync(f, { force: true });
    rows.push({ size, child, floors });
    report(rows.at(-1)!);
  }
  writeFileSync(join(OUT, 'iptables-sync.json'), JSON.stringify(rows, null, 2));
  summary(rows);
  const png = writeChart(join(OUT, 'iptables-sync'), {
    title: 'iptables mode: CPU seconds per sync (Services x 5 endpoints, iptables 1.8.9 nf_tables)',
    yLabel: 'CPU seconds (log)',
    log: true,
    series: [
      'proxy full sync',
      'restore alone, -S (correct floor)',
      'whole-table restore (flushes foreign rules)',
      'plain --noflush restore',
      'proxy partial sync',
      'partial restore alone (floor)',
    ],
    groups: rows.map(({ size, child: c, floors: f }) => ({
      label: `${size / 1000}k Services`,
      values: [
        cpuOf(c.full),
        f.cacheRequest.cpuS,
        f.tableRestore.cpuS,
        f.plainNoflush?.cpuS ?? null,
        cpuOf(c.partial),
        best(f.partialPlain, f.partialCacheRequest).cpuS,
      ],
    })),
  });
  console.log(png ? `chart: ${png}` : 'chart: SVG only (rsvg-convert unavailable)');
}

const w = (t: Timing | null) =>
  t === null ? '    -  ' : `${t.wallS.toFixed(3).padStart(7)} (cpu ${t.cpuS.toFixed(2)})`;
const f3 = (v: number) => v.toFixed(3).padStart(7);

function report({ size, child: c, floors: f }: { size: number; child: ChildResult; floors: Floors }): void {
  console.log(`\n== ${size} Services x 5 endpoints (${c.natRules} nat rules, ${c.natChains} nat chains)`);
  const line = (name: string, p: ChildResult['full']) =>
    console.log(
      `${name.padEnd(27)} wall ${f3(p.totalS)} = render ${f3(p.renderS)} + restore ${f3(p.restoreS)} + other ${f3(p.otherS)} | cpu: render ${p.renderCpuS.toFixed(2)}, proxy ${p.selfCpuS.toFixed(2)}, commands ${p.childCpuS.toFixed(2)} | -S ${p.wholeTableCache}`,
    );
  line('proxy full sync (fresh)', c.full);
  line('proxy full sync (loaded)', c.fullAgain);
  line('proxy partial (1 endpoint)', c.partial);
  console.log(
    `restore alone (wall, cpu): -S ${w(f.cacheRequest)}  whole table ${w(f.tableRestore)}  plain --noflush ${w(f.plainNoflush)}`,
  );
  console.log(
    `on a loaded table:         full -S ${w(f.cacheRequestLoaded)}  (loaded full sync: ${(cpuOf(c.fullAgain) / f.cacheRequestLoaded.cpuS).toFixed(2)}x its cpu)`,
  );
  console.log(`partial restore alone:     plain ${w(f.partialPlain)}  -S ${w(f.partialCacheRequest)}`);
  console.log(
    `cleanup (all chains and jumps): wall ${c.cleanup.wallS.toFixed(3)} cpu ${c.cleanup.cpuS.toFixed(2)}; KUBE-* chains left: ${c.cleanup.leftover}`,
  );
  console.log(
    `peak RSS of the proxy process: ${(c.maxRssKiB / 1024).toFixed(1)} MiB (runtime + modules before any work: ${(c.baseRssKiB / 1024).toFixed(1)} MiB; peak by the end of ${Object.entries(
      c.peakAfter,
    )
      .map(([k, v]) => `${k} ${(v / 1024).toFixed(0)}`)
      .join(', ')})`,
  );
}

type Row = { size: number; child: ChildResult; floors: Floors };
const cpuOf = (p: ChildResult['full']) => p.selfCpuS + p.childCpuS;
const best = (...ts: Array<Timing | null>) =>
  ts.filter((t): t is Timing => t !== null).reduce((a, b) => (b.cpuS < a.cpuS ? b : a));

function summary(rows: Row[]): void {
  console.log(
    '\nCPU seconds (contention-robust; wall in the lines above). floor = iptables-restore alone, best correct variant.',
  );
  console.log(
    'RSS: peak over the two full syncs; in parentheses the whole run (incl. the partial step and its SyncState).',
  );
  console.log(
    '| Services | full sync cpu | render cpu % | full floor cpu | full/floor | partial cpu | partial floor cpu | partial/floor | peak RSS MiB: full syncs (whole run) |',
  );
  console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const { size, child: c, floors: f } of rows) {
    const floor = best(f.cacheRequest, f.plainNoflush).cpuS;
    const pfloor = best(f.partialPlain, f.partialCacheRequest).cpuS;
    console.log(
      `| ${size} | ${cpuOf(c.full).toFixed(2)} | ${((100 * c.full.renderCpuS) / cpuOf(c.full)).toFixed(1)} | ${floor.toFixed(2)} | ${(cpuOf(c.full) / floor).toFixed(2)} | ${cpuOf(c.partial).toFixed(2)} | ${pfloor.toFixed(2)} | ${(cpuOf(c.partial) / pfloor).toFixed(2)} | ${((c.peakAfter.fullAgain ?? c.maxRssKiB) / 1024).toFixed(1)} (${(c.maxRssKiB / 1024).toFixed(1)}) |`,
    );
  }
}

if (arg('child') !== undefined) childMain();
else main();
