// The measured half of bench/iptables-sync.ts: one size, one process, one
// namespace. Feeds the Service/EndpointSlice objects through the engine's own
// bookkeeping (FamilyState: change trackers, applied maps, buildSyncState with
// the previous snapshot - exactly what src/engine/proxier.ts does), runs
// IptablesDataplane full (fresh), full (loaded) and one-endpoint partial syncs,
// and saves the exact restore inputs so the parent can time iptables-restore
// alone on them. Like the real proxy, the partial step changes one
// EndpointSlice: unchanged services keep their objects.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { EndpointSlice, Service } from '../../src/core/api.js';
import { nodeInfoFromNode } from '../../src/core/nodeinfo.js';
import { finish } from '../../src/core/steps.js';
import type { SyncOutcome, SyncState } from '../../src/core/types.js';
import { FamilyState } from '../../src/engine/familystate.js';
import { realClock } from '../../src/platform/clock.js';
import { netnsRunner, type CommandRunner } from '../../src/platform/exec.js';
import { IptablesDataplane, runnerSysctl, withWholeTableCache } from '../../src/platform/iptables/index.js';
import { service, slice } from '../../test/cases/fixtures.js';
import { cpuNow, cpuSince } from './cputime.js';
import { BENCH_IPTABLES_CONFIG } from './dpconfig.js';

export interface Phase {
  readonly totalS: number;
  /** Renderer wall time (single-threaded, CPU-bound). */
  readonly renderS: number;
  /** Renderer CPU time (process.cpuUsage around the planner: reconcile and render). */
  readonly renderCpuS: number;
  /** CPU of the proxy process during the sync (render, spawn, I/O). */
  readonly selfCpuS: number;
  /** CPU of the commands it ran (iptables-restore incl. its kernel time, iptables, iptables-save). */
  readonly childCpuS: number;
  /** iptables-restore wall time. */
  readonly restoreS: number;
  /** Everything else: canary checks, iptables-save, jump rules, process spawns. */
  readonly otherS: number;
  readonly wholeTableCache: boolean;
}

export interface ChildResult {
  readonly size: number;
  readonly natRules: number;
  readonly natChains: number;
  readonly full: Phase;
  readonly fullAgain: Phase;
  readonly partial: Phase;
  /** dp.cleanup() of the whole ruleset: wall and CPU (proxy + commands) seconds. */
  readonly cleanup: { readonly wallS: number; readonly cpuS: number; readonly leftover: number };
  readonly maxRssKiB: number;
  /** Peak RSS after imports, before any work (the runtime's own share). */
  readonly baseRssKiB: number;
  /** Peak RSS (KiB) reached by the end of each step. */
  readonly peakAfter: Readonly<Record<string, number>>;
  readonly files: { fullPlain: string; fullWithCache: string; partialPlain: string; partialWithCache: string };
}

const EPS = 5;
const NODE = 'bench-node';
const CONFIG = BENCH_IPTABLES_CONFIG;

const epIP = (idx: number) => `10.${100 + (idx >> 16)}.${(idx >> 8) & 255}.${idx & 255}`;

function objects(n: number): { services: Service[]; slices: EndpointSlice[] } {
  const services: Service[] = [];
  const slices: EndpointSlice[] = [];
  for (let i = 0; i < n; i++) {
    services.push(
      service(`s${i}`, { clusterIP: `172.30.${i >> 8}.${i & 255}` }, [{ name: 'http', port: 80, targetPort: 8080 }]),
    );
    slices.push(
      slice(
        `s${i}`,
        [{ name: 'http', port: 8080 }],
        Array.from({ length: EPS }, (_, e) => ({ ip: epIP(i * EPS + e) })),
      ),
    );
  }
  return { services, slices };
}

function phase(out: SyncOutcome, totalS: number, cpu: { selfS: number; childrenS: number }): Phase {
  const renderS = (out.counters?.renderMs ?? 0) / 1000;
  const restoreS = (out.counters?.restoreMs ?? 0) / 1000;
  return {
    totalS,
    renderS,
    renderCpuS: (out.counters?.renderCpuMs ?? 0) / 1000,
    selfCpuS: cpu.selfS,
    childCpuS: cpu.childrenS,
    restoreS,
    otherS: totalS - renderS - restoreS,
    wholeTableCache: out.counters?.wholeTableCache === 1,
  };
}

