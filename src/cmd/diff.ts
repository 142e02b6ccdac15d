// `kube-proxy-ts diff [the proxy's flags] [--netns NAME] [--output text|json]`
// What the next full sync would change, without applying anything:
//   1. the proxy's own flags/config are parsed (parseCommandLine), the
//      Services, EndpointSlices, this Node and ServiceCIDRs are listed once,
//      with the informers' selectors, and turned into a SyncState through
//      the real intake code (syncStateFromObjects);
//   2. the kernel's ruleset is read (iptables-save / nft -j list table);
//   3. the REAL dataplane (IptablesDataplane / NftablesDataplane) runs one
//      full sync against an in-memory copy of that ruleset (iptables: the
//      fake runner over Fake loaded with the dump; nftables: a runner
//      that serves the real read-back and keeps the `nft -f` script), so the
//      comparison includes the jump rules, canaries and stale-chain cleanup;
//   4. the result is compared chain by chain with what the kernel holds.
// Exit codes as diff(1): 0 = no changes, 1 = changes, 2 = error.
// Only read-only commands reach the kernel: iptables-save, iptables --version,
// nfacct get, sysctl -n, ip -j addr, nft -j list.

import { hostname } from 'node:os';
import type { EndpointSlice, Node, Service, ServiceCIDR } from '../core/api.js';
import { LABEL_HEADLESS, LABEL_SERVICE_PROXY_NAME } from '../core/api.js';
import { resolveDataplaneConfig } from '../core/config/nodeport.js';
import { ProxyError } from '../core/errors.js';
import { cidrsOfServiceCIDRs, syncStateFromObjects } from '../core/snapshot.js';
import { canaryTarget, withCanaryState } from '../core/canary.js';
import type { StatusDoc } from '../engine/statusview.js';
import type { SyncState } from '../core/types.js';
import { ApiStatusError, KubeClient, loadKubeConfig } from '../platform/k8s/index.js';
import type { CommandRunner } from '../platform/exec.js';
import { kernelLocalIPs, proxyStatus, type CmdIO } from './explain.js';
import type { FamilyDiff } from './modes/driver.js';
import { familiesFor, modeDriver } from './modes/index.js';
import type { ModeDriver } from './modes/driver.js';
import { startupNode } from './node.js';
import { resolveNodeName } from '../core/config/nodename.js';
import { runCheckTool } from './checktool.js';
import type { RunCommand } from './options.js';

export const DIFF_USAGE = `Usage: kube-proxy-ts diff [kube-proxy flags] [--netns NAME] [--output text|json]

Show what the next full sync would change in the kernel's rules, without
applying anything: lists Services, EndpointSlices and this Node once, renders
a full sync for --proxy-mode (iptables, nftables, ebpf, ipvs or userspace) and
compares it chain by chain (nftables: also set/map element by element; ebpf:
map entry by map entry, with the maps pinned under --ebpf-pin-path; ipvs: also
virtual and real server by server, set member by member, kube-ipvs0 address by
address; userspace: the redirect table line by line, and each listener's port
and endpoints, asked from the running proxy at --metrics-bind-address) with
the live state.
Takes the proxy's own flags (--kubeconfig, --proxy-mode, --hostname-override,
--cluster-cidr, --config, ...).

  --netns NAME    read the rules of this network namespace (ip netns)
  --output F      text (default) or json

Exit status: 0 no changes, 1 changes, 2 error.
`;

export interface ClusterObjects {
  readonly services: Service[];
  readonly slices: EndpointSlice[];
  readonly node: Node | null;
  readonly serviceCIDRs: string[];
}

interface DiffArgs {
  readonly rest: string[];
  readonly netns: string | null;
  readonly output: 'text' | 'json';
}

/** Take diff's own flags out; everything else is the proxy's command line. */
export function splitDiffArgs(argv: readonly string[]): DiffArgs {
  const rest: string[] = [];
  let netns: string | null = null;
  let output = 'text';
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const m = /^--(netns|output)(?:=(.*))?$/.exec(a);
    if (!m) {
      rest.push(a);
      continue;
    }
    const v = m[2] ?? argv[++i];
    if (v === undefined) throw new ProxyError('KPT_FLAG_INVALID', `flag needs an argument: --${m[1]}`);
    if (m[1] === 'netns') netns = v;
    else output = v;
  }
  if (output !== 'text' && output !== 'json')
    throw new ProxyError('KPT_FLAG_INVALID', `--output: text or json, not ${output}`);
  return { rest, netns, output };
}

