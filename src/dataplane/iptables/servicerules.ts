// Per-service-port rules of upstream syncProxyRules (the body of its loop over
// svcPortMap), one function per concern. Order of lines matters: it is the
// byte order of the restore payload. Lines are built as template strings (the
// same bytes as upstream's LineBuffer word joins) into per-service chunks so a
// render allocates a few strings per line and nothing per word.
//
// The `--comment` texts are upstream's, byte for byte: iptables-save shows
// them, and operators, their tools and `kube-proxy-ts explain` match on
// them. Keep them identical; they are facts of compatibility, not our prose.

import { cidrContains, parseCIDR } from '../../core/ip.js';
import type { CategorizedEndpoints, Endpoint, ServicePort } from '../../core/types.js';
import { servicePortPolicy } from '../policy.js';
import type { ChainNamer, ServicePortChainNames } from './names.js';
import { comment, probability } from './restore.js';

export const KUBE_SERVICES = 'KUBE-SERVICES';
export const KUBE_EXTERNAL_SERVICES = 'KUBE-EXTERNAL-SERVICES';
export const KUBE_NODEPORTS = 'KUBE-NODEPORTS';
export const KUBE_PROXY_FIREWALL = 'KUBE-PROXY-FIREWALL';
export const KUBE_MARK_MASQ = 'KUBE-MARK-MASQ';
export const LOCALHOST_NP_COUNTER = 'localhost_nps_accepted_pkts';

/** Everything about the sync that every service port needs. */
export interface ServiceRenderContext {
  readonly masqueradeAll: boolean;
  /** Detector args joined with spaces; null when no local detector is implemented. */
  readonly ifLocal: string | null;
  readonly ifNotLocal: string | null;
  readonly localhostNodePortCounter: boolean;
  readonly largeClusterMode: boolean;
  readonly nodeIP: string | null;
  /** Fingerprint of every field above (plus the family): a memo entry is valid only under the same one. */
  readonly key: string;
  /** The renderer's chain-name memory (not part of `key`: names depend on the ServicePort alone). */
  readonly names: ChainNamer;
}

/**
 * One service port rendered. Every text chunk is whole lines, each ending in
 * '\n' ('' when empty). `natTop` is its KUBE-SERVICES / KUBE-NODEPORTS rules,
 * `filter` its filter rules, `chains` its own nat chains in declaration order,
 * `own` the rules of those chains (null when not kept: see renderServicePort).
 */
export interface RenderedServicePort {
  readonly natTop: string;
  readonly natTopCount: number;
  readonly filter: string;
  readonly filterCount: number;
  readonly chains: readonly string[];
  readonly own: string | null;
  readonly ownCount: number;
  readonly noLocalInternal: boolean;
  readonly noLocalExternal: boolean;
}

interface Plan {
  readonly spn: string;
  readonly proto: string;
  /** `-m <proto> -p <proto>` */
  readonly protoArgs: string;
  readonly names: ServicePortChainNames;
  readonly clusterEndpoints: readonly Endpoint[];
  readonly localEndpoints: readonly Endpoint[];
  readonly hasEndpoints: boolean;
  readonly hasInternalEndpoints: boolean;
  readonly hasExternalEndpoints: boolean;
  readonly internalTrafficChain: string;
  readonly externalPolicyChain: string;
  readonly usesClusterPolicyChain: boolean;
  readonly usesLocalPolicyChain: boolean;
  readonly usesExternalTrafficChain: boolean;
  readonly usesFWChain: boolean;
  readonly loadBalancerTrafficChain: string;
  /** The filter rule for traffic without (local) endpoints: "<comment> … -j <target>" parts. */
  readonly filterComment: string;
  readonly filterTarget: string;
}

