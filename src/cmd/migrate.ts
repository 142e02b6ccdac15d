// `kube-proxy-ts migrate --to MODE [the proxy's flags] [--netns NAME] [--output text|json]`
// The operators' check before a mode switch: for the Services this node's
// proxy serves, what behaves differently in MODE (src/engine/migrate.ts holds
// the analysis). Like `diff`, it takes the proxy's own flags and config and
// lists Services, EndpointSlices, this Node and ServiceCIDRs once; then it
// reads node facts (src/cmd/migratefacts.ts). The mode moved from is the
// configured one when flags or config set it, else what the node's live state
// shows (detectMode), else the default; the output says which.
// Reads only: `ip -j addr`, `ip link show`, files under /proc, iptables-save
// and the other modes' detection reads.
// Exit codes as diff: 0 = nothing changes, 1 = something changes, 2 = error.
import { hostname } from 'node:os';
import { resolveNodeName } from '../core/config/nodename.js';
import { ProxyError } from '../core/errors.js';
import { LB_ALGORITHM_ANNOTATION } from '../core/serviceport.js';
import { syncStateFromObjects } from '../core/snapshot.js';
import type { ProxyMode, SyncState } from '../core/types.js';
import { MIGRATE_TARGETS, migrationFindings, type Finding, type MigrateTarget } from '../engine/migrate.js';
import { KubeClient, loadKubeConfig } from '../platform/k8s/index.js';
import type { CommandRunner } from '../platform/exec.js';
import { listCluster } from './diff.js';
import type { CmdIO } from './explain.js';
import { readNodeFacts } from './migratefacts.js';
import { detectMode, familiesFor } from './modes/index.js';
import { startupNode } from './node.js';
import { runCheckTool } from './checktool.js';
import type { RunCommand } from './options.js';

export const MIGRATE_USAGE = `Usage: kube-proxy-ts migrate --to iptables|nftables|ebpf [kube-proxy flags] [--netns NAME] [--output text|json]

Before switching this node's proxy to another mode: list, for the Services the
proxy serves here, what behaves differently after the switch and what to do
about it. From IPVS mode: schedulers (and the kube-proxy-ts/lb-algorithm
annotation that keeps one), Service addresses leaving kube-ipvs0 (ping, node
processes listening on them), strict ARP, externalTrafficPolicy and
internalTrafficPolicy Local. From any mode: NodePorts on other node addresses
(nodePortAddresses). To ebpf: what ebpf mode does differently (SCTP ports,
health-check node ports).
The mode moved from is the configured one (--proxy-mode or the config file's
mode), else the one whose state the node holds. Takes the proxy's own flags
(--kubeconfig, --proxy-mode, --hostname-override, --config, ...). Changes
nothing.

  --to MODE       the mode to move to: iptables, nftables or ebpf
  --netns NAME    read the node facts of this network namespace (ip netns)
  --output F      text (default) or json

Exit status: 0 nothing changes, 1 something changes, 2 error.
`;

interface MigrateArgs {
  readonly to: MigrateTarget;
  readonly rest: string[];
  readonly netns: string | null;
  readonly output: 'text' | 'json';
}

/** Take migrate's own flags out; everything else is the proxy's command line. */
export function splitMigrateArgs(argv: readonly string[]): MigrateArgs {
  const rest: string[] = [];
  const own: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const m = /^--(to|netns|output)(?:=(.*))?$/.exec(a);
    if (!m) {
      rest.push(a);
      continue;
    }
    const v = m[2] ?? argv[++i];
    if (v === undefined) throw new ProxyError('KPT_FLAG_INVALID', `flag needs an argument: --${m[1]}`);
    own[m[1]!] = v;
  }
  const to = own['to'];
  if (to === undefined) throw new ProxyError('KPT_FLAG_INVALID', '--to is required: iptables, nftables or ebpf');
  if (to === 'ipvs')
    throw new ProxyError(
      'KPT_UNSUPPORTED',
      '--to ipvs: migrate checks moves away from IPVS mode, which upstream deprecated; ' +
        'to run IPVS mode, set it and compare with `kube-proxy-ts diff --proxy-mode ipvs`',
    );
  if (!(MIGRATE_TARGETS as readonly string[]).includes(to))
    throw new ProxyError('KPT_FLAG_INVALID', `--to: iptables, nftables or ebpf, not ${JSON.stringify(to)}`);
  const output = own['output'] ?? 'text';
  if (output !== 'text' && output !== 'json')
    throw new ProxyError('KPT_FLAG_INVALID', `--output: text or json, not ${output}`);
  return { to: to as MigrateTarget, rest, netns: own['netns'] ?? null, output };
}

