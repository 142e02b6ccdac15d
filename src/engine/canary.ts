// When the datapath canary's probes make the proxy unhealthy, and when healthy
// again: the policy, without sockets or timers (src/platform/canary.ts probes).
//
// Anti-flap rules:
//  - failuresToFail probes in a row must fail (default 3, about 15 s at one
//    probe per 5 s) before the datapath is called broken; successesToRecover
//    in a row (default 2) bring it back.
//  - A probe that overlapped a sync (its syncEpoch changed or was odd) does
//    not count either way: rules may have been half-written while it ran.
//  - A probe that started late (the event loop was starved: a big sync, GC,
//    a CPU-starved node) does not count: a connect that timed out then may
//    have timed out in our own process, not in the kernel. Likewise a probe
//    that ended well past its timeout: its timer may have run before the
//    connect that had already succeeded was read.
//  - Nothing counts before the canary is programmed (its first sync).
//  - A probe that failed because the node has no route covering the
//    canary's ClusterIP does not count: connect() looks the route up before
//    any rule of ours sees the packet, so the failure says nothing about what
//    the proxy programmed, and a node whose IPv6 has no default route (pods'
//    Service traffic is DNATed before routing, so it does not need one) would
//    otherwise be drained from every load balancer for good. /statusz shows
//    it (noRoute) so the blind spot is not silent.

import type { Clock } from '../core/clock.js';
import { isLoopback, parseIP } from '../core/ip.js';
import type { IPFamily } from '../core/types.js';

export interface CanaryPolicy {
  readonly failuresToFail: number;
  readonly successesToRecover: number;
  /** A probe that starts more than this after its scheduled time does not count (ms). */
  readonly maxStartDelayMs: number;
  /** The probe's own timeout (ms); a probe that took longer than it plus maxStartDelayMs does not count. */
  readonly timeoutMs: number;
}

export const DEFAULT_CANARY_POLICY: CanaryPolicy = {
  failuresToFail: 3,
  successesToRecover: 2,
  maxStartDelayMs: 1000,
  timeoutMs: 1000,
};

export interface ProbeResult {
  /** Monotonic ms the probe was due, and when it really started and ended. */
  readonly scheduledAt: number;
  readonly startedAt: number;
  readonly endedAt: number;
  /** Proxier.syncEpoch() at start and at end. */
  readonly epochBefore: number;
  readonly epochAfter: number;
  /** The canary was in the datapath's last state when the probe started. */
  readonly programmed: boolean;
  readonly ok: boolean;
  /** Why it failed ("" on success): the socket error, a timeout, a wrong answer. */
  readonly error: string;
  /** It failed because this node has no route covering the canary's ClusterIP (checked only after a failure). */
  readonly noRoute?: boolean;
}

export type ProbeVerdict = 'counted' | 'during-sync' | 'starved' | 'not-programmed' | 'no-route';

export interface CanaryStatus {
  readonly healthy: boolean;
  /** Why unhealthy (the last failure), "" when healthy. */
  readonly reason: string;
  /** Epoch ms of the last change of `healthy`, null before any. */
  readonly since: number | null;
  readonly consecutiveFailures: number;
  readonly consecutiveSuccesses: number;
  readonly probes: number;
  readonly failures: number;
  readonly discarded: number;
  /** The last probe failed for want of a route to the canary's ClusterIP (and so did not count). */
  readonly noRoute: boolean;
  /** Epoch ms and error of the last counted failure. */
  readonly lastFailure: { readonly at: number; readonly error: string } | null;
}

export type CanaryTransition = { readonly healthy: false; readonly reason: string } | { readonly healthy: true };

export class CanaryJudge {
  private healthy = true;
  private reason = '';
  private since: number | null = null;
  private fails = 0;
  private oks = 0;
  private probes = 0;
  private failures = 0;
  private discarded = 0;
  private noRoute = false;
  private lastFailure: { at: number; error: string } | null = null;

  constructor(
    private readonly clock: Clock,
    private readonly policy: CanaryPolicy = DEFAULT_CANARY_POLICY,
  ) {}

