// What every mode's datapath-canary test does, the same way: break the path a
// connection to the canary takes, in a way no sync or drift watch notices,
// inside the node's namespace; then poll (bounded) until /healthz and a
// health-check node port answer 503, a DatapathCanaryFailed Event is posted
// and /statusz shows the failure; undo the break and poll until all of them
// are healthy again. Both times are printed so they can be reported.
//
// In a dual-stack cluster (startCanaryCluster with ipv6) each family has its
// canary: a break of one family's path turns that family unhealthy in
// /healthz and leaves the other family's canary healthy. The cluster's nodes
// have no IPv6 default route (topology.ts), so their IPv6 canary starts blind
// (no route covers its ClusterIP) until addIPv6DefaultRoute gives them one.
import assert from 'node:assert/strict';
import { E2EEnv } from './e2e.js';
import { endpointSlice, service, webPorts } from './fixtures.js';
import type { IPFamily, ProxyMode } from '../../src/core/types.js';
import { HEALTHZ_PORT } from './proxy.js';
import { nsRun } from './spawn.js';
import { CLUSTER_CIDR, CLUSTER_CIDR6 } from './topology.js';

/** The canary's ClusterIP of each family (src/core/canary.ts). */
export const CANARY_VIP = '169.254.255.253';
export const CANARY_VIP6 = '100::a9fe:fffd';
export const canaryVIP = (family: IPFamily): string => (family === 'IPv4' ? CANARY_VIP : CANARY_VIP6);
/** The segment's IPv6 gateway address, on the switch's bridge (see ipv6CanaryBlindThenRouted). */
const IPV6_GATEWAY = 'fd00:77::1';
const other = (family: IPFamily): IPFamily => (family === 'IPv4' ? 'IPv6' : 'IPv4');
/** 3 failed probes 5 s apart, plus the probe already waiting: within 25 s; recovery needs 2 good ones. */
const FAIL_WITHIN_MS = 30_000;
const RECOVER_WITHIN_MS = 20_000;

export interface CanaryBreak {
  readonly what: string;
  readonly fault: () => Promise<unknown>;
  readonly undo: () => Promise<unknown>;
}

interface CanaryDoc {
  readonly service: string;
  readonly endpoint: string;
  readonly healthy: boolean;
  readonly reason: string;
  readonly probes: number;
  readonly consecutiveFailures: number;
  readonly discarded: number;
  readonly noRoute: boolean;
}

export class CanaryProbe {
  readonly report: string[] = [];

  constructor(
    private readonly env: E2EEnv,
    private readonly node: string,
    /** A health-check node port served on this node (a Local LoadBalancer Service with a local endpoint). */
    private readonly healthCheckPort: number,
  ) {}

  /** /healthz or /livez as a load balancer outside the node asks it. */
  async healthz(path = '/healthz'): Promise<number> {
    return (await this.healthzDoc(path)).status;
  }

  /** /healthz's status code and each family's health in its body. */
  async healthzDoc(path = '/healthz'): Promise<{ status: number; families: Partial<Record<IPFamily, boolean>> }> {
    const ip = this.env.cluster.node(this.node).ip;
    const r = await (await this.env.cluster.agent('ext')).http(`http://${ip}:${HEALTHZ_PORT}${path}`, 3000);
    let families: Partial<Record<IPFamily, boolean>> = {};
    try {
      const body = JSON.parse(r.body ?? '{}') as { status?: Record<string, { healthy: boolean }> };
      families = Object.fromEntries(Object.entries(body.status ?? {}).map(([f, v]) => [f, v.healthy]));
    } catch {
      // A body that is not JSON leaves the families unknown; the caller's assertion says so.
    }
    return { status: r.status ?? 0, families };
  }

  async livez(): Promise<number> {
    return this.healthz('/livez');
  }

