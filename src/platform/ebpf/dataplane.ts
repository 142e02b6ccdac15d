// EbpfDataplane: the ebpf mode for one IP family. A sync plans this
// family's map entries (EbpfPlanner: the ebpf driver under the one
// reconciler), writes only what changed, removes the masquerade table an
// older version left (the programs masquerade themselves now; on a kernel
// without BPF_FIB_LOOKUP_SRC they mark instead, and the table stays), and forgets
// UDP connection entries whose endpoint is gone (as
// upstream deletes stale UDP conntrack entries). Programs, maps and the
// interface watch are shared with the other family (SharedNode). After a
// failed write the planner is told (failed()): the next sync is full and
// starts from what the maps hold. A cold start's plan (puts only) is
// written one batch per map, packed straight from the planner's puts
// (writePuts). With countTraffic() (the opt-in
// --service-traffic-metrics) the family's kpt_traffic entries follow each
// sync; without it, its first sync deletes any the family left there.
// watchDrift() reports, within a second, a map unpinned or a program
// detached by someone else (node.ts); the full sync that follows pins and
// attaches again, and reads the maps back before it plans.
import type {
  Dataplane,
  DataplaneConfig,
  Drift,
  Endpoint,
  IPFamily,
  ServicePort,
  SyncOutcome,
  SyncState,
} from '../../core/types.js';
import type { LiveEntries } from '../../dataplane/ebpf/driver.js';
import * as L from '../../dataplane/ebpf/layout.js';
import { removeOldMasqueradeTable } from './cleanup.js';
import { hasFibLookupSrc } from './kernel.js';
import { masqueradeTable } from '../../dataplane/ebpf/masq.js';
import { run } from '../exec.js';
import { release } from 'node:os';
import { joinHostPort } from '../../core/ip.js';
import { performance } from 'node:perf_hooks';
import { cleanupEbpfMode } from './cleanup.js';
import { EbpfPlanner, type EbpfPlan } from './planner.js';
import { runSliced } from '../slices.js';

export { cleanupEbpfMode } from './cleanup.js';
import type { EbpfOptions } from '../../dataplane/ebpf/options.js';
export { DEFAULT_EBPF_OPTIONS, type EbpfOptions } from '../../dataplane/ebpf/options.js';
import { SharedNode } from './node.js';
import type { EbpfRuntime } from './runtime.js';
import { EbpfTrafficCounters, trafficIds } from './traffic.js';
import { TrafficCounterPlan } from '../../dataplane/ebpf/traffic.js';
import { BugError } from '../../core/errors.js';

type Level = 'debug' | 'info' | 'warn' | 'error';

/** How often a sync looks through kpt_ct while the first check does not trust kpt_seen yet. */
const SEEN_RETRY_MS = 10_000;

export interface EbpfDataplaneDeps {
  readonly config: DataplaneConfig;
  readonly ebpf: EbpfOptions;
  readonly onEvent?: (level: Level, fields: Record<string, unknown>, msg: string) => void;
}

export class EbpfDataplane implements Dataplane {
  readonly mode = 'ebpf' as const;
  readonly family: IPFamily;
  private maps: EbpfPlanner;
  private traffic: EbpfTrafficCounters | null = null;
  private trafficCleared = false;
  private node: SharedNode | null = null;
  private acquiring: Promise<SharedNode> | null = null;
  private unsubscribe: (() => void) | null = null;
  private onDrift: ((drift: Drift) => void) | null = null;
  private unwatchDrift: (() => void) | null = null;
  private lastState: SyncState | null = null;
  private readonly udpSeen = new SeenUDPPorts();
  private oldTableChecked = false;
  /** The kernel tells the programs a route's source, so they masquerade themselves (kernel.ts). */
  private readonly fibSrc = hasFibLookupSrc();
  /** A sliced plan is running; what must not meet it waits in `deferred`. */
  private planning = false;
  /** This family has written to the maps (since this process opened them). */
  private wrote = false;
  /** Entries of hash maps and tries the plan of this sync read back from the kernel (logged). */
  private readBack = 0;
  private deferred: Array<() => void> = [];
  private seenTrusted = false;
  private seenTried = -Infinity;

  constructor(private readonly deps: EbpfDataplaneDeps) {
    this.family = deps.config.family;
    this.maps = new EbpfPlanner(deps.config, {
      algorithm: deps.ebpf.algorithm,
      maglevM: deps.ebpf.maglevM,
      dsr: deps.ebpf.lbMode === 'dsr',
    });
  }

