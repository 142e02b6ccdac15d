// What both families' ebpf datapaths share on one node: the runtime (loaded
// programs, pinned maps) and a watch on the node's interfaces and addresses.
// Pods come and go, and with them their interfaces: every second the watch
// lists the interfaces, attaches the programs to new ones, forgets vanished
// ones, and tells the families so they can refresh their node-level entries
// (addresses, interface detectors). Each tick also checks, without changing
// anything, that every map is still pinned and every hook still runs our
// program (EbpfRuntime.drift), and tells the families' drift listeners once
// per new difference; the engine's full sync that follows calls repair().
import { networkInterfaces } from 'node:os';
import { localIPs } from '../netinfo.js';
import { Sysctl } from '../sysctl.js';
import type { Drift, IPFamily } from '../../core/types.js';
import type { Iface } from './ifaces.js';
import { listIfaces, netnsCookie } from './ifaces.js';
import type { ReconcileResult } from './attach.js';
import { EbpfRuntime, type RuntimeOptions } from './runtime.js';
import { cgroup2Dir } from './cgroupdir.js';
import { nodeIPList, pickUplinks } from './xdpattach.js';

export const WATCH_INTERVAL_MS = 1000;

export interface NodeEvents {
  readonly info: (fields: Record<string, unknown>, msg: string) => void;
  readonly warn: (fields: Record<string, unknown>, msg: string) => void;
}

type Listener = () => void;

/**
 * opts with socketLBCgroup resolved to a cgroup v2 directory. Without one
 * (a cgroup v1 host, a path that is not a cgroup) socket balancing is off,
 * with a warning: the tc programs serve every connection then, as they do
 * with the flag empty, so the proxy still runs.
 */
function socketLBOptions(opts: RuntimeOptions, events: NodeEvents): RuntimeOptions {
  const want = opts.socketLBCgroup;
  if (!want) return opts;
  const dir = cgroup2Dir(want);
  if (dir === null) {
    events.warn(
      { socketLBCgroup: want },
      'socket-level load balancing off: not a cgroup v2 directory (nor is its unified); the tc programs balance every connection',
    );
  } else if (dir !== want) {
    events.info(
      { socketLBCgroup: want, cgroup: dir },
      'socket-level load balancing at the cgroup v2 hierarchy of a hybrid host',
    );
  }
  return { ...opts, socketLBCgroup: dir };
}

export class SharedNode {
  private static readonly open = new Map<string, Promise<SharedNode>>();
  private refs = 0;
  private timer: ReturnType<typeof setInterval> | null = null;
  private signature = '';
  private current: Iface[] = [];
  private addresses: Record<IPFamily, string[]> = { IPv4: [], IPv6: [] };
  private readonly listeners = new Set<Listener>();
  private readonly driftListeners = new Set<(drift: Drift) => void>();
  /** The node's own IPs per family (Node object): they pick the uplinks that run the XDP program. */
  private nodeIPs: Partial<Record<IPFamily, string>> = {};
  /** Uplinks with another tool's XDP program, reported once each. */
  private readonly foreignXdp = new Set<string>();
  /** The drift last reported ('' for none), so that one difference is reported once. */
  private driftReported = '';
  readonly cookie: bigint;

  private constructor(
    readonly key: string,
    readonly rt: EbpfRuntime,
    private readonly events: NodeEvents,
  ) {
    this.cookie = netnsCookie();
  }

  /** The node runtime for these options (one per pin root), opened on first use. */
  static acquire(opts: RuntimeOptions, events: NodeEvents): Promise<SharedNode> {
    const key = opts.pinRoot ?? '';
    let p = SharedNode.open.get(key);
    if (!p) {
      p = (async () => {
        // A reply to the node's own connection to one of its own service
        // addresses (a NodePort on the node IP, a local external IP) is
        // translated back to come from that local address; the programs hand
        // it to loopback, whose input path takes local sources only with
        // accept_local (replies NATed by netfilter are rewritten after that
        // check instead). Nothing else reaches loopback's input without a route.
        await new Sysctl().ensureInt('net/ipv4/conf/lo/accept_local', 1);
        const rt = await EbpfRuntime.open(socketLBOptions(opts, events));
        const n = new SharedNode(key, rt, events);
        n.report();
        n.refresh(true);
        n.timer = setInterval(() => {
          n.refresh(false);
          n.checkDrift();
        }, WATCH_INTERVAL_MS);
        n.timer.unref();
        return n;
      })();
      SharedNode.open.set(key, p);
      p.catch(() => SharedNode.open.delete(key));
    }
    return p.then((n) => {
      n.refs++;
      return n;
    });
  }

