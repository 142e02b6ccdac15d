// The test API server running in the cluster's control-plane namespace
// (apihost.ts), plus a REST client for it. stop()/start() simulate an API
// server outage: the listener and every watch go away, the objects, port
// and CA stay.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as readline from 'node:readline';
import type { NetnsCluster } from './cluster.js';
import { KubeClient, type Transport } from './kube.js';
import { nodeObject } from './fixtures.js';
import { nodeScript, nsSpawn, type NsProcess } from './spawn.js';
import { API_PORT } from './topology.js';

export class ControlPlane {
  private readonly waiters: Array<(msg: Record<string, unknown>) => void> = [];

  private constructor(
    private readonly proc: NsProcess,
    readonly dir: string,
    readonly kubeconfig: string,
    readonly kube: KubeClient,
  ) {}

  /** Start the API server in the control-plane namespace and register the cluster's Node objects. */
  static async start(cluster: NetnsCluster): Promise<ControlPlane> {
    const dir = mkdtempSync(join(tmpdir(), `${cluster.topo.prefix}api-`));
    const token = `kpt-e2e-${process.pid}`;
    const host = cluster.controlPlane.ip;
    const proc = nsSpawn(
      cluster.controlPlane.ns,
      [
        ...nodeScript('./apihost.js', import.meta.url),
        '--host',
        host,
        '--port',
        String(API_PORT),
        '--dir',
        dir,
        '--token',
        token,
      ],
      { pipeStdout: true },
    );
    const lines = readline.createInterface({ input: proc.child.stdout! });
    const first = await new Promise<Record<string, unknown>>((res, rej) => {
      const t = setTimeout(() => rej(new Error(`API server did not start: ${proc.log()}`)), 30000);
      lines.once('line', (l) => {
        clearTimeout(t);
        res(JSON.parse(l) as Record<string, unknown>);
      });
      void proc.exited.then((c) => {
        clearTimeout(t);
        rej(new Error(`API server exited ${c}: ${proc.log()}`));
      });
    });
    // REST calls are made from the control-plane namespace itself (the root namespace cannot reach it).
    const agent = await cluster.agent('cp');
    const transport: Transport = ({ timeoutMs, ...req }) => agent.request('https', req, timeoutMs) as never;
    const kube = new KubeClient(String(first['url']), token, readFileSync(join(dir, 'ca.crt'), 'utf8'), transport);
    const cp = new ControlPlane(proc, dir, String(first['kubeconfig']), kube);
    lines.on('line', (l) => cp.waiters.shift()?.(JSON.parse(l) as Record<string, unknown>));
    for (const n of cluster.nodes) await kube.apply(nodeObject(n));
    return cp;
  }

  private command(cmd: 'stop' | 'start'): Promise<void> {
    return new Promise((res, rej) => {
      const t = setTimeout(() => rej(new Error(`API server ${cmd}: no answer`)), 10000);
      this.waiters.push((m) => {
        clearTimeout(t);
        if (m['ok']) res();
        else rej(new Error(String(m['error'])));
      });
      this.proc.child.stdin!.write(`${cmd}\n`);
    });
  }

  /** Outage: close the listener and every connection and watch. */
  stopServing(): Promise<void> {
    return this.command('stop');
  }
  /** End of outage: listen again on the same address, same CA, same objects. */
  startServing(): Promise<void> {
    return this.command('start');
  }

  async dispose(): Promise<void> {
    this.proc.child.stdin?.end();
    await this.proc.stop(2000);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
