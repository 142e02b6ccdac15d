// The one way this program runs external commands (iptables-restore, nft,
// conntrack, ip, sysctl readers...): a CommandRunner, for this host's own
// network namespace (hostRunner, what the proxy uses in production) or for a
// named one (netnsRunner, `ip netns exec <ns> ...`, what the tests, the
// benchmarks and the --netns options of the tools use). Every mode and tool
// takes a CommandRunner, so none of them can be pointed at the root
// namespace by accident.
//
// Input is written in 1 MiB slices (a large restore payload never exists
// twice at once); stdout can be discarded when a command prints what nobody
// reads. A failure is a ProxyError KPT_EXEC_FAILED (ExecError) carrying the
// command line as the caller wrote it (without the netns prefix), the exit
// code and stderr, so callers log it and branch on the code, never on text.
import { spawn } from 'node:child_process';
import { ProxyError } from '../core/errors.js';
import { injectedFault } from './faults.js';

export interface ExecResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly code: number;
}

export interface RunOptions {
  /** stdin: one string, or pieces written in order (never joined; see writeInChunks). */
  readonly input?: string | readonly string[];
  /** Resolve instead of rejecting on a non-zero exit. */
  readonly allowFailure?: boolean;
  /** Send stdout to /dev/null instead of buffering it (e.g. iptables-restore printing the whole table). */
  readonly discardStdout?: boolean;
  /**
   * Hand stdout to this function line by line as it arrives instead of
   * buffering it (`iptables-save` of a large cluster's nat table is big, and
   * its callers keep a few lines of it). The result's stdout is then ''.
   */
  readonly onStdoutLine?: (line: string) => void;
  readonly env?: NodeJS.ProcessEnv;
  readonly signal?: AbortSignal;
}
/** Kept for the callers that still name it so. */
export type ExecOptions = RunOptions;

export class ExecError extends ProxyError {
  constructor(
    readonly command: string,
    readonly args: readonly string[],
    readonly result: ExecResult,
  ) {
    super(
      'KPT_EXEC_FAILED',
      `${command} ${args.join(' ')} exited ${result.code}: ${result.stderr.trim().slice(0, 2000)}`,
    );
    this.name = 'ExecError';
  }
}

/** Runs `command args` (possibly wrapped); rejects with ExecError on failure. */
export type CommandRunner = (command: string, args: readonly string[], opts?: RunOptions) => Promise<ExecResult>;

/** A runner that prefixes every command line, e.g. ['ip', 'netns', 'exec', ns]. */
export function prefixRunner(prefix: readonly string[]): CommandRunner {
  return (command, args, opts = {}) => {
    const argv = [...prefix, command, ...args];
    return spawnCapture(argv[0]!, argv.slice(1), opts, command, args);
  };
}

/** Commands on this host's own namespace: what the proxy uses in production. */
export const hostRunner: CommandRunner = prefixRunner([]);

/** Commands inside the named network namespace (tests, benchmarks, --netns). */
export function netnsRunner(ns: string): CommandRunner {
  return prefixRunner(['ip', 'netns', 'exec', ns]);
}

/** netnsRunner(netns), or hostRunner when no namespace is named. */
export function commandRunner(netns?: string): CommandRunner {
  return netns === undefined ? hostRunner : netnsRunner(netns);
}

/** hostRunner as a function: run one command on this host's namespace. */
export function run(command: string, args: readonly string[], opts: RunOptions = {}): Promise<ExecResult> {
  return hostRunner(command, args, opts);
}

function spawnCapture(
  cmd: string,
  argv: readonly string[],
  opts: RunOptions,
  shownCmd: string,
  shownArgs: readonly string[],
): Promise<ExecResult> {
  if (injectedFault(`exec-${shownCmd}`)) {
    return Promise.reject(new ExecError(shownCmd, shownArgs, { stdout: '', stderr: 'injected fault', code: 1 }));
  }
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, argv, {
      stdio: ['pipe', opts.discardStdout ? 'ignore' : 'pipe', 'pipe'],
      env: opts.env ?? process.env,
      signal: opts.signal,
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    if (opts.onStdoutLine) splitLines(child.stdout, opts.onStdoutLine);
    else child.stdout?.on('data', (b: Buffer) => out.push(b));
    child.stderr?.on('data', (b: Buffer) => err.push(b));
    child.on('error', (e) => reject(new ProxyError('KPT_EXEC_FAILED', `${shownCmd}: ${e.message}`, { cause: e })));
    child.on('close', (code, sig) => {
      const result = {
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        code: code ?? (sig ? 128 : 1),
      };
      if (result.code !== 0 && !opts.allowFailure) reject(new ExecError(shownCmd, shownArgs, result));
      else resolve(result);
    });
    // EPIPE when the command exits before reading its input is reported by 'close'.
    child.stdin?.on('error', () => {});
    if (child.stdin) void writeInChunks(child.stdin, opts.input ?? '');
  });
}

/** Calls onLine for each line of the stream as it arrives (the last one also without a newline). */
function splitLines(stream: NodeJS.ReadableStream | null, onLine: (line: string) => void): void {
  if (!stream) return;
  let rest = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    const text = rest + chunk;
    let from = 0;
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', from)) {
      onLine(text.slice(from, nl));
      from = nl + 1;
    }
    rest = text.slice(from);
  });
  stream.on('end', () => {
    if (rest !== '') onLine(rest);
  });
}

/** Bytes per stdin write: a large restore input never exists twice (string + Buffer) at once. */
const CHUNK = 1 << 20;

/** The input as writes of about CHUNK characters: big strings sliced, small pieces batched. */
function* chunksOf(input: string | readonly string[]): Generator<string> {
  if (typeof input === 'string') {
    for (let i = 0; i < input.length; i += CHUNK) yield input.slice(i, i + CHUNK);
    return;
  }
  let batch: string[] = [];
  let size = 0;
  for (const part of input) {
    if (part.length >= CHUNK) {
      if (size > 0) yield batch.join('');
      batch = [];
      size = 0;
      yield* chunksOf(part);
      continue;
    }
    batch.push(part);
    size += part.length;
    if (size >= CHUNK) {
      yield batch.join('');
      batch = [];
      size = 0;
    }
  }
  if (size > 0) yield batch.join('');
}

/**
 * Write input in ~1 MiB pieces, waiting for 'drain', so that only one small
 * Buffer exists at a time. Stops early when the pipe closes or fails (the
 * command exited; its status is reported by 'close').
 */
async function writeInChunks(
  stdin: NodeJS.WritableStream & { destroyed?: boolean },
  input: string | readonly string[],
): Promise<void> {
  let closed = false;
  const onEnd = () => {
    closed = true;
  };
  stdin.once('close', onEnd);
  stdin.once('error', onEnd);
  for (const chunk of chunksOf(input)) {
    if (closed) break;
    if (!stdin.write(chunk)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          stdin.off('drain', done);
          stdin.off('close', done);
          stdin.off('error', done);
          resolve();
        };
        stdin.once('drain', done);
        stdin.once('close', done);
        stdin.once('error', done);
      });
    }
  }
  if (!closed) stdin.end();
}
