// The ebpf mode's own settings (our --ebpf-* flags; upstream's
// configuration has no place for them).
import type { LbAlgorithm } from './layout.js';

export const XDP_MODES = ['auto', 'native', 'generic', 'off'] as const;
export type XdpMode = (typeof XDP_MODES)[number];
export const LB_MODES = ['snat', 'dsr'] as const;
export type LbMode = (typeof LB_MODES)[number];

export interface EbpfOptions {
  /** --ebpf-pin-path */
  readonly pinRoot: string;
  /** --ebpf-attach: tcx, tc (cls_bpf) or auto (tcx where the kernel has it). */
  readonly attach: 'auto' | 'tcx' | 'tc';
  /** --ebpf-lb-algorithm, for Services without the kube-proxy-ts/lb-algorithm annotation. */
  readonly algorithm: LbAlgorithm;
  /** --ebpf-maglev-table-size */
  readonly maglevM: number;
  /** --ebpf-socket-lb-cgroup: socket-level load balancing for this cgroup v2 directory ('' = off). */
  readonly socketLBCgroup: string;
  /**
   * --ebpf-xdp: the XDP fast path on the node's uplinks: 'native' (in the driver), 'generic' (the
   * kernel's skb-based XDP), 'auto' (native where the driver has it) or 'off'.
   */
  readonly xdp: XdpMode;
  /**
   * --ebpf-lb-mode: external traffic (eTP Cluster) to another node's endpoint is masqueraded
   * ('snat') or DNATed only, the endpoint's node answering the client directly ('dsr'). The same on
   * every node: the endpoint's node must read the option the entering node writes.
   */
  readonly lbMode: LbMode;
  /** Connection map capacity (entries; a connection takes two). Derived from the conntrack settings. */
  readonly ctEntries: number;
}

export const DEFAULT_EBPF_OPTIONS: EbpfOptions = {
  pinRoot: '/sys/fs/bpf/kube-proxy-ts',
  attach: 'auto',
  algorithm: 'random',
  maglevM: 16381,
  socketLBCgroup: '',
  xdp: 'off',
  lbMode: 'snat',
  ctEntries: 262144,
};
