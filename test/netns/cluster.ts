// A two-node cluster of network namespaces (see topology.ts for the plan).
// create() builds it; destroy() removes every namespace it made and kills
// the processes it started. Namespaces are registered with cleanup.ts
// BEFORE they are created, so a crash half-way still removes them; stale
// namespaces of dead runs are swept first.
import { Agent } from './agentclient.js';
import { deleteNamespaceSync, sweepStaleNamespaces, trackNamespace, untrackNamespace } from './cleanup.js';
import { newPrefix } from './names.js';
import { ip, nsRun } from './spawn.js';
import {
  allNamespaces,
  GATEWAY_IP,
  planTopology,
  SEGMENT6_PREFIX,
  SEGMENT_PREFIX,
  SERVICE_CIDR,
  SERVICE_CIDR6,
  type NodeInfo,
  type PodInfo,
  type Topology,
} from './topology.js';

export interface ClusterOptions {
  readonly nodeCount?: number;
  readonly podsPerNode?: number;
  /** Ports each pod's echo servers listen on. */
  readonly tcpPorts?: number[];
  readonly udpPorts?: number[];
  /**
   * Dual-stack (default off): IPv6 addresses on the segment, nodes and pods
   * (topology.ts), DAD off; the pods' echo servers also listen on IPv6.
   */
  readonly ipv6?: boolean;
  /**
   * Default off: the pod veths of every node are ports of a bridge with this
   * name, which carries the pod gateway address (for --detect-local-mode
   * BridgeInterface). Off: each veth carries the gateway address itself.
   */
  readonly podBridge?: string;
}

export class NetnsCluster {
  private readonly agents = new Map<string, Agent>();
  private destroyed = false;

  private constructor(
    readonly topo: Topology,
    private readonly opts: ClusterOptions = {},
  ) {}

  get nodes(): readonly NodeInfo[] {
    return this.topo.nodes;
  }
  get pods(): readonly PodInfo[] {
    return this.topo.pods;
  }
  get external() {
    return this.topo.external;
  }
  get controlPlane() {
    return this.topo.controlPlane;
  }
  namespaces(): string[] {
    return allNamespaces(this.topo);
  }

