// What the programs may ask of the running kernel.
import { closeSync, openSync, readSync } from 'node:fs';
import { release } from 'node:os';

/** The running kernel's own BTF: the names of its types and enum values are in its string section. */
export const KERNEL_BTF = '/sys/kernel/btf/vmlinux';

/**
 * bpf_fib_lookup's BPF_FIB_LOOKUP_SRC (the source address a route prefers), which the programs' own
 * masquerade needs. Without it, masquerade goes through the mark and the kube-proxy-ebpf nftables table
 * (src/bpf/snat.h). The kernel's BTF names the flag when the helper knows it, which also finds it where a
 * distribution backported it (Debian 12's 6.1 has it); without BTF the release decides (Linux 6.7).
 */
export function hasFibLookupSrc(btf: string = KERNEL_BTF, rel: string = release()): boolean {
  if (btf === KERNEL_BTF && rel === release()) return (runningKernel ??= fibLookupSrcOf(btf, rel));
  return fibLookupSrcOf(btf, rel);
}
/** The running kernel's answer, read once per process (each family's dataplane asks). */
let runningKernel: boolean | undefined;

function fibLookupSrcOf(btf: string, rel: string): boolean {
  return fileNames(btf, 'BPF_FIB_LOOKUP_SRC') ?? releaseHasFibLookupSrc(rel);
}

/** Linux 6.7 and later; a release the pattern cannot read counts as new. */
export function releaseHasFibLookupSrc(rel: string): boolean {
  const m = /^(\d+)\.(\d+)/.exec(rel);
  if (!m) return true;
  const major = Number(m[1]);
  return major > 6 || (major === 6 && Number(m[2]) >= 7);
}

/**
 * Whether a BTF file holds `name` as a whole string (NUL on both sides); null when it cannot be read.
 * Read in pieces, so that asking costs no buffer the size of the kernel's BTF (several MB).
 */
export function fileNames(path: string, name: string, chunk = 1 << 16): boolean | null {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return null;
  }
  try {
    const needle = Buffer.from(`\0${name}\0`, 'latin1');
    const buf = Buffer.alloc(chunk + needle.length);
    // Each piece starts with the previous piece's last needle.length - 1 bytes, so no match is split.
    let kept = 0;
    for (;;) {
      const n = readSync(fd, buf, kept, chunk, null);
      if (n <= 0) return false;
      const end = kept + n;
      if (buf.subarray(0, end).includes(needle)) return true;
      kept = Math.min(needle.length - 1, end);
      buf.copy(buf, 0, end - kept, end);
    }
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}
