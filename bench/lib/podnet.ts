// A pod and a server namespace wired to a BenchCluster's node namespace, for
// benchmarks that open real connections through ClusterIPs of the real proxy:
//
//   pod 10.244.0.10 --veth-- node 10.244.0.1 | 10.64.0.254 --veth-- srv 10.64.0.1-60
//
// The server addresses lie in the range bench/lib/nlmon.c reports (churnIP's
// 10.64.0.0/10), so a change to one of them is seen both in the kernel's
// nf_tables notifications and by traffic. srv listens on 8080 on every
// address and answers each connection with the address it was made to, then
// closes: a client learns which endpoint it reached. The pod's address is
// inside the proxy's --cluster-cidr, so connections are DNATed and not
// masqueraded, and the replies go back through the node.
//
// The prober runs in the pod namespace and takes JSON lines on stdin:
//   {op: 'first', targets: [ip...], port}  prints {polling: true}, then
//       {ip, at, by} when a target first answers (epoch ms), trying each
//       unanswered target every ~10 ms (no route yet: refused at once);
//   {op: 'until', target, port, want}  prints {at, tries} once a connection
//       to target is answered by `want`: rounds of ROUND concurrent connects
//       (fresh source ports, so fresh conntrack entries and a fresh endpoint
//       choice each), 1 ms apart.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as readline from 'node:readline';
import {
  deleteNamespaceSync,
  trackChild,
  trackNamespace,
  untrackChild,
  untrackNamespace,
} from '../../test/netns/cleanup.js';
import { newPrefix } from '../../test/netns/names.js';

export const POD_IP = '10.244.0.10';
export const PORT = 80;
/** The server's k-th address (k from 1). */
export const serverIP = (k: number): string => `10.64.0.${k}`;
const SERVER_ADDRESSES = 60;

const SERVER = String.raw`
require('node:net')
  .createServer((s) => { s.on('error', () => {}); s.end(String(s.localAddress).replace(/^::ffff:/, '')); })
  .listen(8080, '0.0.0.0', () => console.log('ready'));
`;

const PROBER = String.raw`
const net = require('node:net');
const ROUND = 4;
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function once(host, port, timeoutMs) {
  return new Promise((res) => {
    let data = '';
    const s = net.connect({ host, port });
    const t = setTimeout(() => done(null), timeoutMs);
    function done(v) { clearTimeout(t); s.destroy(); res(v); }
    s.on('data', (b) => (data += b));
    s.on('end', () => done(data || null));
    s.on('error', () => done(null));
  });
}
async function first(targets, port) {
  const left = new Set(targets);
  say({ polling: true });
  while (left.size > 0) {
    await Promise.all([...left].map(async (ip) => {
      const by = await once(ip, port, 200);
      if (by !== null && left.delete(ip)) say({ ip, at: Date.now(), by });
    }));
    await sleep(10);
  }
}
async function until(target, port, want) {
  let tries = 0;
  for (;;) {
    const got = await Promise.all(Array.from({ length: ROUND }, () => once(target, port, 200)));
    tries += ROUND;
    if (got.includes(want)) return say({ at: Date.now(), tries });
    await sleep(1);
  }
}
require('node:readline').createInterface({ input: process.stdin }).on('line', (l) => {
  const m = JSON.parse(l);
  if (m.op === 'first') void first(m.targets, m.port);
  else if (m.op === 'until') void until(m.target, m.port, m.want);
});
`;

export class PodNet {
  private readonly server: ChildProcess;
  private readonly prober: ChildProcess;
  private readonly pending: Array<(m: Record<string, unknown>) => boolean> = [];

  private constructor(
    readonly pod: string,
    readonly srv: string,
  ) {
    this.server = this.spawnIn(srv, SERVER);
    this.prober = this.spawnIn(pod, PROBER);
    readline.createInterface({ input: this.prober.stdout! }).on('line', (l) => {
      const m = JSON.parse(l) as Record<string, unknown>;
      const i = this.pending.findIndex((f) => f(m));
      if (i >= 0) this.pending.splice(i, 1);
    });
  }

  /** Wire pod and srv to `node` (a namespace the caller made), start the server and the prober. */
  static async start(node: string): Promise<PodNet> {
    const p = newPrefix();
    const pod = `${p}sc-pod`;
    const srv = `${p}sc-srv`;
    for (const ns of [pod, srv]) {
      trackNamespace(ns);
      execFileSync('ip', ['netns', 'add', ns]);
      execFileSync('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    }
    const ipn = (ns: string, ...a: string[]): void => void execFileSync('ip', ['-n', ns, ...a]);
    ipn(node, 'link', 'add', 'vp0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', pod);
    ipn(node, 'link', 'add', 'vs0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', srv);
    ipn(node, 'addr', 'add', '10.244.0.1/24', 'dev', 'vp0');
    ipn(node, 'addr', 'add', '10.64.0.254/24', 'dev', 'vs0');
    ipn(node, 'link', 'set', 'vp0', 'up');
    ipn(node, 'link', 'set', 'vs0', 'up');
    execFileSync('ip', ['netns', 'exec', node, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    ipn(pod, 'addr', 'add', `${POD_IP}/24`, 'dev', 'eth0');
    ipn(pod, 'link', 'set', 'eth0', 'up');
    ipn(pod, 'route', 'add', 'default', 'via', '10.244.0.1');
    for (let k = 1; k <= SERVER_ADDRESSES; k++) ipn(srv, 'addr', 'add', `${serverIP(k)}/24`, 'dev', 'eth0');
    ipn(srv, 'link', 'set', 'eth0', 'up');
    ipn(srv, 'route', 'add', 'default', 'via', '10.64.0.254');
    const net = new PodNet(pod, srv);
    await new Promise<void>((res, rej) => {
      net.server.stdout!.once('data', () => res());
      net.server.once('exit', (c) => rej(new Error(`server exited ${c}`)));
    });
    return net;
  }

  private spawnIn(ns: string, script: string): ChildProcess {
    const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', script], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    trackChild(child.pid);
    return child;
  }

  private send(m: Record<string, unknown>): void {
    this.prober.stdin!.write(JSON.stringify(m) + '\n');
  }

  /**
   * Start polling the targets; resolves once polling runs. onAnswer(ip, at)
   * is called when each first answers.
   */
  async pollFirst(targets: readonly string[], onAnswer: (ip: string, at: number) => void): Promise<void> {
    const started = new Promise<void>((res) =>
      this.pending.push((m) => {
        if (m['polling'] !== true) return false;
        res();
        return true;
      }),
    );
    for (const ip of targets)
      this.pending.push((m) => {
        if (m['ip'] !== ip) return false;
        onAnswer(ip, Number(m['at']));
        return true;
      });
    this.send({ op: 'first', targets, port: PORT });
    await started;
  }

  /** Resolves with the time (epoch ms) a connection to target is first answered by `want`. */
  until(target: string, want: string): Promise<{ at: number; tries: number }> {
    const p = new Promise<{ at: number; tries: number }>((res) =>
      this.pending.push((m) => {
        if (m['tries'] === undefined) return false;
        res({ at: Number(m['at']), tries: Number(m['tries']) });
        return true;
      }),
    );
    this.send({ op: 'until', target, port: PORT, want });
    return p;
  }

  dispose(): void {
    for (const c of [this.prober, this.server]) {
      c.kill('SIGKILL');
      untrackChild(c.pid);
    }
    for (const ns of [this.pod, this.srv]) {
      deleteNamespaceSync(ns);
      untrackNamespace(ns);
    }
  }
}
