// The test API server running in the cluster's control-plane namespace
// (apihost.ts), plus a REST client for it. stop()/start() simulate an API
// server outage: the listener and every watch go away, the objects, port
// and CA stay.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as readline from 'node:readline';
import type { NetnsCluster } from './cluster.js';
import { KubeClient, type KubeObject, type Transport } from './kube.js';
import { nodeObject } from './fixtures.js';
import { nodeScript, nsSpawn, type NsProcess } from './spawn.js';
import { API_PORT } from './topology.js';
import type { ApiFault } from '../apiserver/faults.js';
import type { WatchListSupport } from '../apiserver/listoptions.js';
import type { RequestRecord } from '../apiserver/server.js';
import { scaled } from './timescale.js';
import { removeTempDir, tempDir } from './cleanup.js';

export class ControlPlane {
  private readonly waiters = new Map<number, (msg: Record<string, unknown>) => void>();
  private nextId = 1;

  private constructor(
    private readonly proc: NsProcess,
    readonly dir: string,
    readonly kubeconfig: string,
    readonly kube: KubeClient,
  ) {}

  /**
   * Start the API server in the control-plane namespace and register the
   * cluster's Node objects. watchList: how it treats a streaming watch-list
   * (default 'on'; 'off'/'unknown': a server that refuses it).
   */
  static async start(cluster: NetnsCluster, watchList: WatchListSupport = 'on'): Promise<ControlPlane> {
    const dir = tempDir(`${cluster.topo.prefix}api-`);
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
        '--watch-list',
        watchList,
      ],
      { pipeStdout: true },
    );
    try {
      const lines = readline.createInterface({ input: proc.child.stdout! });
      const first = await new Promise<Record<string, unknown>>((res, rej) => {
        const t = setTimeout(() => rej(new Error(`API server did not start: ${proc.log()}`)), scaled(30000));
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
      lines.on('line', (l) => {
        const m = JSON.parse(l) as Record<string, unknown>;
        const w = cp.waiters.get(Number(m['id']));
        cp.waiters.delete(Number(m['id']));
        w?.(m);
      });
      for (const n of cluster.nodes) await kube.apply(nodeObject(n));
      return cp;
    } catch (err) {
      // Not started: leave nothing behind (the process and the folder of its certificates).
      await proc.stop(2000).catch(() => {});
      removeTempDir(dir);
      throw err;
    }
  }

  private command(
    cmd: string,
    args: Record<string, unknown> = {},
    timeoutMs = 10_000,
  ): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    return new Promise((res, rej) => {
      const t = setTimeout(() => {
        this.waiters.delete(id);
        rej(new Error(`API server ${cmd}: no answer`));
      }, scaled(timeoutMs));
      this.waiters.set(id, (m) => {
        clearTimeout(t);
        if (m['ok']) res(m);
        else rej(new Error(String(m['error'])));
      });
      this.proc.child.stdin!.write(JSON.stringify({ ...args, id, cmd }) + '\n');
    });
  }

  /** Outage: close the listener and every connection and watch. */
  async stopServing(): Promise<void> {
    await this.command('stop');
  }
  /** End of outage: listen again on the same address, same CA, same objects. */
  async startServing(): Promise<void> {
    await this.command('start');
  }

  /** Arm a fault in the server (test/apiserver/faults.ts). */
  async injectFault(fault: ApiFault): Promise<void> {
    await this.command('fault', { fault });
  }
  async clearFaults(): Promise<void> {
    await this.command('clearFaults');
  }
  /** Create many objects in one step, inside the server (a burst, without a round trip each). */
  async createMany(objects: readonly KubeObject[]): Promise<void> {
    await this.command('create', { objects }, 60_000);
  }
  /** Later watch-lists get their initial events `chunk` at a time, `delayMs` apart (0: all at once). */
  async paceInitialEvents(chunk: number, delayMs: number): Promise<void> {
    await this.command('pace', { chunk, delayMs });
  }
  /** End every open watch cleanly: clients must re-watch (and meet any armed fault). */
  async closeWatches(): Promise<void> {
    await this.command('closeWatches');
  }
  /** Drop the history: a re-watch from an older version gets 410 and must relist. */
  async compact(): Promise<void> {
    await this.command('compact');
  }
  /** End every watch and expire every client's version at once: each must relist (and meet any list fault). */
  async expireWatches(): Promise<void> {
    await this.command('expire');
  }

  /** The requests the server received from `since` (epoch ms) on, and how many each fault kind answered. */
  async requests(since = 0): Promise<{ requests: RequestRecord[]; fired: Record<string, number> }> {
    const m = await this.command('requests', { since });
    return { requests: m['requests'] as RequestRecord[], fired: m['fired'] as Record<string, number> };
  }

  /** TLS handshakes the server completed, those clients opened and dropped (must stay 0), and its own closes. */
  async stats(): Promise<{ handshakes: number; abortedHandshakes: number; closedByServer: number }> {
    const m = await this.command('stats');
    return {
      handshakes: Number(m['handshakes']),
      abortedHandshakes: Number(m['abortedHandshakes']),
      closedByServer: Number(m['closedByServer']),
    };
  }

  async dispose(): Promise<void> {
    this.proc.child.stdin?.end();
    await this.proc.stop(2000);
    removeTempDir(this.dir);
  }
}
