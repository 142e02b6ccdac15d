// Per-service-port rules of upstream syncProxyRules (the body of its loop over
// svcPortMap), one function per concern. Order of writes matters: it is the
// byte order of the restore payload.

import { cidrContains, parseCIDR } from '../../core/ip.js';
import type { CategorizedEndpoints, Endpoint, ServicePort } from '../../core/types.js';
import { endpointChainName, externalChainName, firewallChainName, localChainName, serviceChainName } from './names.js';
import { LineBuffer, chainLine, comment, probability } from './restore.js';

export const KUBE_SERVICES = 'KUBE-SERVICES';
export const KUBE_EXTERNAL_SERVICES = 'KUBE-EXTERNAL-SERVICES';
export const KUBE_NODEPORTS = 'KUBE-NODEPORTS';
export const KUBE_PROXY_FIREWALL = 'KUBE-PROXY-FIREWALL';
export const KUBE_MARK_MASQ = 'KUBE-MARK-MASQ';
export const LOCALHOST_NP_COUNTER = 'localhost_nps_accepted_pkts';

/** Everything about the sync that every service port needs. */
export interface ServiceRenderContext {
  readonly masqueradeAll: boolean;
  /** Detector args; null when no local detector is implemented. */
  readonly ifLocal: readonly string[] | null;
  readonly ifNotLocal: readonly string[] | null;
  readonly localhostNodePortCounter: boolean;
  readonly largeClusterMode: boolean;
  readonly nodeIP: string | null;
  readonly filterRules: LineBuffer;
  readonly natRules: LineBuffer;
  readonly activeNatChains: Set<string>;
}

/** Where the service's own chains go: the real buffers, or throw-away ones (partial sync). */
export interface ChainSink {
  readonly natChains: LineBuffer;
  readonly natRules: LineBuffer;
}

export interface ServiceCounts {
  readonly noLocalInternal: boolean;
  readonly noLocalExternal: boolean;
}

interface Plan {
  readonly spn: string;
  readonly proto: string;
  readonly clusterEndpoints: readonly Endpoint[];
  readonly localEndpoints: readonly Endpoint[];
  readonly hasEndpoints: boolean;
  readonly hasInternalEndpoints: boolean;
  readonly hasExternalEndpoints: boolean;
  readonly clusterPolicyChain: string;
  readonly localPolicyChain: string;
  readonly internalTrafficChain: string;
  readonly externalPolicyChain: string;
  readonly externalTrafficChain: string;
  readonly fwChain: string;
  readonly usesClusterPolicyChain: boolean;
  readonly usesLocalPolicyChain: boolean;
  readonly usesExternalTrafficChain: boolean;
  readonly usesFWChain: boolean;
  readonly loadBalancerTrafficChain: string;
  readonly internalFilter: { target: string; comment: string };
  readonly externalFilter: { target: string; comment: string };
}

function plan(svc: ServicePort, cat: CategorizedEndpoints): Plan {
  const spn = svc.key;
  const proto = svc.protocol.toLowerCase();
  const clusterEndpoints = cat.clusterEndpoints ?? [];
  const localEndpoints = cat.localEndpoints ?? [];
  const hasEndpoints = cat.hasAnyEndpoints;
  const clusterPolicyChain = serviceChainName(spn, svc.protocol);
  const localPolicyChain = localChainName(spn, svc.protocol);
  const hasInternalEndpoints = hasEndpoints && (!svc.internalPolicyLocal || localEndpoints.length > 0);
  const hasExternalEndpoints = hasEndpoints && (!svc.externalPolicyLocal || localEndpoints.length > 0);
  const externalTrafficChain = externalChainName(spn, svc.protocol);
  const fwChain = firewallChainName(spn, svc.protocol);
  const usesFWChain = hasEndpoints && svc.loadBalancerVIPs.length > 0 && svc.loadBalancerSourceRanges.length > 0;
  const noEp = { target: 'REJECT', comment: comment(`${spn} has no endpoints`) };
  const noLocal = { target: 'DROP', comment: comment(`${spn} has no local endpoints`) };
  return {
    spn, proto, clusterEndpoints, localEndpoints, hasEndpoints, hasInternalEndpoints, hasExternalEndpoints,
    clusterPolicyChain, localPolicyChain,
    internalTrafficChain: svc.internalPolicyLocal ? localPolicyChain : clusterPolicyChain,
    externalPolicyChain: svc.externalPolicyLocal ? localPolicyChain : clusterPolicyChain,
    externalTrafficChain, fwChain,
    usesClusterPolicyChain: clusterEndpoints.length > 0 && svc.usesClusterEndpoints,
    usesLocalPolicyChain: localEndpoints.length > 0 && svc.usesLocalEndpoints,
    usesExternalTrafficChain: hasEndpoints && svc.externallyAccessible,
    usesFWChain,
    loadBalancerTrafficChain: usesFWChain ? fwChain : externalTrafficChain,
    internalFilter: hasEndpoints ? noLocal : noEp,
    externalFilter: hasEndpoints ? noLocal : noEp,
  };
}

