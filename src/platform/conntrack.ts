// The conntrack table through the `conntrack` CLI (conntrack-tools), the
// fallback when ctnetlink (conntracknl.ts) is unavailable, and the upstream
// reconciler that drives either: list the UDP flows of one family and delete
// the stale ones. WHICH flows are stale is
// decided by the pure core/conntrack.ts (upstream conntrack/cleanup.go); this
// file only talks to the kernel.
//
// `conntrack -L -p udp -f ipv4 -o extended` prints one flow a line, e.g.
//   ipv4 2 udp 17 29 src=10.250.0.1 dst=172.30.0.10 sport=40001 dport=53 [UNREPLIED]
//        src=10.250.0.2 dst=10.250.0.1 sport=5354 dport=40001 mark=0 use=1
// The first src/dst/sport/dport group is the original direction, the second
// the reply direction. `conntrack -D` exits 1 when nothing matched; that is
// "already gone", not a failure.

import { normalizeIP } from '../core/ip.js';
import type { IPFamily } from '../core/types.js';
import type { Clock } from '../core/clock.js';
import type { ConntrackHook } from '../engine/proxier.js';
import type { ConntrackMetrics } from './metrics.js';
import { run, type ExecResult } from './exec.js';
import { ProxyError } from '../core/errors.js';

/** One UDP conntrack entry. IPs are normalised. */
export interface FlowRecord {
  readonly proto: 'udp';
  readonly origSrc: string;
  readonly origDst: string;
  readonly origSrcPort: number;
  readonly origDstPort: number;
  readonly replySrc: string;
  readonly replySrcPort: number;
}

/**
 * What deleteFlows needs: a FlowRecord, or a core ConntrackFlow without the
 * original source (then every flow to origDst:origDstPort answered by
 * replySrc:replySrcPort goes, which is what upstream's filter deletes).
 */
export type FlowToDelete = Omit<FlowRecord, 'proto' | 'origSrc' | 'origSrcPort'> & {
  readonly proto?: string;
  readonly origSrc?: string;
  readonly origSrcPort?: number;
};

/** Runs `conntrack <args>`; inject one to add a prefix (ip netns exec ...) or to fake it. */
export type ConntrackExec = (args: readonly string[]) => Promise<ExecResult>;

/** The real CLI, optionally behind a prefix such as ['ip', 'netns', 'exec', 'ns1']. */
export function conntrackExec(prefix: readonly string[] = []): ConntrackExec {
  const [cmd, ...pre] = [...prefix, 'conntrack'];
  return (args) => run(cmd!, [...pre, ...args], { allowFailure: true });
}

const fam = (f: IPFamily) => (f === 'IPv4' ? 'ipv4' : 'ipv6');

/** Parse `conntrack -L -o extended` output; lines that are not well-formed UDP flows are skipped. */
export function parseConntrackList(text: string, family: IPFamily): FlowRecord[] {
  const out: FlowRecord[] = [];
  for (const line of text.split('\n')) {
    const tokens = line.trim().split(/\s+/);
    if (!tokens.includes('udp')) continue;
    const groups: Array<Record<string, string>> = [];
    for (const t of tokens) {
      const m = /^(src|dst|sport|dport)=(.+)$/.exec(t);
      if (!m) continue;
      let g = groups[groups.length - 1];
      if (!g || m[1]! in g) groups.push((g = {}));
      g[m[1]!] = m[2]!;
    }
    const [o, r] = groups;
    if (!o || !r) continue;
    const origSrc = normalizeIP(o.src);
    const origDst = normalizeIP(o.dst);
    const replySrc = normalizeIP(r.src);
    const ports = [o.sport, o.dport, r.sport].map((p) => Number(p));
    if (!origSrc || !origDst || !replySrc || ports.some((p) => !Number.isInteger(p) || p < 0 || p > 65535)) continue;
    if (origDst.includes(':') !== (family === 'IPv6')) continue;
    out.push({
      proto: 'udp',
      origSrc,
      origDst,
      origSrcPort: ports[0]!,
      origDstPort: ports[1]!,
      replySrc,
      replySrcPort: ports[2]!,
    });
  }
  return out;
}

export interface DeleteResult {
  /** Kernel-reported count of deleted entries. */
  readonly deleted: number;
  /** Commands that failed for another reason than "no such entry". */
  readonly errors: readonly string[];
}

export class Conntrack implements ConntrackTable {
  readonly kind = 'conntrack-cli';

  constructor(private readonly exec: ConntrackExec = conntrackExec()) {}

  /**
   * One `conntrack -D` per (service address, stale endpoint), not per client:
   * every flow sharing origDst:port and replySrc:port is stale by the same
   * rule, so one filter without the original source removes them all (as
   * upstream's filter does), with far fewer processes.
   */
  deleteStale(family: IPFamily, flows: readonly FlowRecord[]): Promise<DeleteResult> {
    return this.deleteFlows(
      family,
      flows.map((f) => ({
        origDst: f.origDst,
        origDstPort: f.origDstPort,
        replySrc: f.replySrc,
        replySrcPort: f.replySrcPort,
      })),
    );
  }

  async listUDPFlows(family: IPFamily): Promise<FlowRecord[]> {
    const r = await this.exec(['-L', '-p', 'udp', '-f', fam(family), '-o', 'extended']);
    if (r.code !== 0) throw new ProxyError('KPT_EXEC_FAILED', `conntrack -L failed (${r.code}): ${r.stderr.trim()}`);
    return parseConntrackList(r.stdout, family);
  }