  ifaces(): readonly Iface[] {
    return this.current;
  }

  /** The node's addresses of a family, as of the last look (every WATCH_INTERVAL_MS). */
  localIPs(family: IPFamily): readonly string[] {
    return this.addresses[family];
  }

  /** A family's node IP as the last sync saw it; the XDP program follows it to its uplink. */
  setNodeIP(family: IPFamily, ip: string | undefined): void {
    if (this.nodeIPs[family] === ip) return;
    this.nodeIPs = { ...this.nodeIPs, [family]: ip };
    this.attachXdp(this.current);
  }

  /**
   * The XDP program on the uplinks of `list`. Never fatal: without it the
   * tc programs serve the uplinks' traffic as they always did.
   */
  private attachXdp(list: readonly Iface[]): void {
    const ips = nodeIPList(this.nodeIPs);
    // Before the first sync names the node's IPs, a restarted proxy leaves the previous one's XDP links as they
    // are: the sync then swaps its program into them instead of taking them off and on again.
    if (ips.length === 0 && this.rt.xdpMode !== 'off') return;
    try {
      const r = this.rt.attachXdp(pickUplinks(list, networkInterfaces(), ips));
      if (r.attached.length || r.updated.length || r.removed.length)
        this.events.info({ attached: r.attached, updated: r.updated, removed: r.removed }, 'XDP program attached');
      for (const f of r.foreign) {
        if (this.foreignXdp.has(f)) continue;
        this.foreignXdp.add(f);
        this.events.warn({ iface: f }, 'an XDP program that is not ours runs on this uplink: left alone, tc serves it');
      }
    } catch (err) {
      this.events.warn({ err: String(err) }, 'attaching the XDP program failed; the tc programs serve the uplinks');
    }
  }

  onChange(l: Listener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  /** Be told when pins or attachments differ from what we set up (see the top of the file). */
  onDrift(l: (drift: Drift) => void): () => void {
    this.driftListeners.add(l);
    return () => this.driftListeners.delete(l);
  }

  /**
   * Pins and attachments as they should be (the repair after drift, run by
   * full syncs): maps pinned again, every hook reattached.
   */
  repair(): { pinned: string[]; attach: ReconcileResult } {
    const out = { pinned: this.rt.repairPins(), attach: this.rt.attachInterfaces(this.current) };
    // The XDP links too (their loss is not watched for: without them tc serves the uplinks as before).
    this.attachXdp(this.current);
    return out;
  }

  private checkDrift(): void {
    if (this.driftListeners.size === 0) return;
    let d: Drift | null;
    try {
      d = this.rt.drift(this.current);
    } catch (err) {
      this.events.warn({ err: String(err) }, 'checking BPF pins and attachments failed; retrying');
      return;
    }
    const key = d ? `${d.reason}\0${d.detail}` : '';
    if (key === this.driftReported) return;
    this.driftReported = key;
    if (d) for (const l of this.driftListeners) l(d);
  }

  private report(): void {
    const a = this.rt.report;
    if (a.mountedBpffs)
      this.events.warn(
        {},
        'mounted a bpf filesystem at /sys/fs/bpf in this mount namespace: pinned state lives only as long as it',
      );
    for (const m of a.adoption) {
      if (m.outcome === 'replaced')
        this.events.warn({ map: m.map, reason: m.reason }, 'pinned BPF map replaced: its entries are lost');
    }
    const adopted = a.adoption.filter((m) => m.outcome === 'adopted').length;
    if (adopted) this.events.info({ maps: adopted }, 'adopted pinned BPF maps');
  }

  /**
   * List interfaces and addresses; attach and notify when anything changed.
   * The first call (initial) throws what fails; later ones log and retry.
   */
  refresh(initial: boolean): void {
    try {
      const list = listIfaces();
      const addresses = { IPv4: localIPs('IPv4'), IPv6: localIPs('IPv6') };
      const sig = JSON.stringify([list.map((i) => [i.index, i.name, i.master, i.type]), addresses]);
      if (!initial && sig === this.signature) return;
      const r = this.rt.attachInterfaces(list);
      if (r.attached.length || r.updated.length || r.removed.length)
        this.events.info({ ...r, mode: this.rt.attachMode }, 'BPF programs attached');
      this.attachXdp(list);
      this.signature = sig;
      this.current = list;
      this.addresses = addresses;
    } catch (err) {
      if (initial) throw err;
      this.events.warn({ err: String(err) }, 'attaching BPF programs failed; retrying');
      return;
    }
    if (!initial) for (const l of this.listeners) l();
  }

  release(): void {
    if (--this.refs > 0) return;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    SharedNode.open.delete(this.key);
    this.rt.close();
  }
}