/**
 * Write one service port. Top-level chain rules (KUBE-SERVICES, KUBE-NODEPORTS,
 * filter) always go to ctx; the service's own chains go to `sink`.
 */
export function writeServicePort(ctx: ServiceRenderContext, sink: ChainSink, svc: ServicePort, cat: CategorizedEndpoints): ServiceCounts {
  const p = plan(svc, cat);
  writeCaptureRules(ctx, svc, p);
  writeInternalMasquerade(ctx, sink, svc, p);
  writeExternalChain(ctx, sink, svc, p);
  writeFirewallChain(ctx, sink, svc, p);
  if (p.usesClusterPolicyChain) {
    sink.natChains.writeLine(chainLine(p.clusterPolicyChain));
    ctx.activeNatChains.add(p.clusterPolicyChain);
    writeServiceToEndpointRules(ctx, sink, svc, p.clusterPolicyChain, p.clusterEndpoints);
  }
  if (p.usesLocalPolicyChain) {
    sink.natChains.writeLine(chainLine(p.localPolicyChain));
    ctx.activeNatChains.add(p.localPolicyChain);
    writeServiceToEndpointRules(ctx, sink, svc, p.localPolicyChain, p.localEndpoints);
  }
  for (const ep of cat.allReachableEndpoints) writeEndpointChain(ctx, sink, svc, p, ep);
  return {
    noLocalInternal: p.hasEndpoints && !p.hasInternalEndpoints,
    noLocalExternal: p.hasEndpoints && !p.hasExternalEndpoints,
  };
}

/** The rules in the top-level chains that capture each of the service's destinations. */
function writeCaptureRules(ctx: ServiceRenderContext, svc: ServicePort, p: Plan): void {
  const proto = ['-m', p.proto, '-p', p.proto];
  captureClusterIP(ctx, svc, p, proto);
  captureExternalIPs(ctx, svc, p, proto);
  captureLoadBalancerIPs(ctx, svc, p, proto);
  if (svc.nodePort !== 0) captureNodePort(ctx, svc, p, proto);
  if (svc.healthCheckNodePort !== 0) {
    // Accepted whether or not the node has local endpoints (upstream).
    ctx.filterRules.write('-A', KUBE_NODEPORTS, '-m', 'comment', '--comment', comment(`${p.spn} health check node port`),
      '-m', 'tcp', '-p', 'tcp', '--dport', String(svc.healthCheckNodePort), '-j', 'ACCEPT');
  }
}

function captureClusterIP(ctx: ServiceRenderContext, svc: ServicePort, p: Plan, proto: string[]): void {
  const dest = ['-d', svc.clusterIP, '--dport', String(svc.port)];
  if (p.hasInternalEndpoints) {
    ctx.natRules.write('-A', KUBE_SERVICES, '-m', 'comment', '--comment', comment(`${p.spn} cluster IP`), proto, dest, '-j', p.internalTrafficChain);
  } else {
    ctx.filterRules.write('-A', KUBE_SERVICES, '-m', 'comment', '--comment', p.internalFilter.comment, proto, dest, '-j', p.internalFilter.target);
  }
}

