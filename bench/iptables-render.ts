// Benchmark (never a test): the proxy's own CPU in an iptables mode sync at growing N, without a
// kernel, to see what grows faster than N. Per size, in a fresh child process (compiled JS, the
// binary's V8 flags): N Services x 5 endpoints fed through the engine's FamilyState (as the
// informers do), buildSyncState, then IptablesDataplane.sync twice (fresh, then loaded) and one
// one-endpoint partial sync, with a runner that answers every command at once (an empty
// iptables-save, a restore that only counts its input). Prints CPU seconds per step and per 1k
// Services and writes bench/out/iptables-render.{json,svg,png}; no root needed.
//
//   node --import tsx bench/iptables-render.ts [--sizes 10000,20000,40000] [--repeat 3]
//
// Compile first (`npx tsc -p tsconfig.json`): the children run dist/bench/iptables-render.js.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { EndpointSlice, Service } from '../src/core/api.js';
import { nodeInfoFromNode } from '../src/core/nodeinfo.js';
import { finish } from '../src/core/steps.js';
import type { SyncOutcome, SyncState } from '../src/core/types.js';
import { FamilyState } from '../src/engine/familystate.js';
import { realClock } from '../src/platform/clock.js';
import type { CommandRunner } from '../src/platform/exec.js';
import { IptablesDataplane, runnerSysctl } from '../src/platform/iptables/index.js';
import { service, slice } from '../test/cases/fixtures.js';
import { writeChart } from './lib/chart.js';
import { BENCH_IPTABLES_CONFIG } from './lib/dpconfig.js';

const EPS = 5;
const NODE_FLAGS = ['--max-semi-space-size=4'];
const CONFIG = BENCH_IPTABLES_CONFIG;
/** Distinct addresses up to 16M objects: <base+i/65536>.<i/256>.<i>.1 */
const addr = (base: number, i: number) => `${base + (i >> 16)}.${(i >> 8) & 255}.${i & 255}.1`;

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const cpuS = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

interface Result {
  n: number;
  /** CPU seconds: objects into the trackers, buildSyncState, the syncs. */
  intake: number;
  state: number;
  fresh: number;
  loaded: number;
  partial: number;
  /** Of the fresh sync: the planner (reconcile and render). */
  freshRender: number;
  restoreMB: number;
  error: string | null;
}

async function child(n: number): Promise<Result> {
  const services: Service[] = [];
  const slices: EndpointSlice[] = [];
  for (let i = 0; i < n; i++) {
    services.push(service(`s${i}`, { clusterIP: addr(172, i) }, [{ name: 'http', port: 80, targetPort: 8080 }]));
    const eps = Array.from({ length: EPS }, (_, e) => ({ ip: addr(10, i * EPS + e) }));
    slices.push(slice(`s${i}`, [{ name: 'http', port: 8080 }], eps));
  }
  let chars = 0;
  const run: CommandRunner = async (cmd, args, opts) => {
    const input = opts?.input ?? '';
    if (cmd.endsWith('-restore')) for (const p of typeof input === 'string' ? [input] : input) chars += p.length;
    const stdout = args.includes('--version') ? 'iptables v1.8.9 (nf_tables)\n' : '';
    return { stdout, stderr: '', code: 0 };
  };
  const dp = new IptablesDataplane({
    config: CONFIG,
    run,
    sysctl: runnerSysctl(run),
    clock: realClock,
    syncPeriodMs: 30_000,
  });
  const fam = new FamilyState(
    dp,
    'n',
    0,
    () => {},
    () => {},
  );
  const node = nodeInfoFromNode('n', null, { IPv4: '192.168.0.2' });
  const r: Result = {
    n,
    intake: 0,
    state: 0,
    fresh: 0,
    loaded: 0,
    partial: 0,
    freshRender: 0,
    restoreMB: 0,
    error: null,
  };
  let c = cpuS();
  for (const s of services) fam.services.update(null, s);
  for (const s of slices) fam.endpointsTracker.endpointSliceUpdate(s, false);
  r.intake = cpuS() - c;
  const next = (fullSync: boolean): SyncState => {
    const changes = fam.checkout();
    const state = finish(
      fam.stateSteps({ node, changedServices: changes.updatedServices, fullSync, serviceCIDRs: [] }),
    );
    fam.succeeded(state, fullSync ? 0 : null);
    return state;
  };
  c = cpuS();
  const full = next(true);
  r.state = cpuS() - c;
  const timed = async (s: SyncState): Promise<[number, SyncOutcome]> => {
    const c0 = cpuS();
    const out = await dp.sync(s);
    return [cpuS() - c0, out];
  };
  try {
    let out: SyncOutcome;
    [r.fresh, out] = await timed(full);
    r.freshRender = (out.counters?.renderCpuMs ?? 0) / 1000;
    r.restoreMB = chars / 1e6;
    [r.loaded] = await timed(full);
    const eps = Array.from({ length: EPS }, (_, e) => ({ ip: e === 0 ? '10.250.0.1' : addr(10, e) }));
    fam.endpointsTracker.endpointSliceUpdate(slice('s0', [{ name: 'http', port: 8080 }], eps), false);
    [r.partial] = await timed(next(false));
  } catch (e) {
    r.error = String(e).slice(0, 200);
  }
  return r;
}

