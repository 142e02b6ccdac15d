// Namespace naming for test clusters. Every run gets its own prefix
// `kpt-<pid>-<rand>-` so concurrent runs never collide and a sweeper can tell
// whether the run that made a namespace is still alive (its pid). Interface
// names never carry the prefix: each interface lives inside a namespace of
// this run, so short fixed names (eth0, br0, n1...) stay under the 15-char
// IFNAMSIZ limit.
import { randomBytes } from 'node:crypto';

export const NS_ROOT = 'kpt-';

/** A fresh prefix for this process, e.g. `kpt-4242-a1b2-`. */
export function newPrefix(pid = process.pid): string {
  return `${NS_ROOT}${pid}-${randomBytes(2).toString('hex')}-`;
}

/** The pid encoded in a namespace name made by newPrefix, or null for names that are not ours. */
export function pidOfNamespace(name: string): number | null {
  const m = /^kpt-(\d+)-[0-9a-f]{4}-/.exec(name);
  return m ? Number(m[1]) : null;
}

/** True if a process with this pid exists (signal 0 probes without sending). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
