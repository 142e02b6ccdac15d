// One-shot fault injection, for the fault tests only (test/e2e/faults-*.test.ts):
// they must make our own tools fail exactly once on a real kernel and watch
// the proxy recover. Off unless the process was started with KPT_FAULT_DIR
// (read in src/cmd, which logs a warning when it is set); off, it costs one
// null check per command or netlink send.
//
// Armed with a directory D, an operation at fault point P fails once when the
// file D/P exists; the file is removed as the fault fires, so a test arms a
// fault by creating the file and sees that it fired when the file is gone.
// A file that says `pause <ms>` makes the operation wait that long (blocking,
// as a slow kernel would) and then go on: a test catches the process in the
// middle of a sync that way and kills it there.
// Points:
//   exec-<command>      a command run through exec.ts fails as if it had exited 1
//                       (exec-iptables-restore, exec-nft, exec-ipset, ...);
//   netlink-<protocol>  a netlink send fails before anything reaches the kernel
//                       (netlink-netfilter: nf_tables batches and ctnetlink;
//                       netlink-generic: IPVS; netlink-route: rtnetlink);
//   bpf-maps            a batch of BPF map writes (ebpf mode) fails before the first write.
import { existsSync, readFileSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';

let faultDir: string | null = null;

/** Arm fault injection from files in dir (KPT_FAULT_DIR); null disarms. */
export function armFaultInjection(dir: string | null): void {
  faultDir = dir;
}

/** True (once per armed file) when the operation at `point` must fail now. */
export function injectedFault(point: string): boolean {
  if (faultDir === null) return false;
  const file = join(faultDir, point);
  if (!existsSync(file)) return false;
  let content: string;
  try {
    content = readFileSync(file, 'utf8');
    unlinkSync(file);
  } catch {
    return false; // someone else took it: fire once only
  }
  const pause = /^pause (\d+)/.exec(content.trim());
  if (!pause) return true;
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Number(pause[1]));
  return false;
}
