// Run an external command (iptables-restore, nft, conntrack, ip...) with
// optional stdin, capturing output. Failures are ProxyError KPT_EXEC_FAILED
// carrying the command line, exit code and stderr, so callers can log them
// and branch on the code, never on text.
import { spawn } from 'node:child_process';
import { ProxyError } from '../core/errors.js';

export interface ExecResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly code: number;
}

export interface ExecOptions {
  readonly input?: string;
  /** Resolve instead of rejecting on a non-zero exit. */
  readonly allowFailure?: boolean;
  readonly env?: NodeJS.ProcessEnv;
  readonly signal?: AbortSignal;
}

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

export function run(command: string, args: readonly string[], opts: ExecOptions = {}): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: opts.env ?? process.env,
      signal: opts.signal,
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', (e) => reject(new ProxyError('KPT_EXEC_FAILED', `${command}: ${e.message}`, { cause: e })));
    child.on('close', (code, sig) => {
      const result = {
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        code: code ?? (sig ? 128 : 1),
      };
      if (result.code !== 0 && !opts.allowFailure) reject(new ExecError(command, args, result));
      else resolve(result);
    });
    // EPIPE when the command exits before reading its input is reported by 'close'.
    child.stdin.on('error', () => {});
    child.stdin.end(opts.input ?? '');
  });
}