  /**
   * Count per-Service traffic in the BPF maps for the first `max` service
   * ports (--service-traffic-metrics). Call before the first sync.
   */
  countTraffic(max: number): EbpfTrafficCounters {
    if (this.lastState) throw new BugError('countTraffic() must come before the first sync');
    const e = this.deps.ebpf;
    this.maps = new EbpfPlanner(this.deps.config, {
      algorithm: e.algorithm,
      maglevM: e.maglevM,
      trafficCounters: true,
      dsr: e.lbMode === 'dsr',
    });
    this.traffic = new EbpfTrafficCounters(this.family, max);
    return this.traffic;
  }

  private event(level: Level, fields: Record<string, unknown>, msg: string): void {
    this.deps.onEvent?.(level, { family: this.family, ...fields }, msg);
  }

  private async shared(): Promise<SharedNode> {
    if (this.node) return this.node;
    // startsEmpty() and the first sync may both ask before the programs are loaded: load them once.
    this.acquiring ??= this.acquire();
    return this.acquiring;
  }

  private async acquire(): Promise<SharedNode> {
    const e = this.deps.ebpf;
    this.node = await SharedNode.acquire(
      {
        pinRoot: e.pinRoot,
        attachMode: e.attach,
        maglevM: e.maglevM,
        ctEntries: e.ctEntries,
        socketLBCgroup: e.socketLBCgroup || null,
        xdp: e.xdp,
      },
      { info: (f, m) => this.event('info', f, m), warn: (f, m) => this.event('warn', f, m) },
    );
    this.unsubscribe = this.node.onChange(() => this.whenIdle(() => this.refreshNode()));
    const onDrift = this.onDrift;
    // Someone else touched what we pinned or attached: whatever else they did
    // to the maps, the full sync that follows plans against what they hold.
    if (onDrift)
      this.unwatchDrift = this.node.onDrift((d) => {
        this.whenIdle(() => this.maps.failed());
        onDrift(d);
      });
    return this.node;
  }

  /** Tell `onDrift` when a pinned map or an attached program of ours is gone (checked every second). */
  watchDrift(onDrift: (drift: Drift) => void): void {
    this.onDrift = onDrift;
  }

  /**
   * Load, pin and attach the programs now; otherwise the first sync does.
   * For a caller that times its first sync apart from this one-time start.
   */
  async start(): Promise<void> {
    await this.shared();
  }

  /** No pinned map of an earlier run was adopted: the maps hold only what this process writes. */
  async startsEmpty(): Promise<boolean> {
    const node = await this.shared();
    return !node.rt.report.adoption.some((a) => a.outcome === 'adopted');
  }

  async sync(state: SyncState): Promise<SyncOutcome> {
    const node = await this.shared();
    node.setNodeIP(this.family, state.node.nodeIPs[this.family]);
    if (state.fullSync) {
      const r = node.repair();
      if (r.pinned.length || r.attach.attached.length || r.attach.updated.length)
        this.event(
          'info',
          { pinned: r.pinned, attached: r.attach.attached, updated: r.attach.updated },
          'BPF pins and attachments restored',
        );
    }
    if (this.fibSrc && !this.oldTableChecked) {
      if (await removeOldMasqueradeTable(this.family))
        this.event('info', {}, 'removed the nftables masquerade table of an older version');
      this.oldTableChecked = true;
    } else if (!this.fibSrc && (!this.oldTableChecked || state.fullSync)) {
      // No BPF_FIB_LOOKUP_SRC (kernel.ts): the programs mark what needs masquerade, and this table masquerades it.
      await run('nft', ['-f', '-'], {
        input: masqueradeTable(this.family, this.deps.config.masqueradeMark).toString(),
      });
      if (!this.oldTableChecked)
        this.event(
          'info',
          { kernel: release() },
          'kernel without BPF_FIB_LOOKUP_SRC: masquerade through the kube-proxy-ebpf table',
        );
      this.oldTableChecked = true;
    }
    const t0 = performance.now();
    // Packed writes only where a plan can be a cold start (it reads the live maps first); the
    // few writes of a partial sync gain nothing from packing and keep the per-entry MapOps.
    const adopting = this.maps.needsLive();
    // In slices: a plan of 10k Services would otherwise hold the event loop for its whole length.
    this.planning = true;
    let r: EbpfPlan;
    try {
      r = await runSliced(
        this.maps.planSteps({
          state,
          localIPs: node.localIPs(this.family),
          ifaces: node.ifaces(),
          netnsCookie: node.cookie,
          ...(adopting ? { live: this.live(node.rt), packed: true } : {}),
        }),
      );
    } catch (err) {
      this.planning = false;
      this.runDeferred();
      throw err;
    }
    // No await from here until the writes are done: what was deferred runs after them.
    this.planning = false;
    const t1 = performance.now();
    this.wrote = true;
    try {
      if (r.puts) node.rt.writePuts(r.puts);
      else node.rt.apply(r.ops);
    } catch (err) {
      this.maps.failed();
      throw err;
    } finally {
      this.runDeferred();
    }
    const t2 = performance.now();
    this.trustSeen(node.rt);
    for (const s of r.skipped) this.event('warn', s, 'service port not programmed');
    this.syncTraffic(node.rt, state, r.full);
    const swept = this.sweepStaleUDP(node.rt, state, r.ports);
    this.udpSeen.follow(state, r.ports);
    if (swept) this.event('debug', { deleted: swept }, 'stale UDP connection entries deleted');
    this.lastState = state;
    const timing = { renderMs: t1 - t0, applyMs: t2 - t1 };
    const readBack = this.readBack;
    this.readBack = 0;
    this.event('debug', { writes: r.counters.writes, full: r.full, readBack, ...timing }, 'BPF maps synced');
    return { partial: !r.full, counters: { ...r.counters, ...timing } };
  }