  /** The health-check node port as a load balancer outside the node asks it. */
  async nodePortHealth(): Promise<number> {
    const ip = this.env.cluster.node(this.node).ip;
    return (
      (await (await this.env.cluster.agent('ext')).http(`http://${ip}:${this.healthCheckPort}/`, 3000)).status ?? 0
    );
  }

  async canary(family: IPFamily = 'IPv4'): Promise<CanaryDoc | null> {
    const r = await (await this.env.cluster.agent(this.node)).http('http://127.0.0.1:10249/statusz?format=json', 3000);
    assert.equal(r.status, 200, `statusz of ${this.node}`);
    const doc = JSON.parse(r.body ?? '{}') as { proxy: { families: Array<{ family: string; canary?: CanaryDoc }> } };
    return doc.proxy.families.find((f) => f.family === family)?.canary ?? null;
  }

  /** /statusz lists the user's service ports and leaves the proxy's own canary out of them. */
  async assertCanaryUnlisted(): Promise<void> {
    const r = await (await this.env.cluster.agent(this.node)).http('http://127.0.0.1:10249/statusz?format=json', 3000);
    const doc = JSON.parse(r.body ?? '{}') as { proxy: { servicePorts: Array<{ servicePort: string }> } };
    assert.ok(doc.proxy.servicePorts.length > 0);
    assert.ok(doc.proxy.servicePorts.every((s) => !s.servicePort.includes('canary/datapath')));
  }

  /** The canary's endpoint ip:port or [ip]:port (the proxy's listener), as /statusz reports it. */
  async canaryEndpoint(family: IPFamily = 'IPv4'): Promise<string | null> {
    const c = await this.canary(family);
    return c?.endpoint || null;
  }

  async events(reason: string): Promise<Array<{ note: string; type: string }>> {
    const list = (await this.env.kube.call('GET', '/apis/events.k8s.io/v1/namespaces/default/events')) as unknown as {
      items: Array<{ reason: string; note: string; type: string; regarding: { name: string } }>;
    };
    return list.items.filter((e) => e.reason === reason && e.regarding.name === this.node);
  }

  /** Healthy everywhere, with the family's canary having counted a probe (the state each case begins from). */
  async waitHealthy(what: string, withinMs: number, family: IPFamily = 'IPv4'): Promise<number> {
    let last = '';
    const { ms } = await this.env.waitFor(
      what,
      async () => {
        const c = await this.canary(family);
        const hz = await this.healthz();
        const hc = await this.nodePortHealth();
        last = `${family} canary ${JSON.stringify(c)}, /healthz ${hz}, health-check node port ${hc}`;
        // The last counted probe succeeded: a failing run shorter than three probes is still "healthy".
        const good = c?.healthy && c.probes > 0 && c.consecutiveFailures === 0 && !c.noRoute;
        return good && hz === 200 && hc === 200 ? true : undefined;
      },
      withinMs,
      () => last,
    );
    return ms;
  }

  /**
   * Break the family's path, wait for unhealthy everywhere, undo, wait for healthy; returns both times
   * (ms). In a dual-stack cluster, the other family's canary stays healthy throughout.
   */
  async measure(b: CanaryBreak, family: IPFamily = 'IPv4'): Promise<{ down: number; up: number }> {
    await this.waitHealthy(`${b.what}: healthy before the break`, RECOVER_WITHIN_MS, family);
    const otherProbes = (await this.canary(other(family)))?.probes ?? null;
    const t0 = Date.now();
    await b.fault();
    let broken = true;
    try {
      const down = await this.whileBroken(b, family, t0, otherProbes);
      const t1 = Date.now();
      broken = false;
      await b.undo();
      await this.waitHealthy(`${b.what}: healthy again after the undo`, RECOVER_WITHIN_MS, family);
      const up = Date.now() - t1;
      const { value: back } = await this.env.waitFor(`${b.what}: a DatapathCanaryRecovered Event`, async () =>
        (await this.events('DatapathCanaryRecovered')).find((e) => e.note.includes(` ${family}: `)),
      );
      assert.equal(back.type, 'Normal');
      this.report.push(`${b.what}: unhealthy after ${down} ms, healthy again ${up} ms after the undo`);
      return { down, up };
    } finally {
      // A failed assertion must not leave the break in place for the next case.
      if (broken) await b.undo();
    }
  }

