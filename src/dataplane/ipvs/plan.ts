// planSync: what must change to go from what the kernel holds (IpvsCurrent)
// to a render (IpvsRender): IPVS requests, an `ipset restore` script, the
// addresses to add to and remove from kube-ipvs0, and the real servers that
// are no longer wanted (the caller drains those gracefully instead of
// deleting them here). A full plan compares everything; a partial one only
// the render's `touched` keys, so a one-endpoint change at 10k Services is a
// handful of requests. Virtual servers that are not wanted are deleted only
// when `owned` says they are ours: a virtual server of someone else (another
// load balancer on this node, an --ipvs-exclude-cidrs range) is never touched.
import { ipsetCreateArgs, IPSETS, ipsetName } from './ipsets.js';
import {
  realServerKey,
  sameVirtualServer,
  virtualServerKey,
  type IpvsOp,
  type RealServer,
  type VirtualServer,
} from './objects.js';
import type { IpvsRender } from './renderer.js';
import type { IPFamily } from '../../core/types.js';

/** One virtual server as the kernel holds it. */
export interface CurrentVirtualServer {
  readonly vs: VirtualServer;
  /** By realServerKey. */
  readonly dests: ReadonlyMap<string, RealServer>;
}

export interface IpvsCurrent {
  readonly virtualServers: ReadonlyMap<string, CurrentVirtualServer>;
  /** Sets that exist, with their members. */
  readonly ipsets: ReadonlyMap<string, ReadonlySet<string>>;
  /** Addresses on kube-ipvs0. */
  readonly addresses: ReadonlySet<string>;
}

/** A real server the render no longer wants. */
export interface RetiredRealServer {
  readonly vs: VirtualServer;
  readonly rs: RealServer;
  /** Its endpoint still exists (terminating or not ready), as opposed to gone from the EndpointSlices. */
  readonly lingering: boolean;
  /** Its virtual server stays (a deleted virtual server takes its real servers with it). */
  readonly vsKept: boolean;
}

export interface IpvsPlan {
  /** Services and wanted real servers: adds, edits, and deletes of virtual servers. */
  readonly ops: readonly IpvsOp[];
  /** Real servers to drain (weight 0, then delete): the caller's graceful termination. */
  readonly retired: readonly RetiredRealServer[];
  /** Real servers wanted again that sit at another weight (e.g. 0 while draining). */
  readonly revived: ReadonlyArray<{ readonly vs: VirtualServer; readonly rs: RealServer }>;
  /** `ipset restore` input; '' when nothing changes. */
  readonly ipsetScript: string;
  readonly addAddresses: readonly string[];
  readonly delAddresses: readonly string[];
}

export interface PlanOptions {
  readonly family: IPFamily;
  /** May this virtual server, not in the render, be deleted? */
  readonly owned: (vs: VirtualServer) => boolean;
}

/** The key of a real server within the whole table. */
export function destKey(vs: VirtualServer, rs: Pick<RealServer, 'address' | 'port'>): string {
  return `${virtualServerKey(vs)}/${realServerKey(rs)}`;
}

export function planSync(render: IpvsRender, current: IpvsCurrent, o: PlanOptions): IpvsPlan {
  const ops: IpvsOp[] = [];
  const retired: RetiredRealServer[] = [];
  const revived: Array<{ vs: VirtualServer; rs: RealServer }> = [];
  const touched = render.touched;

  const vsKeys = touched
    ? touched.virtualServers
    : new Set([...render.virtualServers.keys(), ...current.virtualServers.keys()]);
  const deletes: IpvsOp[] = [];
  for (const key of vsKeys) {
    const want = render.virtualServers.get(key);
    const have = current.virtualServers.get(key);
    if (!want) {
      if (have && o.owned(have.vs)) {
        deletes.push({ op: 'del-service', vs: have.vs });
        for (const rs of have.dests.values()) retired.push({ vs: have.vs, rs, lingering: false, vsKept: false });
      }
      continue;
    }
    if (!have) ops.push({ op: 'add-service', vs: want.vs });
    else if (!sameVirtualServer(have.vs, want.vs)) ops.push({ op: 'edit-service', vs: want.vs });
    const wanted = new Set<string>();
    for (const rs of want.realServers) {
      const rk = realServerKey(rs);
      wanted.add(rk);
      const d = have?.dests.get(rk);
      if (!d) ops.push({ op: 'add-dest', vs: want.vs, rs });
      else if (d.weight !== rs.weight) revived.push({ vs: want.vs, rs });
    }
    // Real servers already draining are reported again: their endpoint may have gone since (UDP: delete now).
    for (const [rk, d] of have?.dests ?? []) {
      if (wanted.has(rk)) continue;
      retired.push({ vs: want.vs, rs: d, lingering: want.lingering.has(rk), vsKept: true });
    }
  }
  // Deleting a virtual server first would refuse nothing, but adds go first
  // so a renamed address never leaves a gap with neither old nor new.
  ops.push(...deletes);

  return {
    ops,
    retired,
    revived,
    ipsetScript: ipsetScript(render, current, o.family),
    ...addressChanges(render, current),
  };
}

function ipsetScript(render: IpvsRender, current: IpvsCurrent, family: IPFamily): string {
  const lines: string[] = [];
  for (const s of IPSETS) {
    const name = ipsetName(s.name, family);
    const want = render.ipsets.get(name) ?? new Set<string>();
    const have = current.ipsets.get(name);
    if (!have) lines.push(`create ${name} ${ipsetCreateArgs(s.type, family)} -exist`);
    const candidates = render.touched ? (render.touched.entries.get(name) ?? []) : new Set([...want, ...(have ?? [])]);
    for (const e of candidates) {
      const w = want.has(e);
      const h = have?.has(e) ?? false;
      if (w && !h) lines.push(`add ${name} ${e} -exist`);
      else if (!w && h) lines.push(`del ${name} ${e} -exist`);
    }
  }
  return lines.length ? `${lines.join('\n')}\n` : '';
}

function addressChanges(render: IpvsRender, current: IpvsCurrent) {
  const addAddresses: string[] = [];
  const delAddresses: string[] = [];
  const candidates = render.touched
    ? render.touched.addresses
    : new Set([...render.bindAddresses, ...current.addresses]);
  for (const a of candidates) {
    const w = render.bindAddresses.has(a);
    const h = current.addresses.has(a);
    if (w && !h) addAddresses.push(a);
    else if (!w && h) delAddresses.push(a);
  }
  return { addAddresses, delAddresses };
}
