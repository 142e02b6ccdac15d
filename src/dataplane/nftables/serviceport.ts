// The objects of one service port (upstream syncProxyRules' per-service loop,
// newest masquerade design): its chains with their rules, its affinity sets,
// and the elements it puts into the shared sets and maps. Pure: the caller
// decides what to write based on what is already in the table. Rule and
// element comments are upstream's, byte for byte (see static.ts).
import type { CategorizedEndpoints, Endpoint, ServicePort } from '../../core/types.js';
import { servicePortPolicy } from '../policy.js';
import { cidrContains, joinHostPort, parseCIDR } from '../../core/ip.js';
import type { LbAlgorithm } from '../../core/lbalgorithm.js';
import { CLIENT_HASH_SEED, maglevTable } from '../maglev.js';
import * as N from './names.js';
import type { Element, NftMap, NftSet, Rule } from './objects.js';
import * as R from './rule.js';
import { rule } from './rule.js';
import type { RenderContext } from './static.js';

export interface ChainContent {
  readonly name: string;
  readonly rules: readonly Rule[];
}

/** A 'maps'-layout endpoint map with its full contents (replaced as a whole). */
export interface EndpointMapContent {
  readonly map: NftMap;
  readonly elements: readonly Element[];
}

export interface ServicePortObjects {
  readonly chains: readonly ChainContent[];
  readonly endpointMaps: readonly EndpointMapContent[];
  readonly affinitySets: readonly NftSet[];
  readonly elements: readonly Element[];
  /** Upstream's no_local_endpoints metric inputs. */
  readonly noLocalInternal: boolean;
  readonly noLocalExternal: boolean;
}

/** One string for every no-endpoint element's verdict (it is kept with each element). */
const REJECT_VERDICT = `goto ${N.REJECT_CHAIN}`;

function el(set: string, key: string[], value?: string, comment?: string): Element {
  return {
    kind: 'element',
    set,
    key,
    ...(value !== undefined ? { value: [value] } : {}),
    ...(comment !== undefined ? { comment } : {}),
  };
}