  /**
   * After an upgrade over pinned maps the tc programs' first check looks every
   * packet up until each connection entry of the older programs is marked in
   * kpt_seen (hotfilter.ts); a look through kpt_ct, at most every SEEN_RETRY_MS, says when.
   */
  private trustSeen(rt: EbpfRuntime): void {
    if (this.seenTrusted) return;
    const now = performance.now();
    if (now - this.seenTried < SEEN_RETRY_MS) return;
    this.seenTried = now;
    try {
      this.seenTrusted = rt.trustSeen();
    } catch (err) {
      this.event('warn', { err: String(err) }, 'reading the connection map for the first check failed');
    }
    if (this.seenTrusted) this.event('debug', {}, 'first check of the tc programs trusts kpt_seen');
  }

  /** kpt_traffic after the maps are synced: follow the counted ports, or clear ours once when not counting. */
  private syncTraffic(rt: EbpfRuntime, state: SyncState, full: boolean): void {
    try {
      if (this.traffic) {
        const writes = this.traffic.update(rt, state, full, (k) => this.maps.idOf(k));
        if (writes) this.event('debug', { writes }, 'per-Service traffic counters updated');
      } else if (!this.trafficCleared) {
        rt.apply(TrafficCounterPlan.clearOps(this.family, trafficIds(rt)));
        this.trafficCleared = true;
      }
    } catch (err) {
      this.event('warn', { err: String(err) }, 'per-Service traffic counters not updated; next sync tries again');
    }
  }

  /**
   * Run now, or once the plan in progress is written: between the slices of a
   * plan nothing else may use the planner (a drift's failed(), a node refresh).
   */
  private whenIdle(fn: () => void): void {
    if (this.planning) this.deferred.push(fn);
    else fn();
  }

  private runDeferred(): void {
    const fns = this.deferred;
    this.deferred = [];
    for (const fn of fns) fn();
  }

  /** Between syncs: interfaces or addresses changed; rewrite the node-level entries. */
  private refreshNode(): void {
    const node = this.node;
    const last = this.lastState;
    if (!node || !last || this.maps.needsLive()) return;
    const r = this.maps.plan({
      state: { ...last, fullSync: false, changedServices: new Set(), changedServicePorts: new Set() },
      localIPs: node.localIPs(this.family),
      ifaces: node.ifaces(),
      netnsCookie: node.cookie,
    });
    this.wrote = true;
    try {
      node.rt.apply(r.ops);
    } catch (err) {
      this.maps.failed();
      this.event('warn', { err: String(err) }, 'updating node addresses in the BPF maps failed; next sync is full');
    }
  }