function main(): void {
  const sizes = (arg('sizes') ?? '10000,20000,40000').split(',').map(Number);
  const repeat = Number(arg('repeat') ?? 3);
  const self = fileURLToPath(import.meta.url);
  // The repository root, whether this runs compiled (dist/bench/) or under tsx (bench/).
  const root = self.endsWith('.js') ? join(dirname(self), '..', '..') : join(dirname(self), '..');
  const js = self.endsWith('.js') ? self : join(root, 'dist', 'bench', 'iptables-render.js');
  if (!existsSync(js)) throw new Error(`${js} missing: compile with npx tsc -p tsconfig.json first`);
  const rows: Result[][] = sizes.map(() => []);
  // Sizes interleaved per round, so that load on the shared machine falls on all of them alike.
  for (let k = 0; k < repeat; k++) {
    sizes.forEach((n, i) => {
      const p = spawnSync(process.execPath, [...NODE_FLAGS, js, '--child', String(n)], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const line = p.stdout.split('\n').find((l) => l.startsWith('RESULT '));
      if (!line) throw new Error(`child ${n} failed (status ${p.status})`);
      const r = JSON.parse(line.slice(7)) as Result;
      rows[i]!.push(r);
      console.log(JSON.stringify(r));
    });
  }
  const med = (xs: number[]) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const f = (v: number) => v.toFixed(2);
  console.log(`\nCPU seconds, median of ${repeat}; per 1k Services in parentheses (flat when linear in N).`);
  console.log('| Services | intake | SyncState | fresh full sync (render) | loaded full sync | one-endpoint partial |');
  console.log('|---:|---:|---:|---:|---:|---:|');
  sizes.forEach((n, i) => {
    const rs = rows[i]!;
    const err = rs.find((r) => r.error !== null)?.error;
    const m = (k: keyof Result) => med(rs.map((r) => r[k] as number));
    const per = (v: number) => `${f(v)} (${((1000 * v) / n).toFixed(3)})`;
    const sync = err ? `failed: ${err.slice(0, 60)}` : `${per(m('fresh'))} (render ${f(m('freshRender'))})`;
    console.log(
      `| ${n} | ${per(m('intake'))} | ${per(m('state'))} | ${sync} | ${err ? '-' : per(m('loaded'))} | ${err ? '-' : f(m('partial'))} |`,
    );
  });
  const out = join(root, 'bench', 'out');
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'iptables-render.json'), JSON.stringify(rows, null, 2));
  const value = (rs: Result[], k: keyof Result) =>
    rs.some((r) => r.error !== null) ? null : med(rs.map((r) => r[k] as number));
  const png = writeChart(join(out, 'iptables-render'), {
    title: "iptables mode: the proxy's own CPU per sync, no kernel (Services x 5 endpoints)",
    yLabel: 'CPU seconds (log)',
    log: true,
    series: ['intake + SyncState', 'fresh full sync', 'loaded full sync', 'one-endpoint partial'],
    groups: sizes.map((n, i) => {
      const rs = rows[i]!;
      return {
        label: `${n / 1000}k Services`,
        values: [med(rs.map((r) => r.intake + r.state)), value(rs, 'fresh'), value(rs, 'loaded'), value(rs, 'partial')],
      };
    }),
  });
  console.log(png ? `chart: ${png}` : 'chart: SVG only (rsvg-convert unavailable)');
}

if (arg('child') !== undefined) {
  void child(Number(arg('child'))).then((r) => process.stdout.write(`RESULT ${JSON.stringify(r)}\n`));
} else main();