export function renderServicePort(
  ctx: RenderContext,
  svc: ServicePort,
  cat: CategorizedEndpoints | undefined,
): ServicePortObjects {
  const base = N.servicePortChainNameBase(svc.name);
  const proto = N.nftProtocol(svc.name);
  const port = String(svc.port);
  const spn = N.truncateComment(svc.key);
  const pol = servicePortPolicy(svc, cat);
  const { clusterEndpoints, localEndpoints, hasEndpoints, hasInternalEndpoints, hasExternalEndpoints } = pol;
  const { usesClusterPolicyChain, usesLocalPolicyChain, usesExternalTrafficChain } = pol;
  const clusterPolicyChain = N.SERVICE_CHAIN_PREFIX + base;
  const localPolicyChain = N.LOCAL_CHAIN_PREFIX + base;
  const externalTrafficChain = N.EXTERNAL_CHAIN_PREFIX + base;
  const fwChain = N.FIREWALL_CHAIN_PREFIX + base;
  const internalTrafficChain = pol.internalUsesLocal ? localPolicyChain : clusterPolicyChain;
  const externalPolicyChain = pol.externalUsesLocal ? localPolicyChain : clusterPolicyChain;
  const internalFilterVerdict = hasEndpoints ? 'drop' : REJECT_VERDICT;
  const externalFilterVerdict = hasEndpoints ? 'drop' : REJECT_VERDICT;

  const elements: Element[] = [el(N.CLUSTER_IPS_SET, [svc.clusterIP])];
  if (hasInternalEndpoints) {
    elements.push(el(N.SERVICE_IPS_MAP, [svc.clusterIP, proto, port], `goto ${internalTrafficChain}`));
  } else {
    elements.push(el(N.NO_ENDPOINT_SERVICES_MAP, [svc.clusterIP, proto, port], internalFilterVerdict, spn));
  }
  for (const ip of svc.externalIPs) {
    if (hasEndpoints) elements.push(el(N.SERVICE_IPS_MAP, [ip, proto, port], `goto ${externalTrafficChain}`));
    if (!hasExternalEndpoints)
      elements.push(el(N.NO_ENDPOINT_SERVICES_MAP, [ip, proto, port], externalFilterVerdict, spn));
  }
  // Upstream nftables (unlike iptables) writes the firewall chain also for a port without endpoints.
  const usesFWChain = svc.loadBalancerVIPs.length > 0 && svc.loadBalancerSourceRanges.length > 0;
  const chains: ChainContent[] = [];
  if (usesFWChain) chains.push({ name: fwChain, rules: [firewallRule(ctx, svc, fwChain)] });
  for (const ip of svc.loadBalancerVIPs) {
    if (hasEndpoints) elements.push(el(N.SERVICE_IPS_MAP, [ip, proto, port], `goto ${externalTrafficChain}`));
    if (usesFWChain) elements.push(el(N.FIREWALL_IPS_MAP, [ip, proto, port], `goto ${fwChain}`));
  }
  if (!hasExternalEndpoints) {
    for (const ip of svc.loadBalancerVIPs)
      elements.push(el(N.NO_ENDPOINT_SERVICES_MAP, [ip, proto, port], externalFilterVerdict, spn));
  }
  if (svc.nodePort > 0) {
    const np = String(svc.nodePort);
    if (hasEndpoints) elements.push(el(N.SERVICE_NODEPORTS_MAP, [proto, np], `goto ${externalTrafficChain}`));
    if (!hasExternalEndpoints) elements.push(el(N.NO_ENDPOINT_NODEPORTS_MAP, [proto, np], externalFilterVerdict, spn));
  }

  if (usesExternalTrafficChain) {
    chains.push({
      name: externalTrafficChain,
      rules: externalRules(
        ctx,
        svc,
        externalTrafficChain,
        clusterPolicyChain,
        hasExternalEndpoints ? externalPolicyChain : null,
      ),
    });
  }
  const affinitySets: NftSet[] = [];
  const endpointMaps: EndpointMapContent[] = [];
  const mapped = ctx.layout === 'maps' && svc.stickyMaxAgeSeconds <= 0 && (svc.lbAlgorithm ?? 'random') === 'random';
  if (usesClusterPolicyChain) {
    if (mapped) endpointMaps.push(endpointMap(ctx, proto, clusterPolicyChain, clusterEndpoints));
    chains.push(...endpointChains(ctx, svc, clusterPolicyChain, clusterEndpoints));
  }
  if (usesLocalPolicyChain) {
    if (mapped) endpointMaps.push(endpointMap(ctx, proto, localPolicyChain, localEndpoints));
    chains.push(...endpointChains(ctx, svc, localPolicyChain, localEndpoints));
  }

  const reachable = cat?.allReachableEndpoints ?? [];
  for (const ep of reachable) {
    if (svc.stickyMaxAgeSeconds > 0 && (usesClusterPolicyChain || usesLocalPolicyChain)) {
      affinitySets.push({
        kind: 'set',
        name: N.AFFINITY_SET_PREFIX + N.servicePortEndpointChainNameBase(svc.name, ep.ip, ep.port),
        type: ctx.addrType,
        flags: ['dynamic', 'timeout'],
        timeoutSeconds: svc.stickyMaxAgeSeconds,
      });
    }
    if (ep.isLocal) elements.push(el(N.HAIRPIN_CONNECTIONS_SET, [ep.ip, ep.ip, proto, String(ep.port)]));
  }
  return {
    chains: dedupeChains(chains),
    endpointMaps: dedupeMaps(endpointMaps),
    affinitySets,
    elements,
    noLocalInternal: hasEndpoints && !hasInternalEndpoints,
    noLocalExternal: hasEndpoints && svc.externallyAccessible && !hasExternalEndpoints,
  };
}

function firewallRule(ctx: RenderContext, svc: ServicePort, fwChain: string): Rule {
  const sources: string[] = [];
  let allowFromNode = false;
  for (const r of svc.loadBalancerSourceRanges) {
    const c = parseCIDR(r);
    if (!c) continue;
    sources.push(c.text);
    if (ctx.nodeIP !== undefined && cidrContains(c, ctx.nodeIP)) allowFromNode = true;
  }
  // A VIP is often also a local address (via a route); a request from this
  // node to it loops back with the VIP as source, which must be let through.
  if (allowFromNode) sources.push(...svc.loadBalancerVIPs);
  return rule(fwChain, [R.addrList(ctx.ipX, 'saddr', sources, true), R.drop]);
}

function externalRules(
  ctx: RenderContext,
  svc: ServicePort,
  chain: string,
  clusterPolicyChain: string,
  policyChain: string | null,
): Rule[] {
  const M = R.markSet('or', ctx.masqMark);
  const out: Rule[] = [];
  if (!svc.externalPolicyLocal) {
    // Endpoints may be on other nodes: masquerade so replies come back here.
    out.push(rule(chain, [M], 'masquerade'));
  } else {
    // Pod -> external destination is treated like going out to the LB and
    // back: subject to neither traffic policy.
    if (ctx.ifLocal !== null)
      out.push(rule(chain, [ctx.ifLocal, R.goto(clusterPolicyChain)], 'short-circuit pod traffic'));
    // The host picks the (local) external IP as source: masquerade it.
    const fromHost = R.fibLocal('saddr');
    out.push(rule(chain, [fromHost, M], 'masquerade local traffic'));
    out.push(rule(chain, [fromHost, R.goto(clusterPolicyChain)], 'short-circuit local traffic'));
  }
  if (policyChain !== null) out.push(rule(chain, [R.goto(policyChain)]));
  return out;
}

