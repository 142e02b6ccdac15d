// What kind of saved state a file holds (`explain --from FILE`), told from
// its first lines. Kept apart from the readers so that the mode registry,
// which every proxy loads, does not load explain's parsers.

/** iptables-save output. */
export const isIptablesDump = (text: string): boolean => /^\*(nat|filter|mangle|raw)\s*$/m.test(text);

/** An nft listing of the kube-proxy table. */
export const isNftablesDump = (text: string): boolean => /^table ip6? kube-proxy \{/m.test(text);

/** An nft listing holding the userspace mode's redirect table. */
export const isUserspaceDump = (text: string): boolean => /^table ip6? kube-proxy-userspace \{/m.test(text);

/** An IPVS mode bundle (ipvsadm -Sn first, or its rules). */
export const isIpvsBundle = (text: string): boolean => /^(# ipvsadm -Sn|-A (-t|-u|--sctp-service) \S+ -s )/m.test(text);

/** The `kind` of the JSON `explain --save` writes for ebpf mode's maps. */
export const EBPF_DUMP_KIND = 'kube-proxy-ts ebpf maps';

/** ebpf mode's maps saved by `explain --save`. */
export const isEbpfDump = (text: string): boolean =>
  text.trimStart().startsWith('{') && text.includes(`"kind":"${EBPF_DUMP_KIND}"`);