/** One list of each resource the proxy watches, with the informers' selectors. */
export async function listCluster(t: KubeClient, nodeName: string, signal: AbortSignal): Promise<ClusterObjects> {
  const [svcs, slices, nodes] = await Promise.all([
    t.listAll(
      '/api/v1/services',
      { labelSelector: `!${LABEL_SERVICE_PROXY_NAME}`, fieldSelector: 'spec.clusterIP!=None' },
      signal,
    ),
    t.listAll('/apis/discovery.k8s.io/v1/endpointslices', { labelSelector: `!${LABEL_HEADLESS}` }, signal),
    t.listAll('/api/v1/nodes', { fieldSelector: `metadata.name=${nodeName}` }, signal),
  ]);
  // ServiceCIDRs are optional (older API servers answer 404), as for the informer.
  const cidrs = await t.listAll('/apis/networking.k8s.io/v1/servicecidrs', {}, signal).then(
    (r) => r.items as ServiceCIDR[],
    (e: unknown) => {
      if (e instanceof ApiStatusError && e.statusCode === 404) return [];
      throw e;
    },
  );
  return {
    services: svcs.items as Service[],
    slices: slices.items as EndpointSlice[],
    node: (nodes.items[0] as Node | undefined) ?? null,
    serviceCIDRs: cidrsOfServiceCIDRs(cidrs).sort(),
  };
}

/** server.ts's order: a specified bindAddress, else the Node's addresses, else loopback. */
export interface DiffResult {
  readonly mode: string;
  readonly families: readonly FamilyDiff[];
}

export async function computeDiff(
  cmd: RunCommand,
  run: CommandRunner,
  signal: AbortSignal,
  netns: string | null = null,
): Promise<DiffResult> {
  const config = cmd.resolved;
  const mode = cmd.mode;
  const kc = loadKubeConfig({ kubeconfigPath: config.clientConnection.kubeconfig || undefined, master: cmd.master });
  const nodeName = resolveNodeName(config.hostnameOverride, hostname());
  const client = new KubeClient(kc, { qps: config.clientConnection.qps, burst: config.clientConnection.burst });
  const objs = await listCluster(client, nodeName, signal).finally(() => client.close());
  const { nodeIPs, podCIDRs, primaryFamily } = startupNode(nodeName, objs.node, config.bindAddress);
  const driver = modeDriver(mode);
  const families: FamilyDiff[] = [];
  // Some modes need the running proxy: which endpoints a userspace listener relays to, or the canary's
  // listener (its port is chosen at each start), which is part of what the proxy syncs.
  const status = driver.diffWantsStatus(cmd) ? await proxyStatus(run, config.metricsBindAddress) : null;
  for (const family of await familiesFor(mode, primaryFamily)) {
    const localIPs = await kernelLocalIPs(run, family);
    const dpConfig = resolveDataplaneConfig(config, family, localIPs, nodeIPs[family], podCIDRs);
    const plain: SyncState = syncStateFromObjects({
      services: objs.services,
      slices: objs.slices,
      family,
      nodeName,
      node: objs.node,
      nodeIPs,
      serviceCIDRs: objs.serviceCIDRs,
      fullSync: true,
    });
    const state = cmd.datapathCanary
      ? await withRunningCanary(run, driver, plain, status?.doc ?? null, nodeName, cmd.ebpf.pinRoot)
      : plain;
    families.push(await driver.diff({ cmd, run, netns, family, config: dpConfig, state, localIPs, status }));
  }
  return { mode, families };
}

export function diffResultText(r: DiffResult): string {
  let out = '';
  for (const f of r.families) {
    out += `# ${r.mode} ${f.family}: ${f.summary}\n`;
    out += f.text;
  }
  return out;
}

export const changed = (r: DiffResult): boolean => r.families.some((f) => f.changes > 0);

export function runDiff(argv: string[], io?: CmdIO): Promise<number> {
  return runCheckTool(
    {
      usage: DIFF_USAGE,
      split: splitDiffArgs,
      compute: (cmd, args, run, signal) => computeDiff(cmd, run, signal, args.netns),
      text: diffResultText,
      changes: changed,
    },
    argv,
    io,
  );
}

/**
 * The state with the canary the proxy programmed for this family, if any: as
 * its /statusz reports it, or, with the proxy stopped, as its rules in the
 * kernel point at it (the listener's port is chosen at each start).
 */
async function withRunningCanary(
  run: CommandRunner,
  driver: ModeDriver,
  state: SyncState,
  doc: StatusDoc | null,
  nodeName: string,
  pinRoot: string,
): Promise<SyncState> {
  const c = doc?.families.find((f) => f.family === state.family)?.canary;
  // ip:port, or [ip]:port for IPv6.
  const m = c ? /^\[?([^[\]]+?)\]?:(\d+)$/.exec(c.endpoint ?? '') : null;
  const at: readonly [string, number] | null = m
    ? [m[1]!, Number(m[2])]
    : ((await driver.runningCanary?.(run, state.family, pinRoot)) ?? null);
  if (at === null) return state;
  return withCanaryState(state, canaryTarget(state.family, nodeName, at[0], at[1]));
}