  /** With the break in place: 503 everywhere, the family's failure shown and posted; returns the time to 503. */
  private async whileBroken(b: CanaryBreak, family: IPFamily, t0: number, otherProbes: number | null): Promise<number> {
    await this.env.waitFor(
      `${b.what}: /healthz and the health-check node port answer 503`,
      async () => ((await this.healthz()) === 503 && (await this.nodePortHealth()) === 503 ? true : undefined),
      FAIL_WITHIN_MS,
    );
    const down = Date.now() - t0;
    assert.equal(await this.livez(), 200, `${b.what}: /livez stays 200 (a restart cannot fix this)`);
    const c = await this.canary(family);
    assert.equal(c?.healthy, false, `${b.what}: /statusz shows the ${family} canary failing`);
    assert.match(c!.reason, /probes in a row failed/);
    if (otherProbes !== null) {
      // The other family's path is whole: its canary kept probing and stayed healthy, and /healthz says which failed.
      const hz = await this.healthzDoc();
      assert.deepEqual(hz.families, { [family]: false, [other(family)]: true }, `${b.what}: /healthz per family`);
      const o = await this.canary(other(family));
      assert.ok(
        o?.healthy && o.consecutiveFailures === 0 && o.probes > otherProbes,
        `${b.what}: the ${other(family)} canary: ${JSON.stringify(o)}`,
      );
    }
    // The recorder sends an identical Event once per 6 minutes (as client-go), so a second break
    // with the same failure finds the first one's Event: look for the note of this failure.
    const vip = canaryVIP(family);
    const { value: failed } = await this.env.waitFor(`${b.what}: a DatapathCanaryFailed Event`, async () =>
      (await this.events('DatapathCanaryFailed')).find(
        (e) => e.note.includes(` ${family}: `) && e.note.includes(`(${c!.reason})`),
      ),
    );
    assert.equal(failed.type, 'Warning');
    assert.ok(failed.note.includes(`connections to the datapath canary ${vip} fail`), failed.note);
    return down;
  }

  print(prefix: string): void {
    for (const line of this.report) console.log(`${prefix}: ${line}`);
  }
}

/**
 * A cluster in `mode` with one LoadBalancer Service (`externalTrafficPolicy: Local`, its
 * endpoint on node2) whose health-check node port the probe watches beside /healthz.
 */
export async function startCanaryCluster(
  mode: ProxyMode,
  o: { healthCheckNodePort: number; nodePort: number; clusterIP: string; ipv6?: boolean },
): Promise<{ env: E2EEnv; probe: CanaryProbe }> {
  // A probe every 2 s instead of the default 5 s: the verdicts need the same 3 failed and 2 good probes, in
  // 6-10 s instead of 15-25 s per break, which keeps the suite short (the default is in options.test.ts).
  const interval = ['--datapath-canary-interval', '2s'];
  const env = await E2EEnv.start(
    mode,
    o.ipv6
      ? {
          cluster: { ipv6: true },
          dropFlags: ['--cluster-cidr'],
          proxyArgs: ['--cluster-cidr', `${CLUSTER_CIDR},${CLUSTER_CIDR6}`, ...interval],
        }
      : { proxyArgs: interval },
  );
  const ports = webPorts(o.nodePort);
  await env.apply(
    service({
      name: 'canary-lb',
      type: 'LoadBalancer',
      clusterIP: o.clusterIP,
      ports,
      externalTrafficPolicy: 'Local',
      healthCheckNodePort: o.healthCheckNodePort,
    }),
    endpointSlice('canary-lb', [{ pod: env.cluster.pod('node2-a') }], ports, 'canary-lb-v4'),
  );
  return { env, probe: new CanaryProbe(env, 'node2', o.healthCheckNodePort) };
}