function plan(ctx: ServiceRenderContext, svc: ServicePort, cat: CategorizedEndpoints): Plan {
  const spn = svc.key;
  const proto = svc.protocol.toLowerCase();
  const names = ctx.names.of(svc);
  const pol = servicePortPolicy(svc, cat);
  const hasEndpoints = pol.hasEndpoints;
  // Upstream iptables (unlike nftables) writes no firewall chain for a port without endpoints.
  const usesFWChain = hasEndpoints && svc.loadBalancerVIPs.length > 0 && svc.loadBalancerSourceRanges.length > 0;
  return {
    spn,
    proto,
    protoArgs: `-m ${proto} -p ${proto}`,
    names,
    clusterEndpoints: pol.clusterEndpoints,
    localEndpoints: pol.localEndpoints,
    hasEndpoints,
    hasInternalEndpoints: pol.hasInternalEndpoints,
    hasExternalEndpoints: pol.hasExternalEndpoints,
    internalTrafficChain: pol.internalUsesLocal ? names.local : names.cluster,
    externalPolicyChain: pol.externalUsesLocal ? names.local : names.cluster,
    usesClusterPolicyChain: pol.usesClusterPolicyChain,
    usesLocalPolicyChain: pol.usesLocalPolicyChain,
    usesExternalTrafficChain: pol.usesExternalTrafficChain,
    usesFWChain,
    loadBalancerTrafficChain: usesFWChain ? names.firewall : names.external,
    filterComment: comment(hasEndpoints ? `${spn} has no local endpoints` : `${spn} has no endpoints`),
    filterTarget: hasEndpoints ? 'DROP' : 'REJECT',
  };
}

/**
 * Accumulates one service port's lines. Each chunk is joined into one flat
 * string when the port is done, so the many small strings a line is built
 * from die young (cheap scavenges) instead of being promoted to the old
 * generation as the parts of one big rope (the render's main RSS cost;
 * bench/README.md, iptables-sync).
 */
class Out {
  readonly natTop: string[] = [];
  readonly filter: string[] = [];
  readonly chains: string[] = [];
  readonly own: string[] = [];
  ownCount = 0;
  constructor(private readonly keepOwn: boolean) {}
  top(line: string): void {
    this.natTop.push(line);
  }
  filt(line: string): void {
    this.filter.push(line);
  }
  rule(line: string): void {
    if (this.keepOwn) this.own.push(line);
    this.ownCount++;
  }
  chain(name: string): void {
    this.chains.push(name);
  }
}

/** Lines as one flat string, each ending in '\n' ('' for none). */
function chunk(lines: string[]): string {
  if (lines.length === 0) return '';
  lines.push('');
  return lines.join('\n');
}

/**
 * Render one service port. With keepOwn false the rules of its own chains are
 * counted but not kept (a partial sync that does not rewrite them).
 */
export function renderServicePort(
  ctx: ServiceRenderContext,
  svc: ServicePort,
  cat: CategorizedEndpoints,
  keepOwn: boolean,
): RenderedServicePort {
  const p = plan(ctx, svc, cat);
  const o = new Out(keepOwn);
  writeCaptureRules(ctx, o, svc, p);
  writeInternalMasquerade(ctx, o, svc, p);
  writeExternalChain(ctx, o, svc, p);
  writeFirewallChain(ctx, o, svc, p);
  if (p.usesClusterPolicyChain) {
    o.chain(p.names.cluster);
    writeServiceToEndpointRules(ctx, o, svc, p, p.names.cluster, p.clusterEndpoints);
  }
  if (p.usesLocalPolicyChain) {
    o.chain(p.names.local);
    writeServiceToEndpointRules(ctx, o, svc, p, p.names.local, p.localEndpoints);
  }
  for (const ep of cat.allReachableEndpoints) writeEndpointChain(ctx, o, svc, p, ep);
  return {
    natTopCount: o.natTop.length,
    natTop: chunk(o.natTop),
    filterCount: o.filter.length,
    filter: chunk(o.filter),
    chains: o.chains,
    own: keepOwn ? chunk(o.own) : null,
    ownCount: o.ownCount,
    noLocalInternal: p.hasEndpoints && !p.hasInternalEndpoints,
    noLocalExternal: p.hasEndpoints && !p.hasExternalEndpoints,
  };
}

/** The rules in the top-level chains that capture each of the service's destinations. */
function writeCaptureRules(ctx: ServiceRenderContext, o: Out, svc: ServicePort, p: Plan): void {
  captureClusterIP(o, svc, p);
  captureExternalIPs(o, svc, p);
  captureLoadBalancerIPs(o, svc, p);
  if (svc.nodePort !== 0) captureNodePort(ctx, o, svc, p);
  if (svc.healthCheckNodePort !== 0) {
    // Accepted whether or not the node has local endpoints (upstream).
    o.filt(
      `-A ${KUBE_NODEPORTS} -m comment --comment ${comment(`${p.spn} health check node port`)} -m tcp -p tcp --dport ${svc.healthCheckNodePort} -j ACCEPT`,
    );
  }
}

