// A node namespace with a bpf filesystem that outlives the processes using
// it, the way /sys/fs/bpf outlives kube-proxy on a real node. The host has
// none mounted, and `ip netns exec` gives each process a private /sys, so a
// holder process keeps a private mount namespace with a bpffs at
// /sys/fs/bpf alive; everything that must share pins enters it together
// with the node's network namespace (nsenter --mount --net, which also
// keeps cgroups visible). Killing the holder drops the mount and, with it,
// every pin and pinned attachment.
import { spawn, type ChildProcess } from 'node:child_process';
import { run, type ExecResult } from '../../src/platform/exec.js';
import { trackChild, untrackChild } from '../netns/cleanup.js';
import { nodeScript, REPO_ROOT } from '../netns/spawn.js';

export const TEST_PIN_ROOT = '/sys/fs/bpf/kube-proxy-ts';

export class BpfNode {
  private constructor(
    readonly netns: string,
    private readonly holder: ChildProcess,
  ) {}

  /** Start the holder and wait until its bpffs is mounted. */
  static async start(netns: string): Promise<BpfNode> {
    const holder = spawn(
      'unshare',
      [
        '--mount',
        '--propagation',
        'private',
        'sh',
        '-c',
        'mount -t bpf bpf /sys/fs/bpf && echo ready && exec sleep infinity',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    trackChild(holder.pid);
    await new Promise<void>((res, rej) => {
      let err = '';
      holder.stderr!.on('data', (b: Buffer) => (err += b.toString()));
      holder.stdout!.once('data', () => res());
      holder.once('exit', (c) => rej(new Error(`bpffs holder exited ${c}: ${err}`)));
    });
    return new BpfNode(netns, holder);
  }

  get pid(): number {
    return this.holder.pid!;
  }

  /** argv prefix that runs a command in the node's network namespace and our mount namespace. */
  enter(): string[] {
    return ['nsenter', `--mount=/proc/${this.pid}/ns/mnt`, `--net=/run/netns/${this.netns}`, '--'];
  }

  exec(argv: readonly string[], opts: { allowFailure?: boolean; input?: string } = {}): Promise<ExecResult> {
    const [cmd, ...rest] = [...this.enter(), ...argv];
    return run(cmd!, rest, opts);
  }

  /** One helper.ts command; resolves to its result, throws with its error. */
  async helper<T = unknown>(cmd: Record<string, unknown>): Promise<T> {
    // A long command (thousands of map entries) goes on stdin: argv has a size limit (E2BIG).
    const json = JSON.stringify(cmd);
    const long = json.length > 64 * 1024;
    const r = await this.exec([...nodeScript('./helper.js', import.meta.url), long ? '-' : json], {
      allowFailure: true,
      ...(long ? { input: json } : {}),
    });
    const line = r.stdout.trim().split('\n').pop() ?? '';
    let msg: { ok: boolean; result?: T; error?: string };
    try {
      msg = JSON.parse(line) as typeof msg;
    } catch {
      throw new Error(`helper ${String(cmd['cmd'])}: ${r.stdout}\n${r.stderr}`);
    }
    if (!msg.ok) throw new Error(`helper ${String(cmd['cmd'])}: ${msg.error}\n${r.stderr}`);
    return msg.result as T;
  }

  async stop(): Promise<void> {
    if (this.holder.exitCode !== null || this.holder.signalCode !== null) return;
    const exited = new Promise((r) => this.holder.once('exit', r));
    this.holder.kill('SIGKILL');
    await exited;
    untrackChild(this.holder.pid);
  }
}

export { REPO_ROOT };
