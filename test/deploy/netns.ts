// Network namespaces for the deploy tests: names `kpt-dep-<pid>-<rand>-<tag>`,
// registered with the shared safety net (test/netns/cleanup.ts) before they
// exist, so they are removed on exit, failure, SIGINT and SIGTERM.

import { randomBytes } from 'node:crypto';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../netns/cleanup.js';
import { ip, nsRun } from '../netns/spawn.js';

const PREFIX = `kpt-dep-${process.pid}-${randomBytes(2).toString('hex')}-`;

export interface TestNamespace {
  readonly name: string;
  /** Run argv inside; rejects on a non-zero exit unless allowFailure. */
  run(
    argv: readonly string[],
    opts?: { input?: string; allowFailure?: boolean },
  ): Promise<{ code: number; stdout: string; stderr: string }>;
  dispose(): void;
}

let seq = 0;

/** A fresh namespace with loopback up. */
export async function newNamespace(tag: string): Promise<TestNamespace> {
  const name = `${PREFIX}${tag}${seq++}`;
  trackNamespace(name);
  await ip(['netns', 'add', name]);
  await nsRun(name, ['ip', 'link', 'set', 'lo', 'up']);
  return {
    name,
    run: (argv, opts = {}) => nsRun(name, argv, opts),
    dispose: () => {
      deleteNamespaceSync(name);
      untrackNamespace(name);
    },
  };
}