function captureClusterIP(o: Out, svc: ServicePort, p: Plan): void {
  const dest = `${p.protoArgs} -d ${svc.clusterIP} --dport ${svc.port}`;
  if (p.hasInternalEndpoints) {
    o.top(
      `-A ${KUBE_SERVICES} -m comment --comment ${comment(`${p.spn} cluster IP`)} ${dest} -j ${p.internalTrafficChain}`,
    );
  } else {
    o.filt(`-A ${KUBE_SERVICES} -m comment --comment ${p.filterComment} ${dest} -j ${p.filterTarget}`);
  }
}

function captureExternalIPs(o: Out, svc: ServicePort, p: Plan): void {
  for (const ip of svc.externalIPs) {
    const dest = `${p.protoArgs} -d ${ip} --dport ${svc.port}`;
    if (p.hasEndpoints) {
      o.top(
        `-A ${KUBE_SERVICES} -m comment --comment ${comment(`${p.spn} external IP`)} ${dest} -j ${p.names.external}`,
      );
    }
    // No endpoints at all (REJECT), or none for external traffic (DROP what the EXT chain did not short-circuit).
    if (!p.hasExternalEndpoints) {
      o.filt(`-A ${KUBE_EXTERNAL_SERVICES} -m comment --comment ${p.filterComment} ${dest} -j ${p.filterTarget}`);
    }
  }
}

function captureLoadBalancerIPs(o: Out, svc: ServicePort, p: Plan): void {
  const dest = (ip: string) => `${p.protoArgs} -d ${ip} --dport ${svc.port}`;
  for (const ip of svc.loadBalancerVIPs) {
    if (p.hasEndpoints) {
      o.top(
        `-A ${KUBE_SERVICES} -m comment --comment ${comment(`${p.spn} loadbalancer IP`)} ${dest(ip)} -j ${p.loadBalancerTrafficChain}`,
      );
    }
    if (p.usesFWChain) {
      o.filt(
        `-A ${KUBE_PROXY_FIREWALL} -m comment --comment ${comment(`${p.spn} traffic not accepted by ${p.names.firewall}`)} ${dest(ip)} -j DROP`,
      );
    }
  }
  if (!p.hasExternalEndpoints) {
    for (const ip of svc.loadBalancerVIPs) {
      o.filt(`-A ${KUBE_EXTERNAL_SERVICES} -m comment --comment ${p.filterComment} ${dest(ip)} -j ${p.filterTarget}`);
    }
  }
}

/** NodePorts are not subject to loadBalancerSourceRanges (upstream, and it cannot change). */
function captureNodePort(ctx: ServiceRenderContext, o: Out, svc: ServicePort, p: Plan): void {
  const np = svc.nodePort;
  if (p.hasEndpoints) {
    const cmt = `-m comment --comment ${comment(p.spn)} ${p.protoArgs}`;
    if (ctx.localhostNodePortCounter) {
      o.top(
        `-A ${KUBE_NODEPORTS} ${cmt} -d 127.0.0.0/8 --dport ${np} -m nfacct --nfacct-name ${LOCALHOST_NP_COUNTER} -j ${p.names.external}`,
      );
    }
    o.top(`-A ${KUBE_NODEPORTS} ${cmt} --dport ${np} -j ${p.names.external}`);
  }
  if (!p.hasExternalEndpoints) {
    o.filt(
      `-A ${KUBE_EXTERNAL_SERVICES} -m comment --comment ${p.filterComment} -m addrtype --dst-type LOCAL ${p.protoArgs} --dport ${np} -j ${p.filterTarget}`,
    );
  }
}

/** "Static route to the service CIDR via any node": masquerade off-cluster ClusterIP traffic. */
function writeInternalMasquerade(ctx: ServiceRenderContext, o: Out, svc: ServicePort, p: Plan): void {
  if (!p.hasInternalEndpoints) return;
  const args = `-A ${p.internalTrafficChain} -m comment --comment ${comment(`${p.spn} cluster IP`)} ${p.protoArgs} -d ${svc.clusterIP} --dport ${svc.port}`;
  if (ctx.masqueradeAll) o.rule(`${args} -j ${KUBE_MARK_MASQ}`);
  else if (ctx.ifNotLocal !== null) o.rule(`${args} ${ctx.ifNotLocal} -j ${KUBE_MARK_MASQ}`);
}

