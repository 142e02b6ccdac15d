// What the programs may ask of the running kernel that its version tells.
import { release } from 'node:os';

/**
 * bpf_fib_lookup's BPF_FIB_LOOKUP_SRC (the source address a route prefers), which the programs' own
 * masquerade needs: Linux 6.7. Before it, masquerade goes through the mark and the kube-proxy-ebpf
 * nftables table (src/bpf/snat.h). A release the pattern cannot read counts as new.
 */
export function hasFibLookupSrc(rel: string = release()): boolean {
  const m = /^(\d+)\.(\d+)/.exec(rel);
  if (!m) return true;
  const major = Number(m[1]);
  return major > 6 || (major === 6 && Number(m[2]) >= 7);
}
