// Whether this host can run the nftables mode (upstream server_linux.go and
// knftables): a kernel of at least 5.13 (the nf_tables features the rules
// use) and an `nft` of at least 1.0.1 (the syntax we write). Pure: the
// platform side (src/platform/nftables/versions.ts) reads the versions.
// KUBE_PROXY_NFTABLES_SKIP_KERNEL_VERSION_CHECK set to anything non-empty
// skips the kernel check only, as upstream (for kernels with backports).

export const NFTABLES_MIN_KERNEL = [5, 13, 0] as const;
export const NFTABLES_MIN_NFT = [1, 0, 1] as const;
export const SKIP_KERNEL_CHECK_ENV = 'KUBE_PROXY_NFTABLES_SKIP_KERNEL_VERSION_CHECK';

export interface NftablesHostVersions {
  /** `uname -r`, e.g. "6.1.0-27-amd64". */
  readonly kernelRelease: string;
  /** `nft --version` output, e.g. "nftables v1.0.6 (Lester Gooch #5)"; null when nft could not be run. */
  readonly nftVersion: string | null;
  /** The value of KUBE_PROXY_NFTABLES_SKIP_KERNEL_VERSION_CHECK, if set. */
  readonly skipKernelCheck?: string | undefined;
}

/** The leading "a.b[.c]" of a version string as numbers, or null. */
export function parseVersion(s: string): number[] | null {
  const m = /(\d+)\.(\d+)(?:\.(\d+))?/.exec(s);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)] : null;
}

function lessThan(a: readonly number[], b: readonly number[]): boolean {
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) < (b[i] ?? 0);
  return false;
}

const v = (x: readonly number[]) => x.join('.');

/** Why nftables mode cannot start here, or null when it can. */
export function nftablesUnsupportedReason(h: NftablesHostVersions): string | null {
  if (!h.skipKernelCheck) {
    const k = parseVersion(h.kernelRelease);
    if (k === null)
      return `cannot tell the kernel version from ${JSON.stringify(h.kernelRelease)}; set ${SKIP_KERNEL_CHECK_ENV}=1 to skip this check`;
    if (lessThan(k, NFTABLES_MIN_KERNEL))
      return `nftables mode needs kernel ${v(NFTABLES_MIN_KERNEL)} or later, this one is ${h.kernelRelease}; use --proxy-mode iptables, or set ${SKIP_KERNEL_CHECK_ENV}=1 if this kernel has the needed nf_tables backports`;
  }
  if (h.nftVersion === null) return 'nftables mode needs the `nft` command (package nftables), which could not be run';
  const n = /v(\d+\.\d+(?:\.\d+)?)/.exec(h.nftVersion);
  const nv = n ? parseVersion(n[1]!) : parseVersion(h.nftVersion);
  if (nv === null) return `cannot tell the nft version from ${JSON.stringify(h.nftVersion.trim())}`;
  if (lessThan(nv, NFTABLES_MIN_NFT))
    return `nftables mode needs nft ${v(NFTABLES_MIN_NFT)} or later, this one is ${v(nv)}; upgrade the nftables package or use --proxy-mode iptables`;
  return null;
}