function writeExternalChain(ctx: ServiceRenderContext, o: Out, svc: ServicePort, p: Plan): void {
  if (!p.usesExternalTrafficChain) return;
  const ext = p.names.external;
  o.chain(ext);
  if (!svc.externalPolicyLocal) {
    o.rule(
      `-A ${ext} -m comment --comment ${comment(`masquerade traffic for ${p.spn} external destinations`)} -j ${KUBE_MARK_MASQ}`,
    );
  } else {
    if (ctx.ifLocal !== null) {
      o.rule(
        `-A ${ext} -m comment --comment ${comment(`pod traffic for ${p.spn} external destinations`)} ${ctx.ifLocal} -j ${p.names.cluster}`,
      );
    }
    o.rule(
      `-A ${ext} -m comment --comment ${comment(`masquerade LOCAL traffic for ${p.spn} external destinations`)} -m addrtype --src-type LOCAL -j ${KUBE_MARK_MASQ}`,
    );
    o.rule(
      `-A ${ext} -m comment --comment ${comment(`route LOCAL traffic for ${p.spn} external destinations`)} -m addrtype --src-type LOCAL -j ${p.names.cluster}`,
    );
  }
  if (p.hasExternalEndpoints) o.rule(`-A ${ext} -j ${p.externalPolicyChain}`);
}

function writeFirewallChain(ctx: ServiceRenderContext, o: Out, svc: ServicePort, p: Plan): void {
  if (!p.usesFWChain) return;
  const fw = p.names.firewall;
  o.chain(fw);
  const args = `-A ${fw} -m comment --comment ${comment(`${p.spn} loadbalancer IP`)}`;
  let allowFromNode = false;
  for (const cidr of svc.loadBalancerSourceRanges) {
    o.rule(`${args} -s ${cidr} -j ${p.names.external}`);
    const parsed = parseCIDR(cidr);
    if (parsed && ctx.nodeIP !== null && cidrContains(parsed, ctx.nodeIP)) allowFromNode = true;
  }
  if (allowFromNode) {
    for (const ip of svc.loadBalancerVIPs) o.rule(`${args} -s ${ip} -j ${p.names.external}`);
  }
  o.rule(
    `-A ${fw} -m comment --comment ${comment(`other traffic to ${p.spn} will be dropped by KUBE-PROXY-FIREWALL`)}`,
  );
}

/** `-m comment --comment <text> ` (trailing space), or '' in large-cluster mode. */
function svcComment(ctx: ServiceRenderContext, text: string): string {
  return ctx.largeClusterMode ? '' : `-m comment --comment ${comment(text)} `;
}

function writeServiceToEndpointRules(
  ctx: ServiceRenderContext,
  o: Out,
  svc: ServicePort,
  p: Plan,
  chain: string,
  eps: readonly Endpoint[],
): void {
  const spn = p.spn;
  if (svc.stickyMaxAgeSeconds > 0) {
    for (const ep of eps) {
      const sep = p.names.endpoint(ep.key);
      o.rule(
        `-A ${chain} ${svcComment(ctx, `${spn} -> ${ep.key}`)}-m recent --name ${sep} --rcheck --seconds ${svc.stickyMaxAgeSeconds} --reap -j ${sep}`,
      );
    }
  }
  const n = eps.length;
  for (let i = 0; i < n; i++) {
    const ep = eps[i]!;
    const stat = i < n - 1 ? `-m statistic --mode random --probability ${probability(n - i)} ` : '';
    o.rule(`-A ${chain} ${svcComment(ctx, `${spn} -> ${ep.key}`)}${stat}-j ${p.names.endpoint(ep.key)}`);
  }
}

function writeEndpointChain(ctx: ServiceRenderContext, o: Out, svc: ServicePort, p: Plan, ep: Endpoint): void {
  const chain = p.names.endpoint(ep.key);
  o.chain(chain);
  const head = `-A ${chain} ${svcComment(ctx, p.spn)}`;
  o.rule(`${head}-s ${ep.ip} -j ${KUBE_MARK_MASQ}`);
  const affinity = svc.stickyMaxAgeSeconds > 0 ? `-m recent --name ${chain} --set ` : '';
  o.rule(`${head}${affinity}${p.protoArgs} -j DNAT --to-destination ${ep.key}`);
}
