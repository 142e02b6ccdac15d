// The nftables mode, pure side (the platform side is src/platform/nftables).
// Same shape as every mode (docs/architecture.md): a renderer class, a Fake
// of the kernel interface and a trace over the Fake.
//
// NftablesRenderer (renderer.ts) turns a SyncState into one Transaction
// against the `kube-proxy` table of one family, with upstream's chain, set
// and map names (pkg/proxy/nftables/proxier.go syncProxyRules). One renderer
// per dataplane; it remembers what the table holds (elements and their
// owners, service chains, stale chains waiting to be deleted) so a partial
// sync writes only the changed services. render(state, now, snapshot):
//   - full when state.fullSync, after reset(), or when an input of the
//     static rules changed (needsFullSync tells the caller to read the
//     table back first and pass it as `snapshot`);
//   - memory advances as the transaction is built: the caller must call
//     reset() when applying it fails, so the next render is full;
//   - the endpoint layout ('upstream' | 'lean' | 'maps', static.ts) only
//     changes the rules inside service chains; DEFAULT_ENDPOINT_LAYOUT is
//     the production one and the default everywhere.
//
// Fake (fake.ts): one nftables table in memory. run(tx) applies a
// Transaction all-or-nothing with the kernel's refusals that matter to us;
// snapshot() is what a full sync reads back; dump() prints the table.
// listing.ts loads `nft list table` output into a Fake (explain, diff).
//
// trace (trace.ts): follows a new connection's first packet through a Fake
// along the kernel's hook path and reports the endpoints, REJECT/DROP,
// masquerade and every rule matched (TraceResult). The userspace mode's
// table is walked by it too, with that table's chains (`hooks`).
//
// Also here: names (names.ts), the static part of the table (static.ts), one
// service port's objects (serviceport.ts), the Transaction builder and its
// object model (transaction.ts, objects.ts), and the table diff that
// `kube-proxy-ts diff` prints (tablediff.ts).
//
// localhost.ts: localhost NodePorts (KEP-6032), which rules cannot serve: the
// loopback TCP relays a SyncState asks for and the `nft -f` script of our
// small reject table (`kube-proxy-ts-localhost`) beside upstream's table.

export { NftablesRenderer, EMPTY_SNAPSHOT, STALE_CHAIN_DELAY_MS } from './renderer.js';
export type { KernelSnapshot, RenderResult } from './renderer.js';
export { DEFAULT_ENDPOINT_LAYOUT, ENDPOINT_LAYOUTS, type EndpointLayout } from './static.js';
export { Fake, FakeError } from './fake.js';
export type { FakeChain, FakeSet } from './fake.js';
export { trace, KUBE_PROXY_HOOKS } from './trace.js';
export type { HookChains, NftTraceOptions, RuleSource, TraceCandidate, TraceResult, TraceStep } from './trace.js';
export { Transaction } from './transaction.js';
export { TABLE_NAME, nftFamily, type NftFamily } from './names.js';
export {
  LOCALHOST_TABLE,
  localhostRejectScript,
  planLocalhostNodePorts,
  type LocalhostPlan,
  type LocalhostRelaySpec,
} from './localhost.js';