/**
 * The policy chain's endpoint selection. Without affinity one DNAT through a
 * numgen-indexed map; with affinity one chain per endpoint that records the
 * client in the endpoint's affinity set.
 */
function endpointChains(ctx: RenderContext, svc: ServicePort, chain: string, eps: readonly Endpoint[]): ChainContent[] {
  const proto = R.l4proto(N.nftProtocol(svc.name));
  const algo = svc.lbAlgorithm ?? 'random';
  if (algo !== 'random' && eps.length > 0) return chosenEndpointChains(ctx, svc, chain, eps, algo);
  const lean = ctx.layout !== 'upstream';
  if (svc.stickyMaxAgeSeconds <= 0 && ctx.layout === 'maps') {
    const m = N.ENDPOINTS_MAP_PREFIX + chain;
    return [
      {
        name: chain,
        rules: [rule(chain, [proto, R.dnatNumgenMap(ctx.ipX, ENDPOINT_SLOTS, m)])],
      },
    ];
  }
  if (svc.stickyMaxAgeSeconds <= 0) {
    if (lean)
      return [
        {
          name: chain,
          rules: cascade(eps.map((ep) => [proto, R.dnat(ep.ip, ep.port)])).map((r) => rule(chain, r)),
        },
      ];
    const entries = eps.map((ep, i) => ({ key: i, addr: ep.ip, port: ep.port }));
    return [{ name: chain, rules: [rule(chain, [proto, R.dnatNumgenList(ctx.ipX, eps.length, entries)])] }];
  }
  const rules: Rule[] = [];
  const out: ChainContent[] = [];
  const names = eps.map((ep) => N.servicePortEndpointChainNameBase(svc.name, ep.ip, ep.port));
  eps.forEach((_, i) => {
    rules.push(
      rule(chain, [
        R.addrIn(ctx.ipX, 'saddr', N.AFFINITY_SET_PREFIX + names[i]),
        R.goto(N.ENDPOINT_CHAIN_PREFIX + names[i]),
      ]),
    );
  });
  if (lean) {
    rules.push(...cascade(names.map((n) => [R.goto(N.ENDPOINT_CHAIN_PREFIX + n)])).map((r) => rule(chain, r)));
  } else {
    const entries = names.map((n, i) => ({ key: i, verdict: 'goto' as const, chain: N.ENDPOINT_CHAIN_PREFIX + n }));
    rules.push(rule(chain, [R.numgenVmap(eps.length, entries)]));
  }
  eps.forEach((ep, i) => {
    const epChain = N.ENDPOINT_CHAIN_PREFIX + names[i];
    out.push({
      name: epChain,
      rules: [
        rule(epChain, [R.updateSaddr(ctx.ipX, N.AFFINITY_SET_PREFIX + names[i])]),
        rule(epChain, [proto, R.dnat(ep.ip, ep.port)]),
      ],
    });
  });
  // Endpoint chains shared by the cluster and local policy chains are
  // deduplicated by the caller.
  return [...out, { name: chain, rules }];
}

/** Buckets of a Maglev or source-hash choice in nftables mode (a prime; src/dataplane/maglev.ts). */
export const NFT_MAGLEV_M = 1021;

/**
 * Each bucket's endpoint index for `jhash ... mod NFT_MAGLEV_M`: the Maglev
 * table over the endpoints in a fixed order (sorted "ip:port"), so every
 * node fills the same table from the same endpoints, whatever order the
 * EndpointSlices listed them in.
 */
export function maglevBuckets(eps: readonly Endpoint[]): number[] {
  const keys = eps.map((e) => joinHostPort(e.ip, e.port));
  const order = keys.map((_, i) => i).sort((a, b) => (keys[a]! < keys[b]! ? -1 : keys[a]! > keys[b]! ? 1 : 0));
  return maglevTable(
    order.map((i) => keys[i]!),
    NFT_MAGLEV_M,
  ).map((j) => order[j]!);
}

/**
 * The policy chain of a Service with kube-proxy-ts/lb-algorithm other than
 * random, in every layout: one anonymous map indexed by `numgen inc`
 * (round-robin: the rule's counter is atomic, so connections take turns
 * exactly) or by `jhash` of the client (Maglev: address and port;
 * source-hash: address), whose NFT_MAGLEV_M buckets hold the Maglev table.
 * Without affinity the map gives the DNAT target; with affinity, as upstream,
 * an endpoint chain that records the client, after the affinity rules.
 */
