// Go pflag command-line syntax on top of commander. pflag accepts
// `--flag=value`, `--flag value`, booleans as `--flag` / `--flag=false` (a
// boolean never takes the next argument), shorthands `-v=4`, `-v 4`, `-v4`,
// and `--` to end the flags. We first rewrite argv into one unambiguous form
// (`--name=value` for every flag) using the flag table, then let commander
// split and collect the occurrences. Unknown flags and a missing value are
// reported with pflag's wording.

import { Command, CommanderError } from 'commander';
import { ProxyError } from '../core/errors.js';
import { FLAGS, FLAGS_BY_NAME, FLAGS_BY_SHORT, isNoValueFlag } from './flags.js';

export interface SplitArgs {
  /** Raw string values per flag name, in command-line order. */
  readonly occurrences: ReadonlyMap<string, readonly string[]>;
  readonly positional: readonly string[];
}

function flagError(message: string): ProxyError {
  return new ProxyError('KPT_FLAG_INVALID', message);
}

/** Rewrite argv to `--name=value` tokens; returns them and the positional args. */
export function normalizeArgv(argv: readonly string[]): { tokens: string[]; positional: string[] } {
  const tokens: string[] = [];
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const tok = argv[i]!;
    if (tok === '--') {
      positional.push(...argv.slice(i + 1));
      break;
    }
    if (tok.startsWith('--')) {
      const eq = tok.indexOf('=');
      const name = tok.slice(2, eq < 0 ? undefined : eq);
      const flag = FLAGS_BY_NAME.get(name);
      if (!flag || name === '') throw flagError(`unknown flag: --${name}`);
      if (eq >= 0) tokens.push(`--${name}=${tok.slice(eq + 1)}`);
      else if (isNoValueFlag(flag)) tokens.push(`--${name}=true`);
      else {
        if (i + 1 >= argv.length) throw flagError(`flag needs an argument: --${name}`);
        tokens.push(`--${name}=${argv[++i]}`);
      }
      continue;
    }
    if (tok.startsWith('-') && tok.length > 1) {
      i = shorthands(argv, i, tokens);
      continue;
    }
    positional.push(tok);
  }
  return { tokens, positional };
}

/** pflag parseShortArg: "-hv", "-v=4", "-v4", "-v 4". Returns the last index consumed. */
function shorthands(argv: readonly string[], i: number, tokens: string[]): number {
  const tok = argv[i]!;
  let rest = tok.slice(1);
  while (rest.length > 0) {
    const c = rest[0]!;
    const flag = FLAGS_BY_SHORT.get(c);
    if (!flag) throw flagError(`unknown shorthand flag: '${c}' in ${tok}`);
    if (rest[1] === '=') {
      tokens.push(`--${flag.name}=${rest.slice(2)}`);
      return i;
    }
    if (isNoValueFlag(flag)) {
      tokens.push(`--${flag.name}=true`);
      rest = rest.slice(1);
      continue;
    }
    if (rest.length > 1) {
      tokens.push(`--${flag.name}=${rest.slice(1)}`);
      return i;
    }
    if (i + 1 >= argv.length) throw flagError(`flag needs an argument: '${c}' in -${c}`);
    tokens.push(`--${flag.name}=${argv[i + 1]}`);
    return i + 1;
  }
  return i;
}

/** Collect every flag's raw values with commander. Throws ProxyError KPT_FLAG_INVALID. */
export function splitArgs(argv: readonly string[]): SplitArgs {
  const { tokens, positional } = normalizeArgv(argv);
  const program = new Command('kube-proxy');
  program
    .exitOverride()
    .helpOption(false)
    .allowExcessArguments(true)
    .configureOutput({ writeOut: () => undefined, writeErr: () => undefined });
  const keys = new Map<string, string>();
  for (const f of FLAGS) {
    program.option(`--${f.name} <value>`, f.usage, (v: string, prev: string[] | undefined) => [...(prev ?? []), v]);
    keys.set(f.name, program.options.at(-1)!.attributeName());
  }
  try {
    program.parse(tokens, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) throw flagError(err.message.replace(/^error: /, ''));
    throw err;
  }
  const opts = program.opts<Record<string, string[] | undefined>>();
  const occurrences = new Map<string, string[]>();
  for (const [name, key] of keys) {
    const v = opts[key];
    if (v && v.length > 0) occurrences.set(name, v);
  }
  return { occurrences, positional: [...positional, ...program.args] };
}
