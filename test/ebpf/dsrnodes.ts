// Two nodes of a namespace cluster running the programs with hand-written
// NodePort Services, as each node's proxy writes them in dsr mode: the same
// Services everywhere, and in each node's maps a port's local set holds
// that node's own endpoints (src/dataplane/ebpf/entries.ts does so for
// external ports with eTP Cluster). Shared by test/e2e/ebpf-dsr.test.ts and
// bench/ebpf-dsr.ts.
import * as L from '../../src/dataplane/ebpf/layout.js';
import type { Protocol } from '../../src/core/types.js';
import type { NetnsCluster } from '../netns/cluster.js';
import { BpfNode, TEST_PIN_ROOT } from './bpfnode.js';
import * as E from './entries.js';

/** A NodePort (eTP Cluster) with one endpoint: a pod of the cluster. */
export interface DsrPort {
  readonly svcId: number;
  readonly nodePort: number;
  readonly proto: Protocol;
  readonly pod: string;
  readonly port: number;
}

/** Service ids of the IPv6 ports: this far above their IPv4 twins', so that their endpoint sets differ. */
const V6_ID = 100;

/** One node's map contents, IPv6 too in a dual-stack cluster; CFG_DSR with dsr. */
export function dsrNodeOps(c: NetnsCluster, node: string, ports: readonly DsrPort[], dsr: boolean): E.HexOp[] {
  const n = c.node(node);
  const ops: E.HexOp[] = [
    ...cfgOps(!!n.ip6, dsr),
    E.podCidr('10.244.0.0', 16),
    E.svcCidr('10.96.0.0', 16),
    E.addr(n.ip, L.ADDR_LOCAL | L.ADDR_NODEPORT),
    E.addr(n.podGateway, L.ADDR_LOCAL),
  ];
  if (n.ip6 && n.podGateway6)
    ops.push(
      E.podCidr('fd00:10:244::', 56),
      E.addr(n.ip6, L.ADDR_LOCAL | L.ADDR_NODEPORT),
      E.addr(n.podGateway6, L.ADDR_LOCAL),
    );
  const families = n.ip6 ? (['IPv4', 'IPv6'] as const) : (['IPv4'] as const);
  for (const family of families)
    for (const p of ports) {
      const pod = c.pod(p.pod);
      const svcId = family === 'IPv6' ? p.svcId + V6_ID : p.svcId;
      const ep = { addr: family === 'IPv6' ? pod.ip6! : pod.ip, port: p.port };
      const here = pod.node === node;
      const clusterSet = L.clusterSetOf(svcId);
      const localSet = here ? L.localSetOf(svcId) : 0;
      ops.push(...E.set(clusterSet, [ep]), ...(here ? E.set(localSet, [ep]) : []));
      const any = family === 'IPv6' ? '::' : '0.0.0.0';
      ops.push(E.svc(any, p.nodePort, p.proto, { svcId, kind: 'nodePort', clusterSet, localSet }));
    }
  return ops;
}

function cfgOps(v6: boolean, dsr: boolean): E.HexOp[] {
  const flags = L.CFG_DETECT_CIDR | (dsr ? L.CFG_DSR : 0);
  return v6 ? [E.cfg('IPv4', flags), E.cfg('IPv6', flags)] : [E.cfg('IPv4', flags)];
}

/** node1 and node2 with the programs loaded and attached (node1 with XDP on its uplink) and the Services written. */
export async function startDsrNodes(
  c: NetnsCluster,
  ports: readonly DsrPort[],
  dsr: boolean,
): Promise<{ n1: BpfNode; n2: BpfNode; xdp: string[] }> {
  const started: BpfNode[] = [];
  try {
    const n1 = await BpfNode.start(c.node('node1').ns);
    started.push(n1);
    const n2 = await BpfNode.start(c.node('node2').ns);
    started.push(n2);
    const r1 = await n1.helper<{ xdp: { attached: string[] } | null }>({
      cmd: 'load',
      pinRoot: TEST_PIN_ROOT,
      xdp: 'auto',
      nodeIPs: [c.node('node1').ip],
      ops: dsrNodeOps(c, 'node1', ports, dsr),
    });
    await n2.helper({ cmd: 'load', pinRoot: TEST_PIN_ROOT, ops: dsrNodeOps(c, 'node2', ports, dsr) });
    return { n1, n2, xdp: r1.xdp?.attached ?? [] };
  } catch (e) {
    await Promise.all(started.map((n) => n.stop()));
    throw e;
  }
}

/** Switch the nodes between dsr and snat mode (CFG_DSR in kpt_cfg; v6: the cluster is dual-stack). */
export async function setDsr(nodes: readonly BpfNode[], dsr: boolean, v6 = false): Promise<void> {
  for (const n of nodes) await n.helper({ cmd: 'apply', pinRoot: TEST_PIN_ROOT, ops: cfgOps(v6, dsr) });
}
