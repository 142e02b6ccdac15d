// Reading and writing sysctls (upstream utilsysctl). Injected into the
// dataplane: production writes this namespace's /proc/sys; tests and the
// benchmark run `sysctl` inside their network namespace so the root
// namespace is never touched.
import { readFile, writeFile } from 'node:fs/promises';
import type { CommandRunner } from '../exec.js';

export interface Sysctl {
  /** Value as text, or null when the key does not exist. name uses '/' (net/ipv4/conf/all/route_localnet). */
  get(name: string): Promise<string | null>;
  set(name: string, value: string): Promise<void>;
}

/** /proc/sys of the namespace this process runs in. */
export const procSysctl: Sysctl = {
  async get(name) {
    try {
      return (await readFile(`/proc/sys/${name}`, 'utf8')).trim();
    } catch {
      return null;
    }
  },
  async set(name, value) {
    await writeFile(`/proc/sys/${name}`, `${value}\n`);
  },
};

/** `sysctl` through a runner (e.g. inside a network namespace). */
export function runnerSysctl(run: CommandRunner): Sysctl {
  const key = (name: string) => name.replaceAll('/', '.');
  return {
    async get(name) {
      const r = await run('sysctl', ['-n', key(name)], { allowFailure: true });
      return r.code === 0 ? r.stdout.trim() : null;
    },
    async set(name, value) {
      await run('sysctl', ['-q', '-w', `${key(name)}=${value}`]);
    },
  };
}
