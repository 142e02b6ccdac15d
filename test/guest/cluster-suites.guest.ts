// The cluster behaviour suites in ipvs mode, in the QEMU guest: the same
// test/e2e/cluster-services.test.ts and cluster-lifecycle.test.ts cases that
// iptables and nftables pass on the host, with real TCP and UDP, and the ipvs
// mode's repair cases (test/e2e/ipvs-repair.test.ts), its datapath canary
// (test/e2e/canary-ipvs.test.ts) and the mode switches to and from ipvs mode
// (test/e2e/handover.test.ts). They run in
// this one process on one shared cluster (KPT_E2E_SHARED): building a cluster
// of namespaces with its API server and proxies takes minutes under emulation.
// The lifecycle suite goes last: its final case runs --cleanup on node2.
import { after } from 'node:test';

process.env['KPT_E2E_MODES'] ??= 'ipvs';
process.env['KPT_E2E_SHARED'] = '1';
const { E2EEnv } = await import('../netns/e2e.js');
await import('../e2e/cluster-services.test.js');
await import('../e2e/ipvs-repair.test.js');
await import('../e2e/canary-ipvs.test.js');
// The mode switches with ipvs mode: node1 goes from ipvs to iptables, nftables and ebpf mode and back
// (10-100 s a switch under emulation).
process.env['KPT_HANDOVER_MODES'] ??= 'ipvs,iptables,nftables,ebpf';
process.env['KPT_HANDOVER_HUB'] ??= 'ipvs';
await import('../e2e/handover.test.js');
await import('../e2e/cluster-lifecycle.test.js');
after(() => E2EEnv.disposeShared());
