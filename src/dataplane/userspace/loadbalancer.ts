// Endpoint selection of the userspace mode: upstream's LoadBalancerRR
// (pkg/proxy/userspace/roundrobin.go, removed in v1.26), one instance per
// listener. Pure: time comes from the injected clock, nothing else.
//
// Contract (as upstream):
// * next() walks the endpoints round-robin.
// * With ClientIP affinity (stickyMs > 0) a client IP keeps the endpoint it
//   got last while it returns within stickyMs of its last use; each use
//   refreshes the time.
// * resetAffinity = true (the caller's previous try for this client failed)
//   ignores the remembered endpoint and takes the next one round-robin,
//   which then becomes the client's new affinity.
// * setEndpoints() keeps the rotation and the affinities of endpoints that
//   stay; affinities of removed endpoints are forgotten.
import type { Clock } from '../../core/clock.js';

interface Affinity {
  endpoint: string;
  lastUsed: number;
}

export class RoundRobin {
  private eps: readonly string[] = [];
  private index = 0;
  private stickyMs = 0;
  /** Made when affinity is first recorded: a listener without ClientIP affinity never needs it. */
  private affinity: Map<string, Affinity> | null = null;

  constructor(private readonly clock: Clock) {}

  /** Endpoint keys in selection order (a copy is not taken: callers must not mutate). */
  endpoints(): readonly string[] {
    return this.eps;
  }

  /** True when ClientIP affinity is on (next() then needs the client IP). */
  affinityEnabled(): boolean {
    return this.stickyMs > 0;
  }

  /** Number of remembered client affinities (expired ones included until cleanup). */
  affinityCount(): number {
    return this.affinity?.size ?? 0;
  }

  /** Replace the endpoint set and the affinity timeout (0 disables affinity). */
  setEndpoints(endpoints: readonly string[], stickyMs: number): void {
    const changed = endpoints.length !== this.eps.length || endpoints.some((e, i) => e !== this.eps[i]);
    if (stickyMs !== this.stickyMs) {
      this.stickyMs = stickyMs;
      if (stickyMs <= 0) this.affinity = null;
    }
    if (!changed) return;
    if (this.affinity !== null) {
      const keep = new Set(endpoints);
      for (const [ip, a] of this.affinity) if (!keep.has(a.endpoint)) this.affinity.delete(ip);
    }
    this.eps = [...endpoints];
    this.index = this.eps.length === 0 ? 0 : this.index % this.eps.length;
  }

  /** The endpoint for a new connection/session from clientIP, or null when there is none. */
  next(clientIP: string, resetAffinity = false): string | null {
    if (this.eps.length === 0) return null;
    const now = this.clock.monotonic();
    if (this.stickyMs > 0 && !resetAffinity) {
      const a = this.affinity?.get(clientIP);
      if (a && now - a.lastUsed < this.stickyMs) {
        a.lastUsed = now;
        return a.endpoint;
      }
    }
    const ep = this.eps[this.index]!;
    this.index = (this.index + 1) % this.eps.length;
    if (this.stickyMs > 0) (this.affinity ??= new Map()).set(clientIP, { endpoint: ep, lastUsed: now });
    return ep;
  }

  /** Forget affinities older than the timeout (upstream CleanupStaleStickySessions). Returns how many. */
  cleanupStale(): number {
    const now = this.clock.monotonic();
    let n = 0;
    if (this.affinity === null) return 0;
    for (const [ip, a] of this.affinity) {
      if (now - a.lastUsed >= this.stickyMs) {
        this.affinity.delete(ip);
        n++;
      }
    }
    return n;
  }
}