function captureExternalIPs(ctx: ServiceRenderContext, svc: ServicePort, p: Plan, proto: string[]): void {
  for (const ip of svc.externalIPs) {
    const dest = ['-d', ip, '--dport', String(svc.port)];
    if (p.hasEndpoints) {
      ctx.natRules.write('-A', KUBE_SERVICES, '-m', 'comment', '--comment', comment(`${p.spn} external IP`), proto, dest, '-j', p.externalTrafficChain);
    }
    // No endpoints at all (REJECT), or none for external traffic (DROP what the EXT chain did not short-circuit).
    if (!p.hasExternalEndpoints) {
      ctx.filterRules.write('-A', KUBE_EXTERNAL_SERVICES, '-m', 'comment', '--comment', p.externalFilter.comment, proto, dest, '-j', p.externalFilter.target);
    }
  }
}

function captureLoadBalancerIPs(ctx: ServiceRenderContext, svc: ServicePort, p: Plan, proto: string[]): void {
  const dest = (ip: string) => ['-d', ip, '--dport', String(svc.port)];
  for (const ip of svc.loadBalancerVIPs) {
    if (p.hasEndpoints) {
      ctx.natRules.write('-A', KUBE_SERVICES, '-m', 'comment', '--comment', comment(`${p.spn} loadbalancer IP`), proto, dest(ip),
        '-j', p.loadBalancerTrafficChain);
    }
    if (p.usesFWChain) {
      ctx.filterRules.write('-A', KUBE_PROXY_FIREWALL, '-m', 'comment', '--comment',
        comment(`${p.spn} traffic not accepted by ${p.fwChain}`), proto, dest(ip), '-j', 'DROP');
    }
  }
  if (!p.hasExternalEndpoints) {
    for (const ip of svc.loadBalancerVIPs) {
      ctx.filterRules.write('-A', KUBE_EXTERNAL_SERVICES, '-m', 'comment', '--comment', p.externalFilter.comment, proto, dest(ip),
        '-j', p.externalFilter.target);
    }
  }
}

/** NodePorts are not subject to loadBalancerSourceRanges (upstream, and it cannot change). */
function captureNodePort(ctx: ServiceRenderContext, svc: ServicePort, p: Plan, proto: string[]): void {
  const np = String(svc.nodePort);
  if (p.hasEndpoints) {
    if (ctx.localhostNodePortCounter) {
      ctx.natRules.write('-A', KUBE_NODEPORTS, '-m', 'comment', '--comment', comment(p.spn), proto, '-d', '127.0.0.0/8',
        '--dport', np, '-m', 'nfacct', '--nfacct-name', LOCALHOST_NP_COUNTER, '-j', p.externalTrafficChain);
    }
    ctx.natRules.write('-A', KUBE_NODEPORTS, '-m', 'comment', '--comment', comment(p.spn), proto, '--dport', np, '-j', p.externalTrafficChain);
  }
  if (!p.hasExternalEndpoints) {
    ctx.filterRules.write('-A', KUBE_EXTERNAL_SERVICES, '-m', 'comment', '--comment', p.externalFilter.comment,
      '-m', 'addrtype', '--dst-type', 'LOCAL', proto, '--dport', np, '-j', p.externalFilter.target);
  }
}

/** "Static route to the service CIDR via any node": masquerade off-cluster ClusterIP traffic. */
function writeInternalMasquerade(ctx: ServiceRenderContext, sink: ChainSink, svc: ServicePort, p: Plan): void {
  if (!p.hasInternalEndpoints) return;
  const args = ['-m', 'comment', '--comment', comment(`${p.spn} cluster IP`), '-m', p.proto, '-p', p.proto,
    '-d', svc.clusterIP, '--dport', String(svc.port)];
  if (ctx.masqueradeAll) sink.natRules.write('-A', p.internalTrafficChain, args, '-j', KUBE_MARK_MASQ);
  else if (ctx.ifNotLocal) sink.natRules.write('-A', p.internalTrafficChain, args, ctx.ifNotLocal, '-j', KUBE_MARK_MASQ);
}

