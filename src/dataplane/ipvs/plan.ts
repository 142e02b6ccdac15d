// planOps: the reconciler's ops for IPVS mode's objects (driver.ts) turned
// into what the platform applies: IPVS requests, an `ipset restore` script,
// the addresses to add to and remove from kube-ipvs0, whether the rules'
// restore text must be written again, and the real servers that are no
// longer wanted (the caller drains those gracefully instead of deleting them
// here; a real server wanted again while it drains gets its weight back).
// Virtual servers the caller may not delete (--ipvs-exclude-cidrs) are left,
// with their real servers.
import type { ObjectOp } from '../../core/objects.js';
import type { IPFamily } from '../../core/types.js';
import { renderedVirtualServers, type IpvsDesired } from './driver.js';
import { ipsetCreateArgs, ipsetName } from './ipsets.js';
import {
  realServerKey,
  virtualServerKey,
  type IpvsKind,
  type IpvsOp,
  type IpvsValue,
  type RealServer,
  type VirtualServer,
} from './objects.js';

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
  /** Services and wanted real servers: adds, edits, then deletes of virtual servers. */
  readonly ops: readonly IpvsOp[];
  /** Real servers to drain (weight 0, then delete): the caller's graceful termination. */
  readonly retired: readonly RetiredRealServer[];
  /** Real servers wanted again that sit at another weight (e.g. 0 while draining). */
  readonly revived: ReadonlyArray<{ readonly vs: VirtualServer; readonly rs: RealServer }>;
  /** `ipset restore` input; '' when nothing changes. */
  readonly ipsetScript: string;
  readonly addAddresses: readonly string[];
  readonly delAddresses: readonly string[];
  /** A `rule` object came or went (whether a set has members is asked of the reconciler). */
  readonly rulesChanged: boolean;
}

export interface PlanOptions {
  readonly family: IPFamily;
  /** The render the ops were planned from. */
  readonly desired: Pick<IpvsDesired, 'owners' | 'lingering'>;
  /**
   * Real servers being drained, by destKey: the kernel holds them at weight
   * 0 though no owner wants them. One wanted again is revived, not added;
   * one of a virtual server this render re-rendered is retired again (its
   * endpoint may have gone since: a UDP one is then deleted at once).
   */
  readonly draining?: ReadonlyMap<string, { readonly vs: VirtualServer; readonly rs: RealServer }>;
  /** May this virtual server, no longer wanted, be deleted? Default: yes. */
  readonly deletable?: (vs: VirtualServer) => boolean;
}

type Op = ObjectOp<IpvsKind, IpvsValue>;

export function planOps(objectOps: readonly Op[], o: PlanOptions): IpvsPlan {
  const adds: IpvsOp[] = [];
  const deletes: IpvsOp[] = [];
  const retired: RetiredRealServer[] = [];
  const revived: Array<{ vs: VirtualServer; rs: RealServer }> = [];
  const creates: string[] = [];
  const members: string[] = [];
  const gone: string[] = [];
  const addAddresses: string[] = [];
  const delAddresses: string[] = [];
  let rulesChanged = false;
  /** Virtual servers going (their real servers go with them). */
  const vsGone = new Set<string>();
  for (const op of objectOps) if (op.op === 'delete' && op.kind === 'vs') vsGone.add(op.key);
  const draining = o.draining !== undefined && o.draining.size > 0 ? o.draining : null;
  /** Real servers this plan decides on (only needed to leave them out of the draining ones). */
  const decided = draining ? new Set<string>() : null;

  for (const op of objectOps) {
    const v = op.op === 'put' ? op.value : op.before;
    switch (op.kind) {
      case 'set':
        if (v?.t !== 'set') break;
        if (op.op === 'put') creates.push(`create ${op.key} ${ipsetCreateArgs(v.type, o.family)} -exist`);
        else gone.push(`destroy ${op.key}`);
        break;
      case 'bind':
        (op.op === 'put' ? addAddresses : delAddresses).push(op.key);
        break;
      case 'rule':
        rulesChanged = true;
        break;
      case 'vs':
        if (v?.t !== 'vs') break;
        if (op.op === 'put') adds.push({ op: op.before === undefined ? 'add-service' : 'edit-service', vs: v.vs });
        else if (o.deletable?.(v.vs) ?? true) deletes.push({ op: 'del-service', vs: v.vs });
        break;
      case 'rs': {
        if (v?.t !== 'rs') break;
        decided?.add(op.key);
        if (op.op === 'put') {
          const was = op.before?.t === 'rs' ? op.before.rs : draining?.get(op.key)?.rs;
          if (was === undefined) adds.push({ op: 'add-dest', vs: v.vs, rs: v.rs });
          else revived.push({ vs: v.vs, rs: v.rs });
          break;
        }
        const vsKey = virtualServerKey(v.vs);
        const lingering = o.desired.lingering.get(vsKey)?.has(realServerKey(v.rs)) ?? false;
        retired.push({ vs: v.vs, rs: v.rs, lingering, vsKept: !vsGone.has(vsKey) });
        break;
      }
      default: {
        // A set member: the kind is the set.
        const name = ipsetName(op.kind, o.family);
        if (op.op === 'put') members.push(`add ${name} ${op.key} -exist`);
        else gone.push(`del ${name} ${op.key} -exist`);
      }
    }
  }
  // Draining real servers of re-rendered virtual servers are reported again: their endpoint may have gone since.
  const rendered = draining ? renderedVirtualServers(o.desired.owners) : null;
  for (const [key, d] of draining ?? []) {
    const vsKey = virtualServerKey(d.vs);
    if (decided!.has(key) || !rendered!.has(vsKey)) continue;
    const rs = { ...d.rs, weight: 0 };
    const lingering = o.desired.lingering.get(vsKey)?.has(realServerKey(rs)) ?? false;
    retired.push({ vs: d.vs, rs, lingering, vsKept: true });
  }
  const script = [...creates, ...members, ...gone];
  return {
    // Adds go first so a renamed address never leaves a gap with neither old nor new.
    ops: [...adds, ...deletes],
    retired,
    revived,
    ipsetScript: script.length ? `${script.join('\n')}\n` : '',
    addAddresses,
    delAddresses,
    rulesChanged,
  };
}
