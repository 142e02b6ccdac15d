// Another tool's tc program for coexistence tests: test/ebpf/foreign.c
// compiled with clang (with BTF, which tc's loader needs) into a temporary file.
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export function compileForeign(): string {
  const obj = join(mkdtempSync(join(tmpdir(), 'kpt-foreign-')), 'foreign.o');
  const src = fileURLToPath(
    new URL(import.meta.url.includes('/dist/') ? '../../../test/ebpf/foreign.c' : './foreign.c', import.meta.url),
  );
  const arch = process.arch === 'arm64' ? 'aarch64' : 'x86_64';
  execFileSync('clang', ['-O2', '-g', '-target', 'bpf', `-I/usr/include/${arch}-linux-gnu`, '-c', src, '-o', obj]);
  return obj;
}
