// How the sync benches start their children: as compiled JavaScript (tsc
// into bench/out/dist), so a child's RSS and heap hold no tsx loader (~35 MiB),
// with the V8 flags the real proxy runs with.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The node arguments that run the bench at `selfUrl` (its import.meta.url)
 * compiled: itself when it already is JavaScript, else its copy compiled
 * into `out`/dist, else (tsc emitted nothing) itself under tsx.
 */
export function compiledScript(selfUrl: string, repo: string, out: string): string[] {
  const self = fileURLToPath(selfUrl);
  if (self.endsWith('.js')) return [self];
  const dist = join(out, 'dist');
  spawnSync('npx', ['tsc', '-p', join(repo, 'tsconfig.json'), '--outDir', dist, '--sourceMap', 'false'], {
    stdio: 'ignore',
  });
  const js = join(dist, 'bench', self.slice(self.lastIndexOf('/') + 1).replace(/\.ts$/, '.js'));
  if (existsSync(js)) return [js];
  console.log('note: tsc emitted nothing; the children run under tsx (RSS +~35 MiB)');
  return ['--import', 'tsx', self];
}

/** The node flags on bin/kube-proxy-ts's `#!/usr/bin/env -S node ...` line. */
export function binaryNodeFlags(repo: string): string[] {
  const first = readFileSync(join(repo, 'bin', 'kube-proxy-ts'), 'utf8').split('\n')[0]!;
  return (/\bnode\b(.*)$/.exec(first)?.[1]?.trim() ?? '').split(' ').filter(Boolean);
}

/** A child's end: its result as one JSON line on stdout (the parent reads the last line), or exit 1. */
export function printResult(result: Promise<unknown>): void {
  result.then(
    (r) => {
      console.log(JSON.stringify(r));
      process.exit(0);
    },
    (e: unknown) => {
      console.error(e);
      process.exit(1);
    },
  );
}