  /** Whether a probe counts, and why not. */
  verdict(r: ProbeResult): ProbeVerdict {
    if (!r.programmed) return 'not-programmed';
    if (!r.ok && r.noRoute) return 'no-route';
    if (r.epochBefore !== r.epochAfter || r.epochBefore % 2 === 1) return 'during-sync';
    const slack = this.policy.maxStartDelayMs;
    if (r.startedAt - r.scheduledAt > slack) return 'starved';
    if (r.endedAt - r.startedAt > this.policy.timeoutMs + slack) return 'starved';
    return 'counted';
  }

  /** Record a probe; returns the change of health it caused, if any. */
  record(r: ProbeResult): { verdict: ProbeVerdict; transition: CanaryTransition | null } {
    const verdict = this.verdict(r);
    if (verdict === 'no-route') this.noRoute = true;
    else if (verdict !== 'not-programmed') this.noRoute = false;
    if (verdict !== 'counted') {
      this.discarded++;
      return { verdict, transition: null };
    }
    this.probes++;
    if (r.ok) {
      this.fails = 0;
      this.oks++;
      if (!this.healthy && this.oks >= this.policy.successesToRecover) {
        this.healthy = true;
        this.reason = '';
        this.since = this.clock.now();
        return { verdict, transition: { healthy: true } };
      }
      return { verdict, transition: null };
    }
    this.failures++;
    this.oks = 0;
    this.fails++;
    this.lastFailure = { at: this.clock.now(), error: r.error };
    if (this.healthy && this.fails >= this.policy.failuresToFail) {
      this.healthy = false;
      this.reason = `${this.fails} probes in a row failed, the last: ${r.error}`;
      this.since = this.clock.now();
      return { verdict, transition: { healthy: false, reason: this.reason } };
    }
    return { verdict, transition: null };
  }

  isHealthy(): boolean {
    return this.healthy;
  }

  status(): CanaryStatus {
    return {
      healthy: this.healthy,
      reason: this.reason,
      since: this.since,
      consecutiveFailures: this.fails,
      consecutiveSuccesses: this.oks,
      probes: this.probes,
      failures: this.failures,
      discarded: this.discarded,
      noRoute: this.noRoute,
      lastFailure: this.lastFailure,
    };
  }
}

/** Event reasons (stable) and the notes an operator reads in `kubectl get events`. */
export const CANARY_FAILED_REASON = 'DatapathCanaryFailed';
export const CANARY_RECOVERED_REASON = 'DatapathCanaryRecovered';
export const CANARY_EVENT_ACTION = 'Probe';

export function canaryNote(mode: string, family: string, vip: string, t: CanaryTransition): string {
  return t.healthy
    ? `${mode} ${family}: connections to the datapath canary ${vip} reach this proxy again; healthy`
    : `${mode} ${family}: connections to the datapath canary ${vip} fail (${t.reason}); /healthz and health-check node ports answer 503`;
}

/** Where a family's canary listens, or why it has none (said once, at start). */
export type CanaryPlan = { readonly family: IPFamily } & ({ readonly listenIP: string } | { readonly skip: string });

/**
 * Which families get a canary: one the mode supports and the proxy serves,
 * listening on the node's address of that family. Not where that address is
 * missing or loopback: the node IP detection puts loopback in for a family the
 * Node reports no address of, which is no node address at all, and an IPv4
 * DNAT to 127.0.0.1 from OUTPUT is not routed without route_localnet.
 */
export function canaryPlans(
  served: readonly IPFamily[],
  supported: readonly IPFamily[],
  nodeIPs: Readonly<Partial<Record<IPFamily, string>>>,
): CanaryPlan[] {
  const out: CanaryPlan[] = [];
  for (const family of served) {
    if (!supported.includes(family)) {
      out.push({ family, skip: `this mode has no ${family} datapath canary` });
      continue;
    }
    const ip = parseIP(nodeIPs[family] ?? '');
    if (!ip || ip.family !== family || isLoopback(ip))
      out.push({ family, skip: `it needs a non-loopback ${family} node address` });
    else out.push({ family, listenIP: ip.text });
  }
  return out;
}
