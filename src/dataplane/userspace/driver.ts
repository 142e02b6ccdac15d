// The userspace mode's driver for the one reconciler (src/engine/reconciler.ts;
// the vocabulary is src/core/objects.ts). Each Service owns two kinds of
// objects:
//   listener  key: the listener key (service port, protocol, endpoint set);
//             value: its ListenerSpec (protocol, endpoints, affinity). The
//             applier opens it, which chooses its port; hands a changed
//             value to the open listener (same port, relays to endpoints that
//             stay are kept); closes it on delete.
//   portal    key: its element's key text (`ip . proto . port` for a Service
//             address, `proto . nodePort` for a NodePort); value: where it
//             sends new flows (a listener, reject, drop) and which service
//             port asks. Written as an element of one of the table's maps
//             (rules.ts: portalElement).
// Listeners come first, so a redirect is written only to a port that
// listens; deletes run the other way, so a redirect is removed before its
// listener closes.
//
// A listener's port is the applier's state, not part of any value: a
// listener keeps its port while it is open, and is only opened again (on a
// new port) in a sync that also writes its portals: after it was closed
// (its portals were refused meanwhile, so they are put anew), or after it
// died (drift: the table is replaced). So a portal whose value is unchanged
// still points at the right port.
//
// How the table is written (TableWrite): when the reconciler needs the live
// state (the first sync, after a failure or drift), the table is replaced
// whole, and what the reconciler adopts first is the listeners the process
// holds and no portal at all: that is what the table holds once the
// transaction has deleted it. Otherwise the reconciler's memory is the
// table, and a sync, full or partial, deletes and adds only the elements of
// portals whose target changed: the static chains depend on the config
// alone, and a change to them by anyone else is drift. If
// a listener fails to open, its portals are refused and the applier calls
// failed(), so the next sync replaces the table and tries again; hence, when
// elements are changed, a portal that sends to a listener is known to sit in
// a redirect map.
import { BugError } from '../../core/errors.js';
import type { Keyed, ObjectDriver, ObjectOp, ObjectSpec } from '../../core/objects.js';
import type { DataplaneConfig, Endpoint, ServicePort, SyncState } from '../../core/types.js';
import type { Element } from '../nftables/objects.js';
import type { Transaction } from '../nftables/transaction.js';
import { planServicePort, type ListenerSpec, type PortalTarget } from './plan.js';
import { byMap, portalElement, portalKeys, portalSlot, renderStatic, userspaceTransaction } from './rules.js';

export type UserspaceKind = 'listener' | 'portal';

export interface PortalValue {
  /** The service port asking; when two ask for one address, the first in key order wins (as in a whole render). */
  readonly servicePortKey: string;
  readonly target: PortalTarget;
}

export type UserspaceValue = ListenerSpec | PortalValue;
export type UserspaceObject = Keyed<UserspaceKind, UserspaceValue>;
export type UserspaceOp = ObjectOp<UserspaceKind, UserspaceValue>;

const isListener = (v: UserspaceValue): v is ListenerSpec => 'endpoints' in v;

function sameEndpoints(a: readonly Endpoint[], b: readonly Endpoint[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i]!.key !== b[i]!.key) return false;
  return true;
}

function sameTarget(a: PortalTarget, b: PortalTarget): boolean {
  return a.kind === b.kind && (a.kind !== 'listener' || a.listener === (b as typeof a).listener);
}

export const USERSPACE_SPEC: ObjectSpec<UserspaceKind, UserspaceValue> = {
  order: ['listener', 'portal'],
  same(a, b) {
    if (isListener(a)) {
      const l = b as ListenerSpec;
      // The relay chooses by endpoint key only; other endpoint fields do not reach it.
      return a.protocol === l.protocol && a.stickyMs === l.stickyMs && sameEndpoints(a.endpoints, l.endpoints);
    }
    return sameTarget(a.target, (b as PortalValue).target);
  },
  merge(kind, values) {
    // Listener keys carry their service port, so only portals are ever shared.
    if (kind === 'listener') return values[values.length - 1]!;
    let first = values[0] as PortalValue;
    for (const v of values) if ((v as PortalValue).servicePortKey < first.servicePortKey) first = v as PortalValue;
    return first;
  },
};

export interface DesiredObjects {
  /** Per Service: its listeners and portals (empty: withdrawn). */
  readonly owners: Array<readonly [string, UserspaceObject[]]>;
  /** The service ports among them this mode cannot serve, with the reason. */
  readonly skipped: Array<{ readonly servicePortKey: string; readonly reason: string }>;
}

/**
 * What each Service wants: every Service of the state when `full`, else
 * those in changedServices (a Service without ports left is withdrawn).
 */