  /**
   * Delete each flow (identical filters once), `concurrency` commands at a
   * time (default 1). Never throws for a single flow. Each `conntrack -D` is
   * a process spawn plus a filtered table dump, far more than the flow it
   * deletes; neither parallel commands nor a `conntrack -R -` batch was
   * consistently faster when tried. Callers should pass coarse
   * filters (see deleteStale) rather than one per client.
   */
  async deleteFlows(family: IPFamily, flows: readonly FlowToDelete[], concurrency = 1): Promise<DeleteResult> {
    const argLists = new Map<string, string[]>();
    for (const f of flows) {
      const args = deleteArgs(family, f);
      if (args) argLists.set(args.join(' '), args);
    }
    const queue = [...argLists.values()];
    let deleted = 0;
    const errors: string[] = [];
    const worker = async () => {
      for (let args = queue.shift(); args; args = queue.shift()) {
        let r: ExecResult;
        try {
          r = await this.exec(args);
        } catch (e) {
          errors.push(`conntrack ${args.join(' ')}: ${(e as Error).message}`);
          continue;
        }
        const m = /(\d+) flow entr(?:y|ies) ha(?:s|ve) been deleted/.exec(r.stderr);
        if (m) deleted += Number(m[1]);
        else if (r.code !== 0) errors.push(`conntrack ${args.join(' ')}: exit ${r.code}: ${r.stderr.trim()}`);
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, queue.length)) }, worker));
    return { deleted, errors };
  }
}

function deleteArgs(family: IPFamily, f: FlowToDelete): string[] | null {
  const dst = normalizeIP(f.origDst);
  const rsrc = normalizeIP(f.replySrc);
  if (!dst || !rsrc) return null;
  const args = [
    '-D',
    '-p',
    'udp',
    '-f',
    fam(family),
    '--orig-dst',
    dst,
    '--orig-port-dst',
    String(f.origDstPort),
    '--reply-src',
    rsrc,
    '--reply-port-src',
    String(f.replySrcPort),
  ];
  const src = f.origSrc === undefined ? null : normalizeIP(f.origSrc);
  if (src) args.push('--orig-src', src);
  if (f.origSrcPort !== undefined) args.push('--orig-port-src', String(f.origSrcPort));
  return args;
}

/**
 * A conntrack table the reconciler can use: ctnetlink (conntracknl.ts), or
 * this CLI when netlink is unavailable. deleteStale removes the given stale
 * flows; how precisely is the table's business.
 */
export interface ConntrackTable {
  readonly kind: 'netlink' | 'conntrack-cli';
  listUDPFlows(family: IPFamily): Promise<FlowRecord[]> | FlowRecord[];
  deleteStale(family: IPFamily, flows: readonly FlowRecord[]): Promise<DeleteResult> | DeleteResult;
  close?(): void;
}

/**
 * Upstream CleanStaleEntries as the Proxier's ConntrackHook: list the
 * family's UDP entries, keep those the core calls stale, delete them, and
 * report duration and count to the reconciler metrics
 * (kubeproxy_conntrack_reconciler_*). A failed listing rejects (the Proxier
 * logs it); failed single deletions go to onError.
 */
export function conntrackReconciler(
  table: ConntrackTable,
  metrics: ConntrackMetrics,
  clock: Clock,
  onError: (err: string) => void = () => {},
): ConntrackHook {
  return {
    async listAndDelete(family, isStale) {
      const start = clock.monotonic();
      const stale = (await table.listUDPFlows(family)).filter((f) => isStale(f));
      const r = stale.length > 0 ? await table.deleteStale(family, stale) : { deleted: 0, errors: [] };
      for (const e of r.errors) onError(e);
      metrics.conntrackReconciled(family, (clock.monotonic() - start) / 1000, r.deleted);
      return r.deleted;
    },
  };
}

/** A service address and port and one of its (gone) endpoints: every UDP flow between them is stale. */
export interface UDPFlowTarget {
  readonly origDst: string;
  readonly origDstPort: number;
  readonly replySrc: string;
  readonly replySrcPort: number;
}

/**
 * Delete every UDP flow of `family` that goes to one of `targets` (service
 * address:port answered by endpoint address:port), whatever its client: one
 * listing for all targets, then the table's exact deletes (IPVS mode's real
 * servers deleted in one sync).
 */
export async function flushUDPFlows(
  table: ConntrackTable,
  family: IPFamily,
  targets: readonly UDPFlowTarget[],
): Promise<DeleteResult> {
  const key = (dst: string, dport: number, rsrc: string, rsport: number) =>
    `${normalizeIP(dst) ?? dst}|${dport}|${normalizeIP(rsrc) ?? rsrc}|${rsport}`;
  const wanted = new Set(targets.map((t) => key(t.origDst, t.origDstPort, t.replySrc, t.replySrcPort)));
  if (wanted.size === 0) return { deleted: 0, errors: [] };
  const stale = (await table.listUDPFlows(family)).filter((f) =>
    wanted.has(key(f.origDst, f.origDstPort, f.replySrc, f.replySrcPort)),
  );
  return stale.length > 0 ? table.deleteStale(family, stale) : { deleted: 0, errors: [] };
}

const defaultConntrack = new Conntrack();
/** listUDPFlows on the host's own namespace with the real CLI. */
export const listUDPFlows = (family: IPFamily) => defaultConntrack.listUDPFlows(family);
/** deleteFlows on the host's own namespace with the real CLI. */
export const deleteFlows = (family: IPFamily, flows: readonly FlowToDelete[]) =>
  defaultConntrack.deleteFlows(family, flows);