const nft = (ns: string, script: string) => nsRun(ns, ['nft', '-f', '-'], { input: script });
/** The nftables family and address match keyword of an IP family. */
const nftFam = (family: IPFamily) =>
  family === 'IPv4' ? { table: 'ip', daddr: 'ip daddr' } : { table: 'ip6', daddr: 'ip6 daddr' };

/**
 * A foreign table whose output hook, at priority raw (before any NAT or IPVS
 * sees the packet), drops the family's canary ClusterIP: nothing the proxy wrote changes.
 */
export function foreignOutputDrop(ns: string, family: IPFamily = 'IPv4'): CanaryBreak {
  const { table, daddr } = nftFam(family);
  const vip = canaryVIP(family);
  return {
    what: `table ${table} foreign: output hook at priority raw drops ${vip}`,
    fault: () =>
      nft(
        ns,
        `table ${table} foreign {
  chain out { type filter hook output priority raw; policy accept; ${daddr} ${vip} tcp dport 10257 drop; }
}
`,
      ),
    undo: () => nft(ns, `delete table ${table} foreign\n`),
  };
}

/** A foreign input hook that drops what reaches the canary's endpoint (the proxy's listener). */
export async function foreignInputDrop(
  probe: CanaryProbe,
  ns: string,
  family: IPFamily = 'IPv4',
): Promise<CanaryBreak> {
  const endpoint = (await probe.canaryEndpoint(family))!;
  const m = /^\[?(.+?)\]?:(\d+)$/.exec(endpoint)!;
  const { table, daddr } = nftFam(family);
  return {
    what: `table ${table} foreign: input hook drops ${endpoint}`,
    fault: () =>
      nft(
        ns,
        `table ${table} foreign {
  chain in { type filter hook input priority filter - 10; policy accept; ${daddr} ${m[1]} tcp dport ${m[2]} drop; }
}
`,
      ),
    undo: () => nft(ns, `delete table ${table} foreign\n`),
  };
}

/**
 * The IPv6 canary with no route covering its ClusterIP (the cluster's nodes have no IPv6 default
 * route): its probes are not counted, /statusz says it is blind, and the node stays healthy. Then
 * the node gets an IPv6 default route (via a gateway on the switch that forwards nothing, like the
 * IPv4 one) and the canary counts its probes and is healthy.
 */
export async function ipv6CanaryBlindThenRouted(env: E2EEnv, probe: CanaryProbe, node: string): Promise<void> {
  let last = '';
  await env.waitFor(
    'IPv6 canary without a route: blind, not counted, /healthz 200',
    async () => {
      const c = await probe.canary('IPv6');
      const hz = await probe.healthzDoc();
      last = `IPv6 canary ${JSON.stringify(c)}, /healthz ${JSON.stringify(hz)}`;
      return c?.noRoute && c.discarded > 0 && c.probes === 0 && c.healthy && hz.status === 200 && hz.families.IPv6
        ? true
        : undefined;
    },
    20_000,
    () => last,
  );
  assert.equal(await probe.nodePortHealth(), 200, 'the health-check node port stays 200 too');
  // The IPv6 twin of the segment's IPv4 gateway (topology.ts): it answers neighbour solicitations and
  // forwards nothing. It must exist: ebpf mode's tc program sees the canary's packet only once the
  // kernel has resolved the next hop's link address.
  await nsRun(env.cluster.topo.switchNs, ['ip', '-6', 'addr', 'replace', `${IPV6_GATEWAY}/64`, 'dev', 'br0', 'nodad']);
  await nsRun(env.cluster.node(node).ns, ['ip', '-6', 'route', 'add', 'default', 'via', IPV6_GATEWAY, 'dev', 'eth0']);
  await probe.waitHealthy('IPv6 canary once a default route covers its ClusterIP', RECOVER_WITHIN_MS, 'IPv6');
}
