// The command shape `diff` and `migrate` share: --help, the tool's own flags
// taken out and the rest parsed as the proxy parses its command line (so
// they read the same config file and flags), an optional network namespace
// to look into, text or JSON out, and diff's exit status: 0 when nothing
// would change, 1 when something would, 2 when the check could not be made.
import { readFile } from 'node:fs/promises';
import { hostRunner, netnsRunner, type CommandRunner } from '../platform/exec.js';
import { PROCESS_IO, type CmdIO } from './explain.js';
import { parseCommandLine, type RunCommand } from './options.js';

export interface CheckArgs {
  readonly rest: string[];
  readonly netns: string | null;
  readonly output: 'text' | 'json';
}

export interface CheckTool<A extends CheckArgs, R> {
  readonly usage: string;
  /** Take the tool's own flags out (throws on bad ones). */
  split(argv: readonly string[]): A;
  compute(cmd: RunCommand, args: A, run: CommandRunner, signal: AbortSignal): Promise<R>;
  text(r: R): string;
  /** Whether the result says something would change (exit 1). */
  changes(r: R): boolean;
}

export async function runCheckTool<A extends CheckArgs, R>(
  tool: CheckTool<A, R>,
  argv: string[],
  io: CmdIO = PROCESS_IO,
): Promise<number> {
  try {
    if (argv.includes('--help') || argv.includes('-h')) {
      io.out(tool.usage);
      return 0;
    }
    const args = tool.split(argv);
    const cmd = await parseCommandLine(args.rest, { readFile: (p) => readFile(p, 'utf8') });
    if (cmd.kind !== 'run') {
      io.out(tool.usage);
      return 0;
    }
    const run = args.netns === null ? hostRunner : netnsRunner(args.netns);
    const r = await tool.compute(cmd, args, run, AbortSignal.timeout(60_000));
    io.out(args.output === 'json' ? `${JSON.stringify(r, null, 2)}\n` : tool.text(r));
    return tool.changes(r) ? 1 : 0;
  } catch (err) {
    io.err(`Error: ${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  }
}