export async function runChild(size: number, ns: string, outDir: string): Promise<ChildResult> {
  const baseRssKiB = process.resourceUsage().maxRSS;
  const base = netnsRunner(ns);
  let lastRestore = '';
  let seq = 0;
  const run: CommandRunner = async (cmd, args, opts) => {
    // Only the main restores (the jump-rule insert after a first sync is not one).
    const input = opts?.input ?? '';
    const text = typeof input === 'string' ? input : input.join('');
    if (cmd === 'iptables-restore' && text.includes(':KUBE-SERVICES ')) {
      lastRestore = join(outDir, `tmp-restore-${size}-${seq++}.txt`);
      writeFileSync(lastRestore, text); // as sent; the parent derives the variants
    }
    return base(cmd, args, opts);
  };
  const dp = new IptablesDataplane({
    config: CONFIG,
    run,
    sysctl: runnerSysctl(run),
    clock: realClock,
    syncPeriodMs: 30_000,
  });
  const { services, slices } = objects(size);
  const timed = async (state: SyncState) => {
    const c0 = cpuNow();
    const t0 = performance.now();
    const out = await dp.sync(state);
    const wall = (performance.now() - t0) / 1000;
    return phase(out, wall, cpuSince(c0));
  };
  const peakAfter: Record<string, number> = {};
  const mark = (step: string) => {
    peakAfter[step] = process.resourceUsage().maxRSS;
  };
  mark('objects');
  // The engine's per-family state, fed as the informers would.
  const fam = new FamilyState(
    dp,
    NODE,
    0,
    () => {},
    () => {},
  );
  const node = nodeInfoFromNode(NODE, null, { IPv4: '192.168.0.2' });
  for (const svc of services) fam.services.update(null, svc);
  for (const sl of slices) fam.endpointsTracker.endpointSliceUpdate(sl, false);
  const nextState = (fullSync: boolean): SyncState => {
    const changes = fam.checkout();
    const state = finish(
      fam.stateSteps({
        node,
        changedServices: changes.updatedServices,
        fullSync,
        serviceCIDRs: [],
      }),
    );
    fam.succeeded(state, fullSync ? 0 : null);
    return state;
  };
  const fullState = nextState(true);
  mark('state');
  const full = await timed(fullState);
  mark('full');
  const fullPlain = lastRestore;
  const fullAgain = await timed(fullState);
  mark('fullAgain');
  rmSync(lastRestore);
  // One endpoint of s0 moves.
  const eps0 = Array.from({ length: EPS }, (_, e) => ({ ip: e === 0 ? '10.99.0.1' : epIP(e) }));
  fam.endpointsTracker.endpointSliceUpdate(slice('s0', [{ name: 'http', port: 8080 }], eps0), false);
  const partialState = nextState(false);
  if (partialState.changedServices.size !== 1)
    throw new Error(`partial: ${partialState.changedServices.size} changed services`);
  const partial = await timed(partialState);
  mark('partial');
  const partialPlain = lastRestore;
  const maxRssKiB = process.resourceUsage().maxRSS;
  const c0 = cpuNow();
  const t0 = performance.now();
  await dp.cleanup();
  const cpu = cpuSince(c0);
  const left = (await base('iptables-save', [])).stdout.split('\n').filter((l) => /^:KUBE-/.test(l)).length;
  const cleanup = { wallS: (performance.now() - t0) / 1000, cpuS: cpu.selfS + cpu.childrenS, leftover: left };
  // Both variants of each input: without and with the whole-table cache request.
  const variants = (f: string) => {
    const plain = readText(f)
      .split('\n')
      .filter((l) => l !== '-S')
      .join('\n');
    const p = f.replace(/\.txt$/, '-plain.txt');
    const c = f.replace(/\.txt$/, '-S.txt');
    writeFileSync(p, plain);
    writeFileSync(c, withWholeTableCache(plain));
    rmSync(f);
    return { plain: p, cache: c };
  };
  const fullFiles = variants(fullPlain);
  const partialFiles = variants(partialPlain);
  const natText = readText(fullFiles.plain).split('*nat\n')[1] ?? '';
  return {
    size,
    full,
    fullAgain,
    partial,
    cleanup,
    natRules: (natText.match(/^-A /gm) ?? []).length,
    natChains: (natText.match(/^:/gm) ?? []).length,
    maxRssKiB,
    baseRssKiB,
    peakAfter,
    files: {
      fullPlain: fullFiles.plain,
      fullWithCache: fullFiles.cache,
      partialPlain: partialFiles.plain,
      partialWithCache: partialFiles.cache,
    },
  };
}

function readText(f: string): string {
  return readFileSync(f, 'utf8');
}
