// Another tool's tc program for coexistence tests: test/ebpf/foreign.c
// compiled with clang (with BTF, which tc's loader needs) into a temporary
// folder. Compiled once per process; the folder goes when the process ends
// (also on failure or Ctrl-C), so the tests that load it need not clean up.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../netns/cleanup.js';
import type { BpfNode } from './bpfnode.js';

let compiled: string | undefined;

export function compileForeign(): string {
  if (compiled) return compiled;
  const obj = join(tempDir('kpt-foreign-'), 'foreign.o');
  const src = fileURLToPath(
    new URL(import.meta.url.includes('/dist/') ? '../../../test/ebpf/foreign.c' : './foreign.c', import.meta.url),
  );
  const arch = process.arch === 'arm64' ? 'aarch64' : 'x86_64';
  execFileSync('clang', ['-O2', '-g', '-target', 'bpf', `-I/usr/include/${arch}-linux-gnu`, '-c', src, '-o', obj]);
  compiled = obj;
  return obj;
}

/**
 * Put another tool's programs on the node's eth0 next to ours: a cls_bpf
 * filter in the clsact qdisc (DIRECTION, PREF) and a tcx program on ingress,
 * pinned at /sys/fs/bpf/foreign-tcx so that it outlives the loader.
 */
export async function attachForeign(bpf: BpfNode, direction: 'ingress' | 'egress', pref: number): Promise<void> {
  const obj = compileForeign();
  await bpf.exec(['tc', 'qdisc', 'add', 'dev', 'eth0', 'clsact'], { allowFailure: true }); // ours may have made it
  await bpf.exec([
    'tc',
    'filter',
    'add',
    'dev',
    'eth0',
    direction,
    'pref',
    String(pref),
    'bpf',
    'da',
    'obj',
    obj,
    'sec',
    'tc',
  ]);
  await bpf.helper({ cmd: 'foreign', object: obj, ifname: 'eth0', pin: '/sys/fs/bpf/foreign-tcx' });
}
