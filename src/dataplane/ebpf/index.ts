// The ebpf mode, pure side (the platform side is src/platform/ebpf; the BPF
// programs themselves are restricted C in src/bpf). Same shape as every
// mode (docs/architecture.md): a driver for the one reconciler, a Fake of
// the kernel interface and a trace over the Fake.
//
// The kernel interface is a set of BPF maps that the tc programs read on
// every new connection: services by (address, port, protocol), endpoint
// sets by slot, Maglev tables, source ranges, the node's addresses, the
// local-pod detector and per-family settings. Their keys and values are the
// structs of src/bpf/abi.h, each described once in abi.ts (struct.ts derives
// offsets, encoders and decoders; abi.test.ts checks every description
// against the compiled object's BTF); layout.ts converts the proxy's types
// to and from them. Two maps are the programs' own runtime
// state: connections (so established flows keep their endpoint) and ClientIP
// affinity.
//
// EbpfDriver (driver.ts) says which map entries each service port and the
// node want (entries.ts builds them), for one family; the one reconciler
// (src/engine/reconciler.ts, put together with the driver by
// src/platform/ebpf/planner.ts) keeps who wants what and answers with the
// writes, in a safe order: a one-endpoint change is a handful of writes.
// After a failed apply the next plan is full and starts from what the kernel
// holds. Service-port ids and endpoint slots are kept stable, also across a
// restart (recovered from the live maps), so a restart rewrites nothing.
//
// Fake (fake.ts): the maps in memory with the kernel's semantics (sizes,
// capacity, LRU eviction, longest-prefix lookups, arrays); print() lists
// what it holds. It implements MapStore (store.ts), as the live maps do.
//
// trace (trace.ts): the programs' lookup path for a connection's first
// packet, over a Fake or the live maps, with every candidate endpoint.
//
// Also here: the flow hash and Maglev table (hash.ts), entry formatting
// (describe.ts), older versions' masquerade table as an nftables transaction (masq.ts), and which
// service ports the per-Service traffic counters count (traffic.ts:
// kpt_traffic entries, written after the driver's operations).

export { EbpfDriver, EBPF_SPEC, NODE_OWNER, liveObjects, toMapOps } from './driver.js';
export type { EbpfDesired, EbpfDesiredInput, EbpfDriverOptions, EbpfMemory, LiveEntries, Skipped } from './driver.js';
export { assignSlots, nodeEntries, servicePortEntries } from './entries.js';
export type { IfaceInfo, MapEntry, PortContext } from './entries.js';
export { Fake, FakeError } from './fake.js';
export { trace } from './trace.js';
export type { EbpfTraceOptions, RuleSource, TraceCandidate, TraceResult, TraceStep } from './trace.js';
export type { MapOp, MapReader, MapStore } from './store.js';
export { clientHash, maglevTable, isMaglevSize } from './hash.js';
export { entryText } from './describe.js';
export { masqueradeTable, deleteMasqueradeTable, MASQ_CHAIN, MASQ_TABLE } from './masq.js';
export { TrafficCounterPlan, TRAFFIC_MAX_PER_FAMILY } from './traffic.js';
export type { TrafficSlot } from './traffic.js';
