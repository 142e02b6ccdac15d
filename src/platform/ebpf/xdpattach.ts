// Attaching the XDP program (src/bpf/xdp.h) to the node's uplinks, and
// taking it off.
//
// Uplinks are the interfaces that hold one of the node's own IPs (the Node
// object's addresses, per family): where traffic from outside the node
// arrives. Loopback, pod veths and bridges without a node IP never get it:
// their traffic is the tc programs' alone.
//
// One BPF link per uplink (BPF_XDP), pinned at links/xdp-<ifindex> like the
// tcx links, so it stays attached while the proxy restarts and the next
// proxy swaps its freshly loaded program in (BPF_LINK_UPDATE). Native mode
// where the driver has XDP (veth does), generic (the kernel's skb-based
// XDP) otherwise, or as --ebpf-xdp asks. An interface that already runs an
// XDP program that is not ours keeps it: the kernel refuses a second one
// (EBUSY), which is reported, and tc does the work there as before.
import type { IPFamily } from '../../core/types.js';
import { normalizeIP } from '../../core/ip.js';
import { BpfError, closeFd, libbpf } from './libbpf.js';
import { cachedProgId, linkInfo } from './attach.js';
import { ARPHRD_ETHER, type Iface } from './ifaces.js';
import type { PinDir } from './pins.js';

import type { XdpMode } from '../../dataplane/ebpf/options.js';
export type { XdpMode };

const BPF_XDP = 37;
const BPF_LINK_TYPE_XDP = 6;
const XDP_FLAGS_SKB_MODE = 1 << 1;
const XDP_FLAGS_DRV_MODE = 1 << 2;
const EBUSY = 16;
const EEXIST = 17;
const EINVAL = 22;
const EOPNOTSUPP = 95;
const ENOTSUPP = 524;

export interface XdpReconcileResult {
  /** "<name> (native|generic)" for each new attachment. */
  readonly attached: string[];
  readonly updated: string[];
  readonly removed: string[];
  /** Uplinks that run another tool's XDP program: left alone, tc serves them. */
  readonly foreign: string[];
}

/**
 * The uplinks among `ifaces`: Ethernet interfaces that are up and hold one
 * of `nodeIPs`. `addresses` maps an interface name to its addresses (as
 * os.networkInterfaces() gives them).
 */
export function pickUplinks(
  ifaces: readonly Iface[],
  addresses: Readonly<Record<string, ReadonlyArray<{ readonly address: string }> | undefined>>,
  nodeIPs: readonly string[],
): Iface[] {
  const want = new Set(nodeIPs.map((ip) => normalizeIP(ip)).filter((ip): ip is string => ip !== null));
  return ifaces.filter(
    (i) =>
      i.type === ARPHRD_ETHER && i.up && (addresses[i.name] ?? []).some((a) => want.has(normalizeIP(a.address) ?? '')),
  );
}

/** The node's IPs of every family, in one list (Node.status addresses as the engine reports them). */
export function nodeIPList(ips: Readonly<Partial<Record<IPFamily, string>>>): string[] {
  return Object.values(ips).filter((ip): ip is string => !!ip);
}

export class XdpAttacher {
  private readonly progIds = new Map<number, number>();

  constructor(
    private readonly pins: PinDir,
    readonly mode: Exclude<XdpMode, 'off'>,
  ) {}

  /**
   * Make every uplink run this program, and take it off every other
   * interface it is on (an interface that stopped being an uplink, or is
   * gone). Idempotent; one pin read per uplink when nothing changed.
   */
  reconcile(uplinks: readonly Iface[], progFd: number): XdpReconcileResult {
    const res: XdpReconcileResult = { attached: [], updated: [], removed: [], foreign: [] };
    const keep = new Set<number>();
    for (const i of uplinks) {
      const what = this.attach(i.index, progFd);
      if (what === 'foreign') {
        res.foreign.push(i.name);
        continue;
      }
      keep.add(i.index);
      if (what === 'updated') res.updated.push(i.name);
      else if (what !== 'kept') res.attached.push(`${i.name} (${what})`);
    }
    for (const name of this.pins.links()) {
      const m = /^xdp-(\d+)$/.exec(name);
      if (!m || keep.has(Number(m[1]))) continue;
      this.pins.detachLink(`${this.pins.linksDir}/${name}`);
      res.removed.push(name);
    }
    return res;
  }

  private progId(fd: number): number {
    return cachedProgId(this.progIds, fd);
  }

  private attach(ifindex: number, progFd: number): 'native' | 'generic' | 'updated' | 'kept' | 'foreign' {
    const lib = libbpf();
    const path = this.pins.xdpLink(ifindex);
    const pinned = lib.bpf_obj_get(path);
    if (pinned >= 0) {
      try {
        const li = linkInfo(pinned);
        if (li.type === BPF_LINK_TYPE_XDP && li.ifindex === ifindex) {
          if (li.progId === this.progId(progFd)) return 'kept';
          const rc = lib.bpf_link_update(pinned, progFd, null);
          if (rc < 0) throw new BpfError(`update XDP link on ifindex ${ifindex}`, -rc);
          return 'updated';
        }
      } finally {
        closeFd(pinned);
      }
      this.pins.detachLink(path); // the link of an interface that was replaced
    }
    const tries: Array<'native' | 'generic'> =
      this.mode === 'auto' ? ['native', 'generic'] : [this.mode === 'native' ? 'native' : 'generic'];
    let last = 0;
    for (const t of tries) {
      const opts = Buffer.alloc(16);
      opts.writeBigUInt64LE(16n, 0);
      opts.writeUInt32LE(t === 'native' ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE, 8);
      const link = lib.bpf_link_create(progFd, ifindex, BPF_XDP, opts);
      if (link < 0) {
        last = -link;
        if (last === EBUSY || last === EEXIST) return 'foreign';
        if (last === EINVAL || last === EOPNOTSUPP || last === ENOTSUPP) continue; // no such mode here
        break;
      }
      try {
        const rc = lib.bpf_obj_pin(link, path);
        if (rc < 0) throw new BpfError(`pin ${path}`, -rc);
      } finally {
        closeFd(link);
      }
      return t;
    }
    throw new BpfError(`attach XDP (${this.mode}) to ifindex ${ifindex}`, last);
  }

  /** Take our XDP program off every interface (cleanup): every pinned xdp-* link. */
  static detachAll(pins: PinDir): string[] {
    const removed: string[] = [];
    for (const name of pins.links()) {
      if (!name.startsWith('xdp-')) continue;
      pins.detachLink(`${pins.linksDir}/${name}`);
      removed.push(name);
    }
    return removed;
  }
}
