// A CommandRunner backed by the dataplane's Fake, so IptablesDataplane
// can be tested without a kernel. It understands exactly the command lines
// this folder issues (iptables -S/-N/-C/-I/-D/-F/-X, iptables-save,
// iptables-restore, sysctl, nfacct) and fails loudly on anything else.
// A restore input may carry the whole-table cache request (`-S` right after a
// table header, restore.ts); the fake checks its placement and drops it.
import { ProxyError } from '../../core/errors.js';
import { Fake, type IptablesTable } from '../../dataplane/iptables/index.js';
import { ExecError, type CommandRunner, type ExecResult } from '../exec.js';

export interface FakeRunner {
  readonly run: CommandRunner;
  readonly ipt: Fake;
  /** Every command line run, e.g. "iptables -w 5 -t nat -N KUBE-PROXY-CANARY". */
  readonly log: string[];
  /** Every restore input as received (before the `-S` lines are dropped). */
  readonly restoreInputs: string[];
  readonly sysctls: Map<string, string>;
  /** Make the next restore fail with exit 1 (once). */
  failNextRestore(): void;
}

const ok = (stdout = ''): ExecResult => ({ stdout, stderr: '', code: 0 });
const quote = (a: string) => (a.includes(' ') ? `"${a}"` : a);

export function fakeRunner(opts: { version?: string } = {}): FakeRunner {
  const ipt = new Fake();
  const log: string[] = [];
  const restoreInputs: string[] = [];
  const sysctls = new Map<string, string>();
  let failRestore = false;

  const exec = (command: string, args: readonly string[], input: string): ExecResult => {
    if (command === 'sysctl') {
      if (args[0] === '-n')
        return sysctls.has(args[1]!)
          ? ok(`${sysctls.get(args[1]!)}\n`)
          : { stdout: '', stderr: 'unknown key', code: 255 };
      const [k, v] = args[args.length - 1]!.split('=') as [string, string];
      sysctls.set(k, v);
      return ok();
    }
    if (command === 'nfacct') throw new ProxyError('KPT_EXEC_FAILED', 'nfacct: spawn ENOENT');
    if (/^ip6?tables-save$/.test(command))
      return ok(ipt.save(args[0] === '-t' ? (args[1] as IptablesTable) : undefined));
    if (/^ip6?tables-restore$/.test(command)) {
      restoreInputs.push(input);
      if (failRestore) {
        failRestore = false;
        return { stdout: '', stderr: 'iptables-restore: line 3 failed', code: 1 };
      }
      ipt.restore(stripCacheRequest(input), { noflush: args.includes('--noflush') });
      return ok();
    }
    if (/^ip6?tables$/.test(command)) return iptablesCommand(ipt, args, opts.version ?? 'iptables v1.8.9 (nf_tables)');
    throw new ProxyError('KPT_EXEC_FAILED', `fake runner: unexpected command ${command}`);
  };

  const run: CommandRunner = async (command, args, o = {}) => {
    log.push([command, ...args].join(' '));
    let r: ExecResult;
    try {
      const input = o.input ?? '';
      r = exec(command, args, typeof input === 'string' ? input : input.join(''));
    } catch (e) {
      if (e instanceof ProxyError && command !== 'nfacct') r = { stdout: '', stderr: e.message, code: 1 };
      else throw e;
    }
    if (o.discardStdout) r = { ...r, stdout: '' };
    if (o.onStdoutLine) {
      const lines = r.stdout.split('\n');
      if (lines.at(-1) === '') lines.pop();
      for (const l of lines) o.onStdoutLine(l);
      r = { ...r, stdout: '' };
    }
    if (r.code !== 0 && !o.allowFailure) throw new ExecError(command, args, r);
    return r;
  };
  return {
    run,
    ipt,
    log,
    restoreInputs,
    sysctls,
    failNextRestore: () => {
      failRestore = true;
    },
  };
}

/** Drop `-S` lines; they are valid only directly after a `*table` header. */
function stripCacheRequest(input: string): string {
  const lines = input.split('\n');
  lines.forEach((l, i) => {
    if (l === '-S' && !(lines[i - 1] ?? '').startsWith('*'))
      throw new ProxyError('KPT_EXEC_FAILED', `-S at line ${i + 1} not after a table header`);
  });
  return lines.filter((l) => l !== '-S').join('\n');
}

function iptablesCommand(ipt: Fake, args: readonly string[], version: string): ExecResult {
  if (args[0] === '--version') return ok(`${version}\n`);
  const a = [...args];
  if (a[0] === '-w') a.splice(0, 2);
  if (a[0] !== '-t') throw new ProxyError('KPT_EXEC_FAILED', `fake iptables: expected -t in ${args.join(' ')}`);
  const table = a[1] as IptablesTable;
  const [cmd, chain, ...rest] = a.slice(2) as [string, string, ...string[]];
  const one = (line: string) => {
    ipt.restore(`*${table}\n${line}\nCOMMIT\n`, { noflush: true });
    return ok();
  };
  switch (cmd) {
    case '-S':
      return ipt.hasChain(table, chain) ? ok() : { stdout: '', stderr: `chain ${chain} does not exist`, code: 1 };
    case '-N':
      return one(`-N ${chain}`);
    case '-F':
      return one(`-F ${chain}`);
    case '-X':
      return one(`-X ${chain}`);
    case '-C': {
      const text = rest.map(quote).join(' ');
      return ipt.rules(table, chain).includes(text) ? ok() : { stdout: '', stderr: 'Bad rule', code: 1 };
    }
    case '-I': {
      if (rest[0] !== '1') throw new ProxyError('KPT_EXEC_FAILED', 'fake iptables: only -I CHAIN 1 is supported');
      ipt.ensureRule('prepend', table, chain, rest.slice(1));
      return ok();
    }
    case '-D':
      return one(`-D ${chain} ${rest.map(quote).join(' ')}`);
  }
  throw new ProxyError('KPT_EXEC_FAILED', `fake iptables: unsupported ${args.join(' ')}`);
}
