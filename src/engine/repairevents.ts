// The Event a repaired datapath posts on this proxy's Node: an operator sees
// in `kubectl get events` that something on the node keeps changing the
// proxy's rules (a firewall reload, a second tool), which the log alone would
// hide. Pure: the poster is injected (cmd wires it to the EventRecorder).
import { nullObserver, type ProxierObserver, type RepairReport } from './observer.js';

/** Event reason (stable, as upstream's CamelCase reasons) and action. */
export const REPAIR_EVENT_REASON = 'DatapathRepaired';
export const REPAIR_EVENT_ACTION = 'Repair';

/** The Event's note: what was noticed, in which family and mode, and how long the repair took. */
export function repairNote(r: RepairReport): string {
  return `${r.mode} ${r.family} datapath repaired in ${(r.seconds * 1000).toFixed(0)} ms after ${r.reason}: ${r.detail}`;
}

/** An observer that posts one Warning Event per repair (tee it with the others). */
export function repairEventObserver(post: (reason: string, action: string, note: string) => void): ProxierObserver {
  return { ...nullObserver, datapathRepaired: (r) => post(REPAIR_EVENT_REASON, REPAIR_EVENT_ACTION, repairNote(r)) };
}
