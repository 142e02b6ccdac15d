// The ebpf mode's only netfilter state: one small nftables table per family
// that turns the masquerade mark into `masquerade fully-random`, exactly as
// upstream's masquerading chain does. The programs decide which connections
// are masqueraded (the same decisions as upstream's KUBE-MARK-MASQ rules)
// and set the mark on their packets; source NAT itself, its port choice and
// the translation of replies stay with the kernel's connection tracker.
import type { IPFamily } from '../../core/types.js';

export const MASQ_TABLE = 'kube-proxy-ebpf';

export function nftFamilyOf(family: IPFamily): 'ip' | 'ip6' {
  return family === 'IPv4' ? 'ip' : 'ip6';
}

/**
 * An `nft -f` script that (re)creates the table atomically: adding and
 * deleting first makes it work whether or not the table exists.
 */
export function masqueradeTableScript(family: IPFamily, mark: number): string {
  const f = nftFamilyOf(family);
  const m = `0x${mark.toString(16)}`;
  return [
    `add table ${f} ${MASQ_TABLE}`,
    `delete table ${f} ${MASQ_TABLE}`,
    `table ${f} ${MASQ_TABLE} {`,
    `  comment "kube-proxy-ts ebpf mode: masquerade what the BPF programs marked"`,
    '  chain masquerading {',
    '    type nat hook postrouting priority srcnat; policy accept;',
    `    meta mark & ${m} == ${m} meta mark set meta mark ^ ${m} masquerade fully-random comment "kubernetes service traffic requiring SNAT"`,
    '  }',
    '}',
    '',
  ].join('\n');
}

export function deleteMasqueradeTableScript(family: IPFamily): string {
  const f = nftFamilyOf(family);
  return `add table ${f} ${MASQ_TABLE}\ndelete table ${f} ${MASQ_TABLE}\n`;
}
