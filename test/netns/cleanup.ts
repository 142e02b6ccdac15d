// Process-wide safety net for namespaces and temporary folders. Every
// namespace a test makes is registered here before it exists; it is removed
// by the owner's normal destroy(), and otherwise by these hooks on process
// exit, SIGINT, SIGTERM and uncaught exceptions (tempDir() folders too). The hooks are synchronous (execFileSync) because
// an 'exit' handler cannot await. Child processes started in a namespace
// (agents, proxies, the API server) are registered too and killed first, so
// nothing keeps running against a namespace that is gone.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NS_ROOT, pidAlive, pidOfNamespace } from './names.js';

const namespaces = new Set<string>();
const children = new Set<number>();
const dirs = new Set<string>();
let installed = false;

/**
 * A fresh folder under the system temp dir (mkdtemp with this prefix). The
 * owner removes it with removeTempDir(); whatever is left is removed when the
 * process ends, also on failure or Ctrl-C.
 */
export function tempDir(prefix: string): string {
  install();
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.add(dir);
  return dir;
}
export function removeTempDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  dirs.delete(dir);
}

export function trackNamespace(name: string): void {
  install();
  namespaces.add(name);
}
export function untrackNamespace(name: string): void {
  namespaces.delete(name);
}
export function trackChild(pid: number | undefined): void {
  if (pid === undefined) return;
  install();
  children.add(pid);
}
export function untrackChild(pid: number | undefined): void {
  if (pid !== undefined) children.delete(pid);
}

/** Kill tracked children, delete tracked namespaces and folders, synchronously. Safe to call twice. */
export function cleanupNowSync(): void {
  for (const pid of children) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  children.clear();
  for (const ns of namespaces) deleteNamespaceSync(ns);
  namespaces.clear();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs.clear();
}

export function deleteNamespaceSync(ns: string): void {
  killPidsInNamespaceSync(ns);
  try {
    execFileSync('ip', ['netns', 'delete', ns], { stdio: 'ignore' });
  } catch {
    /* already gone */
  }
}

/** Processes still running inside ns (e.g. orphans of a crashed run) would keep it alive: kill them. */
function killPidsInNamespaceSync(ns: string): void {
  let out = '';
  try {
    out = execFileSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' });
  } catch {
    return;
  }
  for (const p of out.split(/\s+/).filter(Boolean)) {
    try {
      process.kill(Number(p), 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

/** Names of all namespaces (from /run/netns, where `ip netns add` creates them). */
export function listNamespaces(): string[] {
  try {
    return readdirSync('/run/netns');
  } catch {
    return [];
  }
}

/**
 * Remove `kpt-` namespaces left behind by runs whose process is dead. Returns
 * the names removed. Namespaces of live processes (other runs) are untouched.
 */
export function sweepStaleNamespaces(): string[] {
  const removed: string[] = [];
  for (const ns of listNamespaces()) {
    if (!ns.startsWith(NS_ROOT)) continue;
    const pid = pidOfNamespace(ns);
    if (pid === null || pid === process.pid || pidAlive(pid)) continue;
    deleteNamespaceSync(ns);
    removed.push(ns);
  }
  return removed;
}

function install(): void {
  if (installed) return;
  installed = true;
  process.on('exit', cleanupNowSync);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(sig, () => {
      cleanupNowSync();
      process.kill(process.pid, sig); // re-raise with the default action now that our handler is gone
    });
  }
  // Only when the exception will kill the process: node:test turns uncaught
  // exceptions into test failures and carries on, and 'exit' covers the rest.
  process.on('uncaughtExceptionMonitor', () => {
    if (process.listenerCount('uncaughtException') === 0) cleanupNowSync();
  });
}
