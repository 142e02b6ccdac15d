// The test API server (apihost.ts) run in a network namespace, driven over
// its JSON-line control channel: create objects, read the request log.
import type { WatchListSupport } from '../apiserver/listoptions.js';
import * as readline from 'node:readline';
import { nodeScript, nsSpawn, type NsProcess } from '../netns/spawn.js';
import type { RequestRecord } from './rbac.js';

/** The API server host process and its JSON-line control channel. */
export class ApiHost {
  private readonly waiters: Array<(m: Record<string, unknown>) => void> = [];
  private constructor(
    readonly proc: NsProcess,
    readonly host: string,
    readonly port: number,
    lines: readline.Interface,
  ) {
    lines.on('line', (l) => this.waiters.shift()?.(JSON.parse(l) as Record<string, unknown>));
  }

  /** watchList: how the server treats a streaming watch-list (default 'on'; 'off': its WatchList gate off). */
  static async start(ns: string, saDir: string, watchList: WatchListSupport = 'on'): Promise<ApiHost> {
    const proc = nsSpawn(
      ns,
      [...nodeScript('./apihost.js', import.meta.url), '--sa-dir', saDir, '--watch-list', watchList],
      { pipeStdout: true },
    );
    const lines = readline.createInterface({ input: proc.child.stdout! });
    const ready = await new Promise<{ host: string; port: number }>((res, rej) => {
      const t = setTimeout(() => rej(new Error(`API server did not start: ${proc.log()}`)), 30_000);
      lines.once('line', (l) => {
        clearTimeout(t);
        res(JSON.parse(l) as { host: string; port: number });
      });
      void proc.exited.then((c) => {
        clearTimeout(t);
        rej(new Error(`API server exited ${c}: ${proc.log()}`));
      });
    });
    return new ApiHost(proc, ready.host, ready.port, lines);
  }

  call(req: Record<string, unknown>): Promise<Record<string, unknown>> {
    return new Promise((res, rej) => {
      const t = setTimeout(() => rej(new Error(`API host: no answer to ${JSON.stringify(req)}`)), 10_000);
      this.waiters.push((m) => {
        clearTimeout(t);
        if (m['ok']) res(m);
        else rej(new Error(String(m['error'])));
      });
      this.proc.child.stdin!.write(JSON.stringify(req) + '\n');
    });
  }

  async create(resource: string, object: object): Promise<void> {
    await this.call({ op: 'create', resource, object });
  }
  async requests(): Promise<RequestRecord[]> {
    return (await this.call({ op: 'requests' }))['requests'] as RequestRecord[];
  }

  /** Close the control channel and stop the server. */
  async stop(): Promise<void> {
    this.proc.child.stdin?.end();
    await this.proc.stop(2000);
  }
}

/**
 * The objects a single-node DaemonSet test starts from: its Node (with a pod CIDR and
 * its InternalIP) and a ClusterIP Service `default/web` (port 80 -> 8080).
 */
export async function seedNodeAndWeb(api: ApiHost, node: string, nodeIP: string, clusterIP: string): Promise<void> {
  await api.create('nodes', {
    metadata: { name: node, labels: { 'kubernetes.io/hostname': node } },
    spec: { podCIDR: '10.244.1.0/24', podCIDRs: ['10.244.1.0/24'] },
    status: { addresses: [{ type: 'InternalIP', address: nodeIP }] },
  });
  await api.create('services', {
    metadata: { namespace: 'default', name: 'web' },
    spec: {
      type: 'ClusterIP',
      clusterIP,
      clusterIPs: [clusterIP],
      ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }],
    },
  });
}