function writeExternalChain(ctx: ServiceRenderContext, sink: ChainSink, svc: ServicePort, p: Plan): void {
  if (!p.usesExternalTrafficChain) return;
  const ext = p.externalTrafficChain;
  sink.natChains.writeLine(chainLine(ext));
  ctx.activeNatChains.add(ext);
  const r = sink.natRules;
  if (!svc.externalPolicyLocal) {
    r.write('-A', ext, '-m', 'comment', '--comment', comment(`masquerade traffic for ${p.spn} external destinations`), '-j', KUBE_MARK_MASQ);
  } else {
    if (ctx.ifLocal) {
      r.write('-A', ext, '-m', 'comment', '--comment', comment(`pod traffic for ${p.spn} external destinations`), ctx.ifLocal,
        '-j', p.clusterPolicyChain);
    }
    r.write('-A', ext, '-m', 'comment', '--comment', comment(`masquerade LOCAL traffic for ${p.spn} external destinations`),
      '-m', 'addrtype', '--src-type', 'LOCAL', '-j', KUBE_MARK_MASQ);
    r.write('-A', ext, '-m', 'comment', '--comment', comment(`route LOCAL traffic for ${p.spn} external destinations`),
      '-m', 'addrtype', '--src-type', 'LOCAL', '-j', p.clusterPolicyChain);
  }
  if (p.hasExternalEndpoints) r.write('-A', ext, '-j', p.externalPolicyChain);
}

function writeFirewallChain(ctx: ServiceRenderContext, sink: ChainSink, svc: ServicePort, p: Plan): void {
  if (!p.usesFWChain) return;
  sink.natChains.writeLine(chainLine(p.fwChain));
  ctx.activeNatChains.add(p.fwChain);
  const args = ['-A', p.fwChain, '-m', 'comment', '--comment', comment(`${p.spn} loadbalancer IP`)];
  let allowFromNode = false;
  for (const cidr of svc.loadBalancerSourceRanges) {
    sink.natRules.write(args, '-s', cidr, '-j', p.externalTrafficChain);
    const parsed = parseCIDR(cidr);
    if (parsed && ctx.nodeIP !== null && cidrContains(parsed, ctx.nodeIP)) allowFromNode = true;
  }
  if (allowFromNode) {
    for (const ip of svc.loadBalancerVIPs) sink.natRules.write(args, '-s', ip, '-j', p.externalTrafficChain);
  }
  sink.natRules.write('-A', p.fwChain, '-m', 'comment', '--comment',
    comment(`other traffic to ${p.spn} will be dropped by KUBE-PROXY-FIREWALL`));
}

function svcComment(ctx: ServiceRenderContext, text: string): string[] {
  return ctx.largeClusterMode ? [] : ['-m', 'comment', '--comment', comment(text)];
}

function writeServiceToEndpointRules(ctx: ServiceRenderContext, sink: ChainSink, svc: ServicePort, chain: string, eps: readonly Endpoint[]): void {
  const spn = svc.key;
  if (svc.stickyMaxAgeSeconds > 0) {
    for (const ep of eps) {
      const sep = endpointChainName(spn, svc.protocol, ep.key);
      sink.natRules.write('-A', chain, svcComment(ctx, `${spn} -> ${ep.key}`), '-m', 'recent', '--name', sep,
        '--rcheck', '--seconds', String(svc.stickyMaxAgeSeconds), '--reap', '-j', sep);
    }
  }
  eps.forEach((ep, i) => {
    const sep = endpointChainName(spn, svc.protocol, ep.key);
    const stat = i < eps.length - 1 ? ['-m', 'statistic', '--mode', 'random', '--probability', probability(eps.length - i)] : [];
    sink.natRules.write('-A', chain, svcComment(ctx, `${spn} -> ${ep.key}`), stat, '-j', sep);
  });
}

function writeEndpointChain(ctx: ServiceRenderContext, sink: ChainSink, svc: ServicePort, p: Plan, ep: Endpoint): void {
  const chain = endpointChainName(p.spn, svc.protocol, ep.key);
  sink.natChains.writeLine(chainLine(chain));
  ctx.activeNatChains.add(chain);
  const args = ['-A', chain, ...svcComment(ctx, p.spn)];
  sink.natRules.write(args, '-s', ep.ip, '-j', KUBE_MARK_MASQ);
  const affinity = svc.stickyMaxAgeSeconds > 0 ? ['-m', 'recent', '--name', chain, '--set'] : [];
  sink.natRules.write(args, affinity, '-m', p.proto, '-p', p.proto, '-j', 'DNAT', '--to-destination', ep.key);
}
