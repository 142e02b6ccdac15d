// A thin, typed wrapper over the iptables binaries of one IP family (upstream
// pkg/util/iptables Interface): single-rule commands for the jump rules and
// canaries, iptables-save, iptables-restore. Every command waits for the
// xtables lock (-w), like upstream.
import type { IPFamily } from '../../core/types.js';
import type { CommandRunner } from '../exec.js';

export type Table = 'filter' | 'nat' | 'mangle';

/** Seconds to wait for the xtables lock (upstream WaitSecondsValue). */
const WAIT = ['-w', '5'];

export interface RestoreFlags {
  /** --noflush: keep chains and rules the input does not mention. */
  readonly noflush: boolean;
  /** --counters: keep the counters given in the input. */
  readonly counters: boolean;
  /** Do not buffer stdout (see restore.ts withWholeTableCache). */
  readonly discardStdout?: boolean;
}

export class Iptables {
  readonly cmd: string;
  readonly saveCmd: string;
  readonly restoreCmd: string;

  constructor(
    readonly family: IPFamily,
    private readonly run: CommandRunner,
  ) {
    const p = family === 'IPv4' ? 'iptables' : 'ip6tables';
    this.cmd = p;
    this.saveCmd = `${p}-save`;
    this.restoreCmd = `${p}-restore`;
  }

  /** `iptables --version` output, e.g. "iptables v1.8.9 (nf_tables)". */
  async versionString(): Promise<string> {
    return (await this.run(this.cmd, ['--version'])).stdout.trim();
  }

  /** True when the chain exists (upstream ChainExists uses -S CHAIN). */
  async chainExists(table: Table, chain: string): Promise<boolean> {
    const r = await this.run(this.cmd, [...WAIT, '-t', table, '-S', chain, '1'], { allowFailure: true });
    return r.code === 0;
  }

  /** Create the chain unless it exists. Returns true when it existed. */
  async ensureChain(table: Table, chain: string): Promise<boolean> {
    const r = await this.run(this.cmd, [...WAIT, '-t', table, '-N', chain], { allowFailure: true });
    if (r.code === 0) return false;
    if (await this.chainExists(table, chain)) return true;
    // Re-run without allowFailure to surface the real error.
    await this.run(this.cmd, [...WAIT, '-t', table, '-N', chain]);
    return false;
  }

  /** -C: does this exact rule exist in chain? */
  async ruleExists(table: Table, chain: string, args: readonly string[]): Promise<boolean> {
    const r = await this.run(this.cmd, [...WAIT, '-t', table, '-C', chain, ...args], { allowFailure: true });
    return r.code === 0;
  }

  /** Insert the rule at position 1 unless -C finds it. Returns true when it existed. */
  async ensureRulePrepended(table: Table, chain: string, args: readonly string[]): Promise<boolean> {
    if (await this.ruleExists(table, chain, args)) return true;
    await this.run(this.cmd, [...WAIT, '-t', table, '-I', chain, '1', ...args]);
    return false;
  }

  /** -I CHAIN 1: insert unconditionally (callers check with ruleExists first). */
  async prependRule(table: Table, chain: string, args: readonly string[]): Promise<void> {
    await this.run(this.cmd, [...WAIT, '-t', table, '-I', chain, '1', ...args]);
  }

  /** Delete one copy of the rule if present. Returns true when one was deleted. */
  async deleteRule(table: Table, chain: string, args: readonly string[]): Promise<boolean> {
    if (!(await this.ruleExists(table, chain, args))) return false;
    await this.run(this.cmd, [...WAIT, '-t', table, '-D', chain, ...args]);
    return true;
  }

  /** Flush and delete a chain if it exists. Returns true when it existed. */
  async deleteChain(table: Table, chain: string): Promise<boolean> {
    if (!(await this.chainExists(table, chain))) return false;
    await this.run(this.cmd, [...WAIT, '-t', table, '-F', chain]);
    await this.run(this.cmd, [...WAIT, '-t', table, '-X', chain]);
    return true;
  }

  /** iptables-save of one table, or of all tables. */
  async save(table?: Table): Promise<string> {
    return (await this.run(this.saveCmd, table ? ['-t', table] : [])).stdout;
  }

  /** iptables-save of one table, handed over line by line instead of as one string. */
  async saveLines(table: Table, onLine: (line: string) => void): Promise<void> {
    await this.run(this.saveCmd, ['-t', table], { onStdoutLine: onLine });
  }

  /** iptables-restore; the input (one string or pieces streamed in order) is applied atomically per table section. */
  async restore(text: string | readonly string[], flags: RestoreFlags): Promise<void> {
    const args = [...WAIT];
    if (flags.noflush) args.push('--noflush');
    if (flags.counters) args.push('--counters');
    await this.run(this.restoreCmd, args, { input: text, discardStdout: flags.discardStdout === true });
  }
}
