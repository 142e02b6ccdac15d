// BPF_PROG_TEST_RUN of a tc (or the XDP) program on one crafted frame: what the program
// returned, the frame it left behind, and the skb mark. The kernel runs the
// program on a real skb (of the loopback device of the caller's network
// namespace unless ctx.ifindex names another) but performs no redirect; a
// redirect shows up as the return value TC_ACT_REDIRECT.
import { addressOf, BpfError, libbpf } from './libbpf.js';

const OPTS_SIZE = 80;
/** sizeof(struct __sk_buff) on 6.x kernels. */
const SKB_CTX_SIZE = 192;
const SKB_MARK = 8;
const SKB_IFINDEX = 40;
const SKB_INGRESS_IFINDEX = 36;

export const TC_ACT = { unspec: -1, ok: 0, shot: 2, redirect: 7 } as const;

export interface TestRunInput {
  readonly frame: Uint8Array;
  readonly mark?: number;
  /** The device the skb is on (skb->ifindex); default the namespace's loopback. */
  readonly ifindex?: number;
  readonly ingressIfindex?: number;
}

export interface TestRunResult {
  /** The program's return value, as a signed int (TC_ACT_*). */
  readonly retval: number;
  readonly frame: Uint8Array;
  readonly mark: number;
  /** Time the kernel measured around the program run, in ns (benchmarks: bench/ebpf-traffic.ts). */
  readonly durationNs: number;
}

export function testRun(progFd: number, input: TestRunInput): TestRunResult {
  const ctxIn = Buffer.alloc(SKB_CTX_SIZE);
  ctxIn.writeUInt32LE(input.mark ?? 0, SKB_MARK);
  if (input.ifindex !== undefined) ctxIn.writeUInt32LE(input.ifindex, SKB_IFINDEX);
  if (input.ingressIfindex !== undefined) ctxIn.writeUInt32LE(input.ingressIfindex, SKB_INGRESS_IFINDEX);
  const ctxOut = Buffer.alloc(SKB_CTX_SIZE);
  const r = runOnce(progFd, input.frame, 'BPF_PROG_TEST_RUN', { in: ctxIn, out: ctxOut });
  return { ...r, mark: ctxOut.readUInt32LE(SKB_MARK) };
}

export const XDP_ACT = { aborted: 0, drop: 1, pass: 2 } as const;

/**
 * BPF_PROG_TEST_RUN of the XDP program on one frame: its verdict and the
 * frame it left. No context is passed, so the kernel runs it as if it came
 * in on the caller's loopback device, queue 0.
 */
export function testRunXdp(
  progFd: number,
  frame: Uint8Array,
): { readonly retval: number; readonly frame: Uint8Array; readonly durationNs: number } {
  return runOnce(progFd, frame, 'BPF_PROG_TEST_RUN (xdp)');
}

/** One run of the program on the frame, with the program's context in and out when given. */
function runOnce(
  progFd: number,
  frame: Uint8Array,
  what: string,
  ctx?: { readonly in: Buffer; readonly out: Buffer },
): { retval: number; frame: Uint8Array; durationNs: number } {
  const dataIn = Buffer.from(frame);
  const dataOut = Buffer.alloc(Math.max(256, frame.length + 128));
  const o = Buffer.alloc(OPTS_SIZE);
  o.writeBigUInt64LE(BigInt(OPTS_SIZE), 0);
  o.writeBigUInt64LE(addressOf(dataIn), 8);
  o.writeBigUInt64LE(addressOf(dataOut), 16);
  o.writeUInt32LE(dataIn.length, 24);
  o.writeUInt32LE(dataOut.length, 28);
  if (ctx) {
    o.writeBigUInt64LE(addressOf(ctx.in), 32);
    o.writeBigUInt64LE(addressOf(ctx.out), 40);
    o.writeUInt32LE(ctx.in.length, 48);
    o.writeUInt32LE(ctx.out.length, 52);
  }
  o.writeInt32LE(1, 60); // repeat
  const rc = libbpf().bpf_prog_test_run_opts(progFd, o);
  if (rc < 0) throw new BpfError(what, -rc);
  return {
    retval: o.readInt32LE(56),
    frame: new Uint8Array(dataOut.subarray(0, o.readUInt32LE(28))),
    durationNs: o.readUInt32LE(64),
  };
}
