// Event-loop stalls of the proxy under test, per window (issue 23 item 5: at
// 10k Services no stall over 100 ms during a cold sync or a churn burst, and
// /healthz and /metrics answering within 1 s at all times). Starts
// loopwatch-child.js in the proxy's network namespace and collects its
// windows; phase() labels the windows (cold sync, churn, ...), each with every phase it overlapped.
import { join } from 'node:path';
import * as readline from 'node:readline';
import { nsSpawn, REPO_ROOT, type NsProcess } from '../../test/netns/spawn.js';
import { percentile } from './cluster.js';

export interface LoopWindow {
  /** End of the window, seconds since the watch started. */
  readonly t: number;
  /** The phases the window overlapped (the one it began in, and any begun during it). */
  readonly phases: readonly string[];
  readonly loopP99Ms: number;
  readonly loopMaxMs: number;
  readonly healthMaxMs: number;
  readonly healthSlow: number;
  readonly healthProbes: number;
  readonly healthFailed: number;
  readonly metricsMs: number;
}

export interface LoopSummary {
  readonly phase: string;
  readonly windows: number;
  /** The worst window's p99, and the median window's. */
  readonly p99MaxMs: number;
  readonly p99MedianMs: number;
  /** The longest single stall seen in any window. */
  readonly maxMs: number;
  /** Windows whose longest stall was over 100 ms. */
  readonly windowsOver100: number;
  readonly healthMaxMs: number;
  readonly healthSlow: number;
  readonly metricsMaxMs: number;
}

export class LoopWatch {
  readonly windows: LoopWindow[] = [];
  private readonly proc: NsProcess;
  private readonly start = Date.now();
  private current = 'start';
  private overlapped = new Set(['start']);

  constructor(ns: string, opts: { windowS?: number; probeMs?: number } = {}) {
    this.proc = nsSpawn(
      ns,
      [
        process.execPath,
        join(REPO_ROOT, 'dist/bench/lib/loopwatch-child.js'),
        '--window-s',
        String(opts.windowS ?? 10),
        '--probe-ms',
        String(opts.probeMs ?? 200),
      ],
      { pipeStdout: true },
    );
    readline.createInterface({ input: this.proc.child.stdout! }).on('line', (l) => {
      const w = JSON.parse(l) as Omit<LoopWindow, 'phases'>;
      this.windows.push({ ...w, t: Math.round((w.t - this.start) / 1000), phases: [...this.overlapped] });
      this.overlapped = new Set([this.current]);
    });
  }

  /** A phase begins: the window in progress and those after it belong to it (until the next begins). */
  phase(name: string): void {
    this.current = name;
    this.overlapped.add(name);
  }

  async stop(): Promise<void> {
    await this.proc.stop(2000);
  }

  summary(phase?: string): LoopSummary {
    const ws = this.windows.filter((w) => phase === undefined || w.phases.includes(phase));
    const finite = (xs: number[]) => xs.filter((x) => Number.isFinite(x));
    const p99s = finite(ws.map((w) => w.loopP99Ms));
    const maxes = finite(ws.map((w) => w.loopMaxMs));
    return {
      phase: phase ?? 'all',
      windows: ws.length,
      p99MaxMs: p99s.length ? Math.max(...p99s) : NaN,
      p99MedianMs: percentile(p99s, 50),
      maxMs: maxes.length ? Math.max(...maxes) : NaN,
      windowsOver100: maxes.filter((x) => x > 100).length,
      healthMaxMs: Math.max(0, ...ws.map((w) => w.healthMaxMs)),
      healthSlow: ws.reduce((n, w) => n + w.healthSlow, 0),
      metricsMaxMs: Math.max(0, ...finite(ws.map((w) => w.metricsMs))),
    };
  }
}

/** One line per phase, for a bench's printout. */
export function describeLoop(s: LoopSummary): string {
  return (
    `${s.phase}: ${s.windows} windows, event-loop p99 per window median ${s.p99MedianMs.toFixed(1)} ms, ` +
    `worst ${s.p99MaxMs.toFixed(1)} ms; longest stall ${s.maxMs.toFixed(0)} ms ` +
    `(${s.windowsOver100} windows over 100 ms); /healthz slowest ${s.healthMaxMs} ms (${s.healthSlow} over 1 s), ` +
    `/metrics slowest ${s.metricsMaxMs} ms`
  );
}