  /** This family's entries of every rendered map, as the kernel holds them. */
  private live(rt: EbpfRuntime): LiveEntries {
    // A map this process created (not adopted from a pin) holds only what this process wrote, and
    // entries carry their family: before this family's first write it holds none of them. Without
    // this, the second family's first plan read every entry of the first (seconds at 100k Services,
    // in one turn of the event loop) to keep none.
    const adopted = new Set(rt.report.adoption.filter((a) => a.outcome === 'adopted').map((a) => a.map));
    const out = new Map<L.MapName, Map<string, string>>();
    for (const m of L.MAP_NAMES) {
      if (!L.MAPS[m].rendered) continue;
      const e = new Map<string, string>();
      // An array map has every slot from its creation: it is small, and always read.
      const array = L.MAPS[m].kind === 'array';
      if (this.wrote || adopted.has(m) || array) {
        const all = rt.dump(m);
        if (!array) this.readBack += all.length;
        for (const [k, v] of all) if (L.familyOfEntry(m, k) === this.family) e.set(L.keyOf(k), L.valueText(v));
      }
      out.set(m, e);
    }
    return out;
  }

  /**
   * UDP has no end of connection: like upstream's stale conntrack cleanup,
   * a UDP flow whose endpoint left its service is forgotten, so its next
   * datagram is balanced again. Returns the number of entries deleted.
   */
  private sweepStaleUDP(rt: EbpfRuntime, state: SyncState, ports: readonly string[]): number {
    const stale = staleUDPFrontends(this.udpSeen.ports, state, ports);
    if (stale.size === 0) return 0;
    let n = 0;
    for (const [k, v] of rt.dump('ct')) {
      const key = L.decodeCtKey(k);
      const val = L.decodeCtValue(v);
      if (key.proto !== 'UDP' || val.flags & L.CT_REPLY) continue;
      const keep =
        stale.get(`${key.daddr}|${key.dport}`) ?? (isLocal(rt, key.daddr) ? stale.get(`*|${key.dport}`) : undefined);
      if (!keep || keep.has(joinHostPort(val.addr, val.port))) continue;
      const rev = L.encodeCtKey({ saddr: val.addr, daddr: key.saddr, sport: val.port, dport: key.sport, proto: 'UDP' });
      // The programs may have evicted either entry meanwhile (LRU): absent is fine here.
      const ct = rt.obj.map('ct');
      if (ct.delete(k)) n++;
      if (ct.delete(rev)) n++;
    }
    return n;
  }

  async cleanup(): Promise<void> {
    this.close();
    await cleanupEbpfMode(this.deps.ebpf.pinRoot);
  }

  close(): void {
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.unwatchDrift?.();
    this.unwatchDrift = null;
    this.node?.release();
    this.node = null;
  }
}

function isLocal(rt: EbpfRuntime, ip: string): boolean {
  const v = rt.lookup('addrs', L.encodeAddrKey(ip));
  return v !== null && (L.decodeU32(v) & L.ADDR_LOCAL) !== 0;
}

/** A UDP service port as the last successful sync programmed it, with the endpoints it could reach. */
export interface SeenUDPPort {
  readonly servicePort: ServicePort;
  readonly endpoints: readonly Endpoint[];
}

/**
 * The UDP service ports of the last successful sync. The sweep compares a
 * sync against it: the SyncState's maps are changed in place from sync to
 * sync (src/core/livesnapshot.ts), so the previous state cannot say it.
 */
class SeenUDPPorts {
  readonly ports = new Map<string, SeenUDPPort>();

  /** After a successful sync, for the ports it recomputed. */
  follow(state: SyncState, keys: readonly string[]): void {
    for (const k of keys) {
      const sp = state.services.get(k);
      if (sp?.protocol === 'UDP')
        this.ports.set(k, { servicePort: sp, endpoints: state.categorized.get(k)?.allReachableEndpoints ?? [] });
      else this.ports.delete(k);
    }
  }
}

/**
 * Frontends ("addr|port", or "*|nodePort") of UDP service ports that lost an
 * endpoint since prev, each with the endpoints ("ip:port") still serving.
 * Only `ports` (the ones this sync recomputed) are looked at.
 */
export function staleUDPFrontends(
  prev: ReadonlyMap<string, SeenUDPPort>,
  state: SyncState,
  ports: readonly string[],
): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const key of ports) {
    const seen = prev.get(key);
    if (!seen) continue;
    const { servicePort: old, endpoints: before } = seen;
    const now = state.services.has(key) ? (state.categorized.get(key)?.allReachableEndpoints ?? []) : [];
    const keep = new Set(now.map((e) => joinHostPort(e.ip, e.port)));
    if (!before.some((e) => !keep.has(joinHostPort(e.ip, e.port)))) continue;
    const fronts = [old.clusterIP, ...old.externalIPs, ...old.loadBalancerVIPs].filter(Boolean);
    for (const a of fronts) out.set(`${a}|${old.port}`, keep);
    if (old.nodePort) out.set(`*|${old.nodePort}`, keep);
  }
  return out;
}
