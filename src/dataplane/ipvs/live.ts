// What the kernel holds for IPVS mode (read back by the platform after a
// failure, on the engine's full syncs and every sync period, or from a
// Fake), as the objects the reconciler adopts (objects.ts, IpvsKind). Only
// ours are adopted, because a full plan deletes every adopted object no
// owner wants: our family's sets and their members, kube-ipvs0's addresses,
// and the virtual servers ownedVirtualServer() calls ours or that a Service
// wants, with their real servers. Rules are not read: a full sync writes
// them whole.
import { cidrContains, parseCIDR, parseIP } from '../../core/ip.js';
import type { IPFamily } from '../../core/types.js';
import { setObject } from './driver.js';
import { IPSET, IPSETS, ipsetName } from './ipsets.js';
import { destKey, PRESENT, type IpvsObject, type RealServer, type VirtualServer } from './objects.js';

/** One virtual server as the kernel holds it. */
export interface CurrentVirtualServer {
  readonly vs: VirtualServer;
  readonly dests: readonly RealServer[];
}

export interface IpvsCurrent {
  readonly virtualServers: ReadonlyMap<string, CurrentVirtualServer>;
  /** Sets that exist, with their members. */
  readonly ipsets: ReadonlyMap<string, ReadonlySet<string>>;
  /** This family's addresses on kube-ipvs0 (normalised text, as every address here). */
  readonly addresses: ReadonlySet<string>;
}

/**
 * The objects of `current` to adopt, kind by kind; `adopt(vs)` says which
 * virtual servers are ours. Made as they are read, so none outlives the adopt.
 */
export function* liveObjects(
  current: IpvsCurrent,
  family: IPFamily,
  adopt: (vs: VirtualServer) => boolean,
): Generator<IpvsObject> {
  for (const s of IPSETS) {
    const name = ipsetName(s.name, family);
    if (current.ipsets.has(name)) yield setObject(name, s.type);
  }
  for (const s of IPSETS)
    for (const m of current.ipsets.get(ipsetName(s.name, family)) ?? []) yield { kind: s.name, key: m, value: PRESENT };
  for (const a of current.addresses) yield { kind: 'bind', key: a, value: PRESENT };
  const ours: CurrentVirtualServer[] = [];
  for (const [key, c] of current.virtualServers) {
    if (c.vs.family !== family || !adopt(c.vs)) continue;
    ours.push(c);
    yield { kind: 'vs', key, value: { t: 'vs', vs: c.vs } };
  }
  for (const c of ours)
    for (const rs of c.dests) yield { kind: 'rs', key: destKey(c.vs, rs), value: { t: 'rs', vs: c.vs, rs } };
}

/** Inside --ipvs-exclude-cidrs: never deleted. */
export function excludedVirtualServer(vs: VirtualServer, excludeCIDRs: readonly string[]): boolean {
  if (excludeCIDRs.length === 0) return false;
  const ip = parseIP(vs.address);
  if (!ip) return false;
  for (const c of excludeCIDRs) {
    const p = parseCIDR(c);
    if (p && p.family === ip.family && cidrContains(p, ip)) return true;
  }
  return false;
}

export interface Ownership {
  readonly family: IPFamily;
  /** This family's addresses on every link but kube-ipvs0. */
  readonly nodeAddresses: readonly string[];
  readonly excludeCIDRs: readonly string[];
}

/**
 * Ours to delete: on an address of kube-ipvs0, or a NodePort on a node
 * address whose port is in our NodePort sets; never inside
 * --ipvs-exclude-cidrs. Anything else (another load balancer on this node)
 * is someone else's.
 */
export function ownedVirtualServer(vs: VirtualServer, current: IpvsCurrent, o: Ownership): boolean {
  if (vs.family !== o.family || excludedVirtualServer(vs, o.excludeCIDRs)) return false;
  if (current.addresses.has(vs.address)) return true;
  if (!o.nodeAddresses.includes(vs.address)) return false;
  const proto = vs.protocol.toLowerCase();
  const set =
    vs.protocol === 'TCP' ? IPSET.NODE_PORT_TCP : vs.protocol === 'UDP' ? IPSET.NODE_PORT_UDP : IPSET.NODE_PORT_SCTP;
  const members = current.ipsets.get(ipsetName(set, o.family));
  return members?.has(vs.protocol === 'SCTP' ? `${vs.address},${proto}:${vs.port}` : String(vs.port)) ?? false;
}
