// ipsets through the ipset tool: one `ipset save` to read, one
// `ipset restore` per sync to write every change (measured against one
// `ipset add` per entry in bench/ipvs-kernel.ts: restore is the faster).
// Commands run through the injected CommandRunner, so tests and benchmarks
// target a network namespace.
import type { CommandRunner } from '../exec.js';

/** One set as `ipset save` shows it. */
export interface SavedSet {
  readonly name: string;
  /** "hash:ip,port family inet hashsize 1024 maxelem 65536 ...": type and options. */
  readonly header: string;
  readonly entries: Set<string>;
}

/** Parse `ipset save` output (create and add lines). */
export function parseIpsetSave(text: string): Map<string, SavedSet> {
  const sets = new Map<string, SavedSet>();
  for (const line of text.split('\n')) {
    const sp1 = line.indexOf(' ');
    if (sp1 < 0) continue;
    const verb = line.slice(0, sp1);
    const sp2 = line.indexOf(' ', sp1 + 1);
    const name = line.slice(sp1 + 1, sp2 < 0 ? undefined : sp2);
    const rest = sp2 < 0 ? '' : line.slice(sp2 + 1);
    if (verb === 'create') sets.set(name, { name, header: rest, entries: new Set() });
    else if (verb === 'add') sets.get(name)?.entries.add(rest.split(' ')[0]!);
  }
  return sets;
}

export class IpsetTool {
  constructor(private readonly run: CommandRunner) {}

  /** The sets with these names that exist (all of them when names is undefined). */
  async save(names?: readonly string[]): Promise<Map<string, SavedSet>> {
    if (names === undefined) return parseIpsetSave((await this.run('ipset', ['save'])).stdout);
    // One `ipset save` of everything is one process; per-set saves would be many.
    const all = parseIpsetSave((await this.run('ipset', ['save'])).stdout);
    const want = new Set(names);
    return new Map([...all].filter(([n]) => want.has(n)));
  }

  /** Apply a restore script (create/add/del/flush/destroy lines); rejects on the first failing line. */
  async restore(script: string): Promise<void> {
    if (script.trim() === '') return;
    await this.run('ipset', ['restore'], { input: script });
  }

  /** Destroy the sets that exist among names; a set still referenced by a rule fails the call. */
  async destroy(names: readonly string[]): Promise<string[]> {
    const existing = [...(await this.save(names)).keys()];
    if (existing.length) await this.restore(existing.map((n) => `destroy ${n}`).join('\n') + '\n');
    return existing;
  }

  async version(): Promise<string> {
    const r = await this.run('ipset', ['version']);
    return /v(\d+\.\d+)/.exec(r.stdout)?.[1] ?? '';
  }
}