function chosenEndpointChains(
  ctx: RenderContext,
  svc: ServicePort,
  chain: string,
  eps: readonly Endpoint[],
  algo: Exclude<LbAlgorithm, 'random'>,
): ChainContent[] {
  const proto = R.l4proto(N.nftProtocol(svc.name));
  const pick: R.Pick =
    algo === 'round-robin'
      ? { k: 'inc' }
      : { k: 'jhash', fam: ctx.ipX, sport: algo === 'maglev', seed: CLIENT_HASH_SEED };
  const index = algo === 'round-robin' ? eps.map((_, i) => i) : maglevBuckets(eps);
  if (svc.stickyMaxAgeSeconds <= 0) {
    const entries = index.map((i, key) => ({ key, addr: eps[i]!.ip, port: eps[i]!.port }));
    return [{ name: chain, rules: [rule(chain, [proto, R.dnatNumgenList(ctx.ipX, index.length, entries, pick)])] }];
  }
  const names = eps.map((ep) => N.servicePortEndpointChainNameBase(svc.name, ep.ip, ep.port));
  const rules: Rule[] = names.map((n) =>
    rule(chain, [R.addrIn(ctx.ipX, 'saddr', N.AFFINITY_SET_PREFIX + n), R.goto(N.ENDPOINT_CHAIN_PREFIX + n)]),
  );
  const entries = index.map((i, key) => ({
    key,
    verdict: 'goto' as const,
    chain: N.ENDPOINT_CHAIN_PREFIX + names[i]!,
  }));
  rules.push(rule(chain, [R.numgenVmap(index.length, entries, pick)]));
  const out: ChainContent[] = eps.map((ep, i) => {
    const epChain = N.ENDPOINT_CHAIN_PREFIX + names[i]!;
    return {
      name: epChain,
      rules: [
        rule(epChain, [R.updateSaddr(ctx.ipX, N.AFFINITY_SET_PREFIX + names[i]!)]),
        rule(epChain, [proto, R.dnat(ep.ip, ep.port)]),
      ],
    };
  });
  return [...out, { name: chain, rules }];
}

/**
 * Uniform choice without an anonymous map: statement i runs with probability
 * 1/(N-i) given that the earlier ones did not, i.e. 1/N each.
 */
function cascade(statements: readonly R.RuleBody[]): R.RuleBody[] {
  const n = statements.length;
  return statements.map((s, i) => (n - i > 1 ? [R.numgen(n - i, 0), ...s] : s));
}

/** lcm(1..16): numgen slots of a 'maps'-layout endpoint map. */
export const ENDPOINT_SLOTS = 720720;

/**
 * The endpoint map of one policy chain: slots 0..ENDPOINT_SLOTS-1 split into
 * one interval per endpoint, sizes differing by at most one (equal up to 16
 * endpoints). Keys are "lo-hi" ranges, values "IP . port".
 */
export function endpointMap(
  ctx: RenderContext,
  proto: string,
  chain: string,
  eps: readonly Endpoint[],
): EndpointMapContent {
  const name = N.ENDPOINTS_MAP_PREFIX + chain;
  const map: NftMap = {
    kind: 'map',
    name,
    type: `integer : ${ctx.addrType} . inet_service`,
    // `th dport` would be neater, but nft 1.0.6 then refuses to add a
    // `meta l4proto tcp` rule using an existing map ("conflicting protocols").
    typeOf: `numgen random mod ${ENDPOINT_SLOTS} : ${ctx.ipX} daddr . ${proto} dport`,
    flags: ['interval'],
  };
  const elements: Element[] = [];
  const n = eps.length;
  for (let i = 0; i < n; i++) {
    const lo = Math.floor((i * ENDPOINT_SLOTS) / n);
    const hi = Math.floor(((i + 1) * ENDPOINT_SLOTS) / n) - 1;
    if (hi < lo) continue; // more endpoints than slots: never in practice
    elements.push({ kind: 'element', set: name, key: [`${lo}-${hi}`], value: [eps[i]!.ip, String(eps[i]!.port)] });
  }
  return { map, elements };
}

function dedupeMaps(maps: EndpointMapContent[]): EndpointMapContent[] {
  const seen = new Set<string>();
  return maps.filter((m) => (seen.has(m.map.name) ? false : (seen.add(m.map.name), true)));
}

function dedupeChains(chains: ChainContent[]): ChainContent[] {
  const seen = new Set<string>();
  return chains.filter((c) => (seen.has(c.name) ? false : (seen.add(c.name), true)));
}