export function desiredObjects(state: SyncState, full: boolean): DesiredObjects {
  const byService = new Map<string, UserspaceObject[]>();
  const skipped: Array<{ servicePortKey: string; reason: string }> = [];
  const add = (key: string, sp: ServicePort | undefined) => {
    if (!sp) return;
    let objects = byService.get(sp.serviceKey);
    if (objects === undefined) {
      if (!full) return;
      objects = [];
      byService.set(sp.serviceKey, objects);
    }
    const p = planServicePort(sp, state.categorized.get(key));
    if (p.skipped !== undefined) {
      skipped.push({ servicePortKey: key, reason: p.skipped });
      return;
    }
    for (const l of p.listeners) objects.push({ kind: 'listener', key: l.key, value: l });
    const internal: PortalValue = { servicePortKey: key, target: p.portal.internal };
    let external: PortalValue | null = null;
    const keys = portalKeys(p.portal);
    for (let i = 0; i < keys.length; i++) {
      const portal = keys[i]!;
      // One owner wants each key once; within a Service, the first port that claims it wins.
      if (claimed(objects, portal)) continue;
      if (i > 0 && external === null)
        external =
          p.portal.external === p.portal.internal ? internal : { servicePortKey: key, target: p.portal.external! };
      objects.push({ kind: 'portal', key: portal, value: i === 0 ? internal : external! });
    }
  };
  if (full) for (const [key, sp] of state.services) add(key, sp);
  else {
    for (const svc of state.changedServices) byService.set(svc, []);
    if (state.changedServicePorts) for (const key of state.changedServicePorts) add(key, state.services.get(key));
    else for (const [key, sp] of state.services) if (state.changedServices.has(sp.serviceKey)) add(key, sp);
  }
  return { owners: [...byService], skipped };
}

function claimed(objects: readonly UserspaceObject[], portal: string): boolean {
  for (const o of objects) if (o.kind === 'portal' && o.key === portal) return true;
  return false;
}

/** The userspace mode's ObjectDriver (see the top of this file). */
export class UserspaceDriver implements ObjectDriver<UserspaceKind, UserspaceValue, SyncState> {
  readonly spec = USERSPACE_SPEC;

  constructor(readonly config: DataplaneConfig) {}

  desired(state: SyncState, full: boolean): Array<readonly [string, UserspaceObject[]]> {
    return desiredObjects(state, full).owners;
  }

  /** desired(), with the service ports it had to skip. */
  wanted(state: SyncState, full: boolean): DesiredObjects {
    return desiredObjects(state, full);
  }

  /** The table's part of a plan: see portalTransaction. */
  transaction(
    ops: readonly UserspaceOp[],
    port: (listener: string) => number | undefined,
    write: TableWrite,
  ): { tx: Transaction; unserved: string[] } {
    return portalTransaction(ops, port, this.config, write);
  }
}

/** A plan's listener work, in the order the applier does it around the table's transaction. */
export interface ListenerWork {
  /** Before the transaction: listeners to open, and open ones whose endpoints or affinity changed. */
  readonly open: ListenerSpec[];
  readonly update: ListenerSpec[];
  /** The portal operations, for portalTransaction. */
  readonly portals: UserspaceOp[];
  /** After the transaction: listeners to close. */
  readonly close: string[];
}

export function listenerWork(ops: readonly UserspaceOp[]): ListenerWork {
  const work: ListenerWork = { open: [], update: [], portals: [], close: [] };
  for (const op of ops) {
    if (op.kind === 'portal') work.portals.push(op);
    else if (op.op === 'delete') work.close.push(op.key);
    else (op.before === undefined ? work.open : work.update).push(op.value as ListenerSpec);
  }
  return work;
}

/**
 * How a sync writes the table:
 *   replace   the whole table anew: renderStatic, then an element for every
 *             portal (the plan must have been made right after adopt(), so
 *             that every wanted portal is a put; deletes and earlier values
 *             do not matter, the table was deleted);
 *   elements  only the changed portals' elements: the element each changed
 *             or removed portal had is deleted (found by its earlier target),
 *             the new ones are added.
 */
export type TableWrite = 'replace' | 'elements';

/**
 * The table's transaction for a plan's portal operations. `port` gives an
 * open listener's port (after the plan's listeners were opened).
 * `unserved`: portals sent to a listener without a port, written as refusals.
 */
export function portalTransaction(
  ops: readonly UserspaceOp[],
  port: (listener: string) => number | undefined,
  config: DataplaneConfig,
  write: TableWrite,
): { tx: Transaction; unserved: string[] } {
  const tx = write === 'replace' ? renderStatic(config) : userspaceTransaction(config.family);
  const adds: Element[] = [];
  const unserved: string[] = [];
  for (const op of ops) {
    if (op.kind !== 'portal') continue;
    if (write === 'elements' && op.before !== undefined) tx.delete(portalSlot(op.key, redirected(op.key, op.before)));
    if (op.op === 'delete') continue;
    const { target } = op.value as PortalValue;
    const p = target.kind === 'listener' ? port(target.listener) : undefined;
    if (target.kind === 'listener' && p === undefined) unserved.push(op.key);
    adds.push(portalElement(op.key, target, p));
  }
  // Deletes first: a portal whose target changed within one map is deleted, then added again.
  for (const e of byMap(adds)) tx.add(e);
  return { tx, unserved };
}

/** Whether a portal written with this value sits in a redirect map (see the top of this file). */
function redirected(key: string, before: UserspaceValue | null): boolean {
  if (before === null || isListener(before))
    throw new BugError(`userspace portal ${key} has no known earlier target in a partial sync`);
  return before.target.kind === 'listener';
}