  node(name: string): NodeInfo {
    const n = this.topo.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`no node ${name}`);
    return n;
  }
  pod(name: string): PodInfo {
    const p = this.topo.pods.find((x) => x.name === name);
    if (!p) throw new Error(`no pod ${name}`);
    return p;
  }

  /** Build the namespaces, links, addresses and routes, and start pod echo servers. */
  static async create(opts: ClusterOptions = {}): Promise<NetnsCluster> {
    sweepStaleNamespaces();
    const c = new NetnsCluster(
      planTopology(newPrefix(), opts.nodeCount ?? 2, opts.podsPerNode ?? 2, opts.ipv6 ?? false),
      opts,
    );
    try {
      await c.build();
      await c.startServers(opts.tcpPorts ?? [8080], opts.udpPorts ?? [5353]);
    } catch (err) {
      await c.destroy();
      throw err;
    }
    return c;
  }

  private async build(): Promise<void> {
    const t = this.topo;
    for (const ns of this.namespaces()) {
      trackNamespace(ns);
      await ip(['netns', 'add', ns]);
      await ip(['-n', ns, 'link', 'set', 'lo', 'up']);
      // Interfaces created later (veth ends) inherit 'default': no DAD, so IPv6 addresses are usable at once.
      if (this.opts.ipv6)
        await nsRun(ns, ['sysctl', '-q', '-w', 'net.ipv6.conf.default.accept_dad=0', 'net.ipv6.conf.all.accept_dad=0']);
    }
    await ip(['-n', t.switchNs, 'link', 'add', 'br0', 'type', 'bridge']);
    await ip(['-n', t.switchNs, 'addr', 'add', `${GATEWAY_IP}/${SEGMENT_PREFIX}`, 'dev', 'br0']);
    // Without an MLD querier, snooping could hide IPv6 neighbour solicitations: flood multicast instead.
    if (this.opts.ipv6) await ip(['-n', t.switchNs, 'link', 'set', 'br0', 'type', 'bridge', 'mcast_snooping', '0']);
    await ip(['-n', t.switchNs, 'link', 'set', 'br0', 'up']);
    await nsRun(t.switchNs, ['sysctl', '-q', '-w', 'net.ipv4.ip_forward=0']);
    await this.plug('cp', t.controlPlane.ns, [t.controlPlane.ip]);
    await this.plug('ext', t.external.ns, [t.external.ip, t.external.ip2], t.external.ip6 ? [t.external.ip6] : []);
    // External clients send Service traffic to node1 unless a test routes an IP elsewhere.
    await ip(['-n', t.external.ns, 'route', 'add', SERVICE_CIDR, 'via', t.nodes[0]!.ip]);
    if (t.nodes[0]!.ip6) await ip(['-n', t.external.ns, '-6', 'route', 'add', SERVICE_CIDR6, 'via', t.nodes[0]!.ip6]);
    await Promise.all(t.nodes.map((n) => this.buildNode(n)));
  }

  /** Attach ns to the switch: port `port` on br0, `eth0` with addrs inside ns. */
  private async plug(port: string, ns: string, addrs: string[], addrs6: string[] = []): Promise<void> {
    const sw = this.topo.switchNs;
    await ip(['-n', sw, 'link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
    await ip(['-n', sw, 'link', 'set', port, 'master', 'br0', 'up']);
    for (const a of addrs) await ip(['-n', ns, 'addr', 'add', `${a}/${SEGMENT_PREFIX}`, 'dev', 'eth0']);
    for (const a of addrs6)
      await ip(['-n', ns, '-6', 'addr', 'add', `${a}/${SEGMENT6_PREFIX}`, 'dev', 'eth0', 'nodad']);
    await ip(['-n', ns, 'link', 'set', 'eth0', 'up']);
  }

  private async buildNode(n: NodeInfo): Promise<void> {
    const port = `n${n.name.replace(/\D/g, '')}`;
    await this.plug(port, n.ns, [n.ip], n.ip6 ? [n.ip6] : []);
    await nsRun(n.ns, [
      'sysctl',
      '-q',
      '-w',
      'net.ipv4.ip_forward=1',
      'net.ipv4.conf.all.rp_filter=0',
      'net.ipv4.conf.default.rp_filter=0',
      // A packet for a Service address the proxy has not programmed yet is routed back out to the
      // gateway; an ICMP redirect for it would make the client bypass this node from then on.
      'net.ipv4.conf.all.send_redirects=0',
      'net.ipv4.conf.default.send_redirects=0',
      'net.ipv4.conf.eth0.send_redirects=0', // all and the device are OR'ed for this one
    ]);
    if (n.ip6) await nsRun(n.ns, ['sysctl', '-q', '-w', 'net.ipv6.conf.all.forwarding=1']);
    await ip(['-n', n.ns, 'route', 'add', 'default', 'via', GATEWAY_IP]);
    for (const other of this.topo.nodes) {
      if (other !== n) await ip(['-n', n.ns, 'route', 'add', other.podCIDR, 'via', other.ip]);
      if (other !== n && other.podCIDR6 && other.ip6)
        await ip(['-n', n.ns, '-6', 'route', 'add', other.podCIDR6, 'via', other.ip6]);
    }
    const br = this.opts.podBridge;
    if (br) {
      await ip(['-n', n.ns, 'link', 'add', br, 'type', 'bridge']);
      await ip(['-n', n.ns, 'addr', 'add', `${n.podGateway}/32`, 'dev', br]);
      if (n.podGateway6) await ip(['-n', n.ns, '-6', 'addr', 'add', `${n.podGateway6}/128`, 'dev', br, 'nodad']);
      await ip(['-n', n.ns, 'link', 'set', br, 'up']);
    }
    await Promise.all(n.pods.map((p, i) => this.buildPod(n, p, `veth${i}`)));
  }

  /** A pod: eth0 with a /32, default route via the node's gateway address on the node end of the veth. */
  private async buildPod(n: NodeInfo, p: PodInfo, hostIf: string): Promise<void> {
    const br = this.opts.podBridge;
    const via = br ?? hostIf; // the node-side interface that carries the gateway address and the pod route
    await ip(['-n', n.ns, 'link', 'add', hostIf, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', p.ns]);
    if (br) await ip(['-n', n.ns, 'link', 'set', hostIf, 'master', br]);
    else await ip(['-n', n.ns, 'addr', 'add', `${n.podGateway}/32`, 'dev', hostIf]);
    if (!br && n.podGateway6)
      await ip(['-n', n.ns, '-6', 'addr', 'add', `${n.podGateway6}/128`, 'dev', hostIf, 'nodad']);
    await ip(['-n', n.ns, 'link', 'set', hostIf, 'up']);
    await ip(['-n', n.ns, 'route', 'add', `${p.ip}/32`, 'dev', via]);
    await ip(['-n', p.ns, 'addr', 'add', `${p.ip}/32`, 'dev', 'eth0']);
    await ip(['-n', p.ns, 'link', 'set', 'eth0', 'up']);
    await ip(['-n', p.ns, 'route', 'add', n.podGateway, 'dev', 'eth0', 'scope', 'link']);
    await ip(['-n', p.ns, 'route', 'add', 'default', 'via', n.podGateway, 'dev', 'eth0']);
    if (p.ip6 && n.podGateway6) {
      await ip(['-n', n.ns, '-6', 'route', 'add', `${p.ip6}/128`, 'dev', via]);
      await ip(['-n', p.ns, '-6', 'addr', 'add', `${p.ip6}/128`, 'dev', 'eth0', 'nodad']);
      await ip(['-n', p.ns, '-6', 'route', 'add', n.podGateway6, 'dev', 'eth0']);
      await ip(['-n', p.ns, '-6', 'route', 'add', 'default', 'via', n.podGateway6, 'dev', 'eth0']);
    }
  }

  private async startServers(tcp: number[], udp: number[]): Promise<void> {
    await Promise.all(
      this.topo.pods.map(async (p) => (await this.agent(p.name)).serve(tcp, udp, this.opts.ipv6 ?? false)),
    );
  }

  /**
   * The agent (client + echo server process) of a pod, node, 'ext' or 'cp',
   * started on first use and reused.
   */
  async agent(name: string): Promise<Agent> {
    const existing = this.agents.get(name);
    if (existing) return existing;
    const ns = this.nsOf(name);
    const a = await Agent.start(ns, name);
    this.agents.set(name, a);
    return a;
  }

  nsOf(name: string): string {
    if (name === 'ext') return this.topo.external.ns;
    if (name === 'cp') return this.topo.controlPlane.ns;
    const n = this.topo.nodes.find((x) => x.name === name);
    if (n) return n.ns;
    return this.pod(name).ns;
  }

  /** Route dst (an IP or CIDR) from the namespace of `from` via a node (e.g. an LB IP from ext via node2). */
  async routeVia(from: string, dst: string, node: string): Promise<void> {
    const n = this.node(node);
    if (dst.includes(':')) {
      if (!n.ip6) throw new Error(`routeVia ${dst}: the cluster has no IPv6`);
      await ip(['-n', this.nsOf(from), '-6', 'route', 'replace', dst, 'via', n.ip6]);
      return;
    }
    await ip(['-n', this.nsOf(from), 'route', 'replace', dst, 'via', n.ip]);
  }

  /** Stop every agent and remove every namespace. Idempotent. */
  async destroy(): Promise<void> {
    if (this.destroyed) return;
    this.destroyed = true;
    await Promise.all([...this.agents.values()].map((a) => a.stop().catch(() => {})));
    this.agents.clear();
    for (const ns of this.namespaces().reverse()) {
      deleteNamespaceSync(ns);
      untrackNamespace(ns);
    }
  }
}