export interface MigrateReport {
  readonly node: string;
  readonly from: ProxyMode;
  /** Where `from` came from. */
  readonly fromSource: 'configured' | 'live' | 'default';
  /** The mode whose state the node holds (primary family), or null. */
  readonly live: ProxyMode | null;
  readonly to: MigrateTarget;
  /** Services the proxy serves on this node. */
  readonly services: number;
  readonly findings: readonly Finding[];
}

export async function computeMigration(
  cmd: RunCommand,
  to: MigrateTarget,
  run: CommandRunner,
  signal: AbortSignal,
): Promise<MigrateReport> {
  const config = cmd.resolved;
  const kc = loadKubeConfig({ kubeconfigPath: config.clientConnection.kubeconfig || undefined, master: cmd.master });
  const nodeName = resolveNodeName(config.hostnameOverride, hostname());
  const client = new KubeClient(kc, { qps: config.clientConnection.qps, burst: config.clientConnection.burst });
  const objs = await listCluster(client, nodeName, signal).finally(() => client.close());
  const { nodeIPs, primaryFamily } = startupNode(nodeName, objs.node, config.bindAddress);
  const live = await detectMode(run, primaryFamily, cmd.ebpf.pinRoot);
  const fromSource = !cmd.modeDefaulted ? 'configured' : live !== null ? 'live' : 'default';
  const from: ProxyMode = fromSource === 'live' ? live! : cmd.mode;
  const states: SyncState[] = [];
  for (const family of await familiesFor(from, primaryFamily))
    states.push(
      syncStateFromObjects({
        services: objs.services,
        slices: objs.slices,
        family,
        nodeName,
        node: objs.node,
        nodeIPs,
        serviceCIDRs: objs.serviceCIDRs,
        fullSync: true,
      }),
    );
  const annotations = new Map<string, string>();
  for (const s of objs.services) {
    const v = (s.metadata as { annotations?: Record<string, unknown> }).annotations?.[LB_ALGORITHM_ANNOTATION];
    if (typeof v === 'string') annotations.set(`${s.metadata.namespace ?? 'default'}/${s.metadata.name}`, v);
  }
  const node = await readNodeFacts(run);
  const findings = migrationFindings({
    from,
    to,
    states,
    annotations,
    config,
    ebpfAlgorithm: cmd.ebpf.algorithm,
    node,
  });
  const services = new Set(states.flatMap((s) => [...s.services.values()].map((sp) => sp.serviceKey))).size;
  return { node: nodeName, from, fromSource, live, to, services, findings };
}

const SOURCE: Record<MigrateReport['fromSource'], string> = {
  configured: 'the configured mode (--proxy-mode or the config file)',
  live: 'the mode whose state the node holds (no mode configured)',
  default: 'the default mode (none configured, no state on the node)',
};

export function migrateReportText(r: MigrateReport): string {
  let out = `# migrate ${r.from} -> ${r.to} on node ${r.node}: ${r.from} is ${SOURCE[r.fromSource]}\n`;
  if (r.live !== null && r.live !== r.from)
    out += `# note: the node holds ${r.live} mode's state; to check a move from it, pass --proxy-mode ${r.live}\n`;
  if (r.from === r.to) return `${out}# already ${r.to} mode: nothing changes\n`;
  const changes = r.findings.filter((f) => f.changes).length;
  const notes = r.findings.length - changes;
  out += `# ${r.services} Service(s): ${changes === 0 ? 'nothing changes' : `${changes} change(s)`}${notes > 0 ? `, ${notes} note(s)` : ''}\n`;
  const bySubject = new Map<string, Finding[]>();
  for (const f of r.findings) {
    const k = f.service ?? '(this node)';
    bySubject.set(k, [...(bySubject.get(k) ?? []), f]);
  }
  for (const [subject, fs] of bySubject) {
    out += `\n${subject}\n`;
    for (const f of fs) {
      out += `  ${f.changes ? 'CHANGE' : 'note  '} ${f.kind}: ${f.change}\n`;
      out += `         do: ${f.action}\n`;
    }
  }
  return out;
}

export const migrationChanges = (r: MigrateReport): boolean => r.findings.some((f) => f.changes);

export function runMigrate(argv: string[], io?: CmdIO): Promise<number> {
  return runCheckTool(
    {
      usage: MIGRATE_USAGE,
      split: splitMigrateArgs,
      compute: (cmd, args, run, signal) => computeMigration(cmd, args.to, run, signal),
      text: migrateReportText,
      changes: migrationChanges,
    },
    argv,
    io,
  );
}
