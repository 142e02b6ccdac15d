// What every mode's datapath-canary test does, the same way: break the path a
// connection to the canary takes, in a way no sync or drift watch notices,
// inside the node's namespace; then poll (bounded) until /healthz and a
// health-check node port answer 503, a DatapathCanaryFailed Event is posted
// and /statusz shows the failure; undo the break and poll until all of them
// are healthy again. Both times are printed so they can be reported.
import assert from 'node:assert/strict';
import { E2EEnv } from './e2e.js';
import { endpointSlice, service, webPorts } from './fixtures.js';
import type { ProxyMode } from '../../src/core/types.js';
import { HEALTHZ_PORT } from './proxy.js';
import { nsRun } from './spawn.js';

/** The canary's ClusterIP (src/core/canary.ts). */
export const CANARY_VIP = '169.254.255.253';
/** 3 failed probes 5 s apart, plus the probe already waiting: within 25 s; recovery needs 2 good ones. */
const FAIL_WITHIN_MS = 30_000;
const RECOVER_WITHIN_MS = 20_000;

export interface CanaryBreak {
  readonly what: string;
  readonly fault: () => Promise<unknown>;
  readonly undo: () => Promise<unknown>;
}

interface CanaryDoc {
  readonly endpoint: string;
  readonly healthy: boolean;
  readonly reason: string;
  readonly probes: number;
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
    const ip = this.env.cluster.node(this.node).ip;
    return (await (await this.env.cluster.agent('ext')).http(`http://${ip}:${HEALTHZ_PORT}${path}`, 3000)).status ?? 0;
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

  async canary(): Promise<CanaryDoc | null> {
    const r = await (await this.env.cluster.agent(this.node)).http('http://127.0.0.1:10249/statusz?format=json', 3000);
    assert.equal(r.status, 200, `statusz of ${this.node}`);
    const doc = JSON.parse(r.body ?? '{}') as { proxy: { families: Array<{ family: string; canary?: CanaryDoc }> } };
    return doc.proxy.families.find((f) => f.family === 'IPv4')?.canary ?? null;
  }

  /** /statusz lists the user's service ports and leaves the proxy's own canary out of them. */
  async assertCanaryUnlisted(): Promise<void> {
    const r = await (await this.env.cluster.agent(this.node)).http('http://127.0.0.1:10249/statusz?format=json', 3000);
    const doc = JSON.parse(r.body ?? '{}') as { proxy: { servicePorts: Array<{ servicePort: string }> } };
    assert.ok(doc.proxy.servicePorts.length > 0);
    assert.ok(doc.proxy.servicePorts.every((s) => !s.servicePort.includes('canary/datapath')));
  }

  /** The canary's endpoint ip:port (the proxy's listener), as /statusz reports it. */
  async canaryEndpoint(): Promise<string | null> {
    const c = await this.canary();
    return c?.endpoint || null;
  }

  async events(reason: string): Promise<Array<{ note: string; type: string }>> {
    const list = (await this.env.kube.call('GET', '/apis/events.k8s.io/v1/namespaces/default/events')) as unknown as {
      items: Array<{ reason: string; note: string; type: string; regarding: { name: string } }>;
    };
    return list.items.filter((e) => e.reason === reason && e.regarding.name === this.node);
  }

  /** Healthy everywhere, with the canary having counted a probe (the start-up state each case begins from). */
  async waitHealthy(what: string, withinMs: number): Promise<number> {
    let last = '';
    const { ms } = await this.env.waitFor(
      what,
      async () => {
        const c = await this.canary();
        const hz = await this.healthz();
        const hc = await this.nodePortHealth();
        last = `canary ${JSON.stringify(c)}, /healthz ${hz}, health-check node port ${hc}`;
        return c?.healthy && c.probes > 0 && hz === 200 && hc === 200 ? true : undefined;
      },
      withinMs,
      () => last,
    );
    return ms;
  }

  /** Break, wait for unhealthy everywhere, undo, wait for healthy; returns both times (ms). */
  async measure(b: CanaryBreak): Promise<{ down: number; up: number }> {
    await this.waitHealthy(`${b.what}: healthy before the break`, RECOVER_WITHIN_MS);
    const t0 = Date.now();
    await b.fault();
    try {
      await this.env.waitFor(
        `${b.what}: /healthz and the health-check node port answer 503`,
        async () => ((await this.healthz()) === 503 && (await this.nodePortHealth()) === 503 ? true : undefined),
        FAIL_WITHIN_MS,
      );
    } catch (err) {
      await b.undo();
      throw err;
    }
    const down = Date.now() - t0;
    assert.equal(await this.livez(), 200, `${b.what}: /livez stays 200 (a restart cannot fix this)`);
    const c = await this.canary();
    assert.equal(c?.healthy, false, `${b.what}: /statusz shows the canary failing`);
    assert.match(c!.reason, /probes in a row failed/);
    // The recorder sends an identical Event once per 6 minutes (as client-go), so a second break
    // with the same failure finds the first one's Event: look for the note of this failure.
    const { value: failed } = await this.env.waitFor(`${b.what}: a DatapathCanaryFailed Event`, async () =>
      (await this.events('DatapathCanaryFailed')).find((e) => e.note.includes(`(${c!.reason})`)),
    );
    assert.equal(failed.type, 'Warning');
    assert.match(failed.note, new RegExp(`connections to the datapath canary ${CANARY_VIP} fail`));

    const t1 = Date.now();
    await b.undo();
    const up =
      (await this.waitHealthy(`${b.what}: healthy again after the undo`, RECOVER_WITHIN_MS)) && Date.now() - t1;
    const { value: back } = await this.env.waitFor(
      `${b.what}: a DatapathCanaryRecovered Event`,
      async () => (await this.events('DatapathCanaryRecovered'))[0],
    );
    assert.equal(back.type, 'Normal');
    this.report.push(`${b.what}: unhealthy after ${down} ms, healthy again ${up} ms after the undo`);
    return { down, up };
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
  o: { healthCheckNodePort: number; nodePort: number; clusterIP: string },
): Promise<{ env: E2EEnv; probe: CanaryProbe }> {
  const env = await E2EEnv.start(mode);
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

/**
 * A foreign table whose output hook, at priority raw (before any NAT or IPVS
 * sees the packet), drops the canary's ClusterIP: nothing the proxy wrote changes.
 */
export function foreignOutputDrop(ns: string): CanaryBreak {
  return {
    what: `table ip foreign: output hook at priority raw drops ${CANARY_VIP}`,
    fault: () =>
      nft(
        ns,
        `table ip foreign {
  chain out { type filter hook output priority raw; policy accept; ip daddr ${CANARY_VIP} tcp dport 10257 drop; }
}
`,
      ),
    undo: () => nft(ns, 'delete table ip foreign\n'),
  };
}

/** A foreign input hook that drops what reaches the canary's endpoint (the proxy's listener). */
export async function foreignInputDrop(probe: CanaryProbe, ns: string): Promise<CanaryBreak> {
  const endpoint = (await probe.canaryEndpoint())!;
  const [ip, port] = endpoint.split(':');
  return {
    what: `table ip foreign: input hook drops ${endpoint}`,
    fault: () =>
      nft(
        ns,
        `table ip foreign {
  chain in { type filter hook input priority filter - 10; policy accept; ip daddr ${ip} tcp dport ${port} drop; }
}
`,
      ),
    undo: () => nft(ns, 'delete table ip foreign\n'),
  };
}
