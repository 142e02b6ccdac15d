// Start long-running processes inside a namespace (`ip netns exec`) and run
// one-shot `ip` commands. Works both from the TypeScript sources (tests run
// with tsx) and from the tsc build in dist/: a sibling script is started
// with `--import tsx` only when it is a .ts file.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { run, type ExecResult } from '../../src/platform/exec.js';
import { trackChild, untrackChild } from './cleanup.js';

/** The repository root, whether we run from test/netns or dist/test/netns. */
export const REPO_ROOT = fileURLToPath(
  new URL(import.meta.url.includes('/dist/') ? '../../../' : '../../', import.meta.url),
);

/** `node` argv for a TS/JS module that sits next to the caller: base is a URL from import.meta.url. */
export function nodeScript(rel: string, base: string): string[] {
  const isTs = base.endsWith('.ts');
  const file = fileURLToPath(new URL(rel.replace(/\.js$/, isTs ? '.ts' : '.js'), base));
  return isTs ? [process.execPath, '--import', tsxLoader(), file] : [process.execPath, file];
}

/** A .ts entry point of the repository (e.g. test/apiserver/main.ts), run from dist/ when built there. */
export function repoScript(tsPath: string): string[] {
  const built = `${REPO_ROOT}dist/${tsPath.replace(/\.ts$/, '.js')}`;
  const runningFromDist = import.meta.url.includes('/dist/');
  if (runningFromDist && existsSync(built)) return [process.execPath, built];
  return [process.execPath, '--import', tsxLoader(), `${REPO_ROOT}${tsPath}`];
}

function tsxLoader(): string {
  return import.meta.resolve('tsx');
}

export function ip(args: readonly string[]): Promise<ExecResult> {
  return run('ip', args);
}

/** Run a command to completion inside ns. */
export function nsRun(
  ns: string,
  argv: readonly string[],
  opts: { input?: string; allowFailure?: boolean } = {},
): Promise<ExecResult> {
  return run('ip', ['netns', 'exec', ns, ...argv], opts);
}

/** How much of a process's output is kept (the tail). */
const KEEP_LOG_CHARS = 200_000;

export interface NsProcess {
  readonly child: ChildProcess;
  /** Everything the process wrote to stderr (and stdout unless piped elsewhere), for failure messages. */
  log(): string;
  /** A mark in the log (characters written so far); logSince(mark) is what came after it (as far as kept). */
  logMark(): number;
  logSince(mark: number): string;
  /** SIGTERM, then SIGKILL after graceMs; resolves when it has exited. */
  stop(graceMs?: number): Promise<void>;
  readonly exited: Promise<number | null>;
}

/**
 * Spawn a long-running process in ns (through `opts.enter` when given). Its
 * pid is tracked so a crash of the test process still kills it.
 */
export function nsSpawn(
  ns: string,
  argv: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; pipeStdout?: boolean; enter?: readonly string[] } = {},
): NsProcess {
  // `enter` replaces `ip netns exec <ns>` (e.g. nsenter into a shared mount namespace too).
  const [cmd, ...args] = [...(opts.enter ?? ['ip', 'netns', 'exec', ns]), ...argv];
  const child = spawn(cmd!, args, {
    cwd: REPO_ROOT,
    env: { ...process.env, ...opts.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  trackChild(child.pid);
  // The first 8000 characters (start-up) and the last KEEP_LOG_CHARS: a long
  // run's start-up lines stay for the tests that look for them.
  let head = '';
  let buf = '';
  let written = 0;
  const keep = (b: Buffer): void => {
    const text = b.toString('utf8');
    written += text.length;
    if (head.length < 8000) {
      const take = Math.min(text.length, 8000 - head.length);
      head += text.slice(0, take);
      buf = (buf + text.slice(take)).slice(-KEEP_LOG_CHARS);
    } else buf = (buf + text).slice(-KEEP_LOG_CHARS);
  };
  child.stderr?.on('data', keep);
  if (!opts.pipeStdout) child.stdout?.on('data', keep);
  const exited = new Promise<number | null>((res) =>
    child.once('exit', (code) => {
      untrackChild(child.pid);
      res(code);
    }),
  );
  child.on('error', (e) => {
    buf += `spawn error: ${e.message}\n`;
  });
  return {
    child,
    exited,
    log: () => head + buf,
    logMark: () => written,
    logSince: (mark) => {
      const n = written - mark;
      return n <= buf.length ? buf.slice(buf.length - n) : (head + buf).slice(-n);
    },
    async stop(graceMs = 3000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(t);
    },
  };
}
