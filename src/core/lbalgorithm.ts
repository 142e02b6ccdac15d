// Our per-Service endpoint choice (the annotation kube-proxy-ts/lb-algorithm,
// and --ebpf-lb-algorithm for Services without it), honoured by the nftables
// and ebpf modes, and what an IPVS scheduler becomes in those modes.

/**
 * - 'random': a uniform choice per new connection (upstream's behaviour);
 * - 'round-robin': each node cycles through the endpoints (IPVS rr);
 * - 'maglev': consistent hashing of the client address and port, the same
 *   endpoint on every node (IPVS mh);
 * - 'source-hash': the client address alone decides, the same endpoint on
 *   every node (IPVS sh).
 */
export type LbAlgorithm = 'random' | 'round-robin' | 'maglev' | 'source-hash';

export const LB_ALGORITHMS: readonly LbAlgorithm[] = ['random', 'round-robin', 'maglev', 'source-hash'];

export function isLbAlgorithm(x: unknown): x is LbAlgorithm {
  return typeof x === 'string' && (LB_ALGORITHMS as readonly string[]).includes(x);
}

/** Whether the choice hashes the client through the Maglev table (the same endpoint on every node). */
export function usesMaglevTable(a: LbAlgorithm): boolean {
  return a === 'maglev' || a === 'source-hash';
}

/** The IPVS schedulers with an equivalent here, and that equivalent. */
const FROM_IPVS: Readonly<Record<string, LbAlgorithm>> = { rr: 'round-robin', sh: 'source-hash', mh: 'maglev' };

/**
 * What an `ipvs.scheduler` (--ipvs-scheduler) setting means in a mode other
 * than ipvs: null when it is unset; else the annotation value that keeps the
 * behaviour, or none (`equivalent: null`) for the schedulers that weigh
 * load or locality (wrr, lc, wlc, lblc, lblcr, dh, sed, nq, or an unknown name).
 */
export function ipvsSchedulerNote(
  scheduler: string,
): { readonly scheduler: string; readonly equivalent: LbAlgorithm | null; readonly message: string } | null {
  const s = scheduler.trim();
  if (s === '') return null;
  const equivalent = FROM_IPVS[s] ?? null;
  const message =
    equivalent === null
      ? `ipvs.scheduler ${JSON.stringify(s)} applies to ipvs mode only and has no equivalent in this mode; ` +
        'endpoints are chosen at random (the annotation kube-proxy-ts/lb-algorithm offers round-robin, source-hash and maglev)'
      : `ipvs.scheduler ${JSON.stringify(s)} applies to ipvs mode only; ` +
        `annotate Services with kube-proxy-ts/lb-algorithm: ${equivalent} to keep its behaviour in this mode`;
  return { scheduler: s, equivalent, message };
}
