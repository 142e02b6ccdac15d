// The userspace mode, pure side (the platform side, with the listeners and
// the TCP/UDP relays, is src/platform/userspace). Same shape as every mode
// (docs/architecture.md): a driver for the one reconciler, a Fake of the
// kernel interface and a trace over the Fake. Its nftables table is built, modelled and
// walked with the nftables mode's objects, Fake and tracer.
//
// UserspaceDriver (driver.ts): the mode's objects for the one reconciler
// (src/engine/reconciler.ts): per Service, a listener per service port and
// endpoint set and a portal per Service address and NodePort; and the
// translation of the reconciler's operations into listener work and the
// table's Transaction (the whole table when it is replaced: the first sync,
// after a failure or drift; else the changed portals' elements, full sync or
// partial). A listener's port is chosen when it opens, so the portals'
// elements are written after the listeners opened. UserspacePlanner
// (src/platform/userspace/planner.ts) joins it to the reconciler for the
// dataplane, `kube-proxy-ts diff` and the tests.
//
// planUserspace (plan.ts) decides, for a whole state, the listeners (one
// per service port and endpoint set) and the portals (ClusterIP,
// externalIPs, LB VIPs, NodePort) with their targets; renderRules (rules.ts)
// writes the whole `kube-proxy-userspace` table for the ports the listeners
// got, as one Transaction: what the driver's full transaction must equal
// (driver.test.ts), and the whole table the tests and the fuzz load.
//
// Fake (fake.ts): the mode's kernel interface in memory: its nftables table
// (an nftables Fake of that table: run(tx) applies a Transaction
// all-or-nothing) and the listener table (listen(spec) -> port, close(key)),
// as UserspaceDataplane keeps it.
//
// trace (trace.ts): the nftables tracer walks a new connection's first
// packet through the table's hooks (USERSPACE_HOOKS); this one follows a
// redirect to its listener and reports the endpoints its relay may choose
// (masq is always true: the relay connects from the node), or REJECT/DROP.
//
// RoundRobin (loadbalancer.ts): the endpoint choice of one listener, with
// ClientIP affinity, shared by the real relays.

export { desiredObjects, listenerWork, portalTransaction, UserspaceDriver, USERSPACE_SPEC } from './driver.js';
export type { PortalValue, UserspaceKind, UserspaceObject, UserspaceOp, UserspaceValue } from './driver.js';
export { Fake, FIRST_FAKE_PORT } from './fake.js';
export type { FakeListener } from './fake.js';
export { trace, USERSPACE_HOOKS } from './trace.js';
export type { RuleSource, TraceCandidate, TraceResult, TraceStep } from './trace.js';
export type {
  EndpointSetKind,
  ListenerSpec,
  PortalSpec,
  PortalTarget,
  ServicePortPlan,
  UserspacePlan,
} from './plan.js';
export { listenerKey, planServicePort, planUserspace } from './plan.js';
export { CHAINS, NODEPORT_PORTALS, renderRules, SERVICE_PORTALS, TABLE_NAME, userspaceTransaction } from './rules.js';
export { RoundRobin } from './loadbalancer.js';
