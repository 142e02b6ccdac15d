// What each datapath mode does that a user can see, in the terms
// `kube-proxy-ts migrate` compares (src/engine/migrate.ts): the one table
// that knows which mode does what, so the analysis never branches on a
// mode's name. The facts are the ones docs/compatibility.md and
// docs/migration.md describe; a new mode adds its row here.
import type { ProxyMode } from '../core/types.js';

/**
 * What each mode does that a user can see, in the terms the findings compare.
 * The analysis below reads only these traits, never a mode's name: this table
 * is the one place that knows which mode does what.
 */
export interface ModeTraits {
  /** Service addresses are addresses of the node (IPVS mode's kube-ipvs0). */
  readonly bindsServiceAddresses: boolean;
  /** How a new connection's endpoint is chosen for a Service without the annotation. */
  readonly endpointChoice: 'ipvs-scheduler' | 'round-robin' | 'random' | 'ebpf-flag';
  /** The mode honours the kube-proxy-ts/lb-algorithm annotation. */
  readonly lbAnnotation: boolean;
  /** NodePorts when nodePortAddresses is not set: every node address, or the primary ones. */
  readonly nodePortDefault: 'all' | 'primary';
  /** NodePorts on loopback: iptables' route_localnet (IPv4), nftables' TCP relay (opt-in), or none. */
  readonly loopbackNodePorts: 'route-localnet' | 'relay' | 'none';
  /** Traffic policy Local as IPVS mode applies it, or as upstream's netfilter modes do. */
  readonly localPolicy: 'ipvs' | 'upstream';
  /** A filter rule accepts the health-check node ports. */
  readonly acceptsHealthCheckNodePort: boolean;
  readonly servesSCTP: boolean;
  /** ipvs.strictARP makes the mode set the ARP sysctls at start. */
  readonly setsStrictARP: boolean;
}

export const MODE_TRAITS: Readonly<Record<ProxyMode, ModeTraits>> = {
  iptables: {
    bindsServiceAddresses: false,
    endpointChoice: 'random',
    lbAnnotation: false,
    nodePortDefault: 'all',
    loopbackNodePorts: 'route-localnet',
    localPolicy: 'upstream',
    acceptsHealthCheckNodePort: true,
    servesSCTP: true,
    setsStrictARP: false,
  },
  ipvs: {
    bindsServiceAddresses: true,
    endpointChoice: 'ipvs-scheduler',
    lbAnnotation: false,
    nodePortDefault: 'all',
    loopbackNodePorts: 'none',
    localPolicy: 'ipvs',
    acceptsHealthCheckNodePort: true,
    servesSCTP: true,
    setsStrictARP: true,
  },
  nftables: {
    bindsServiceAddresses: false,
    endpointChoice: 'random',
    lbAnnotation: true,
    nodePortDefault: 'primary',
    loopbackNodePorts: 'relay',
    localPolicy: 'upstream',
    acceptsHealthCheckNodePort: false,
    servesSCTP: true,
    setsStrictARP: false,
  },
  userspace: {
    bindsServiceAddresses: false,
    endpointChoice: 'round-robin',
    lbAnnotation: false,
    nodePortDefault: 'all',
    loopbackNodePorts: 'none',
    localPolicy: 'upstream',
    acceptsHealthCheckNodePort: false,
    servesSCTP: true,
    setsStrictARP: false,
  },
  ebpf: {
    bindsServiceAddresses: false,
    endpointChoice: 'ebpf-flag',
    lbAnnotation: true,
    nodePortDefault: 'primary',
    loopbackNodePorts: 'none',
    localPolicy: 'upstream',
    acceptsHealthCheckNodePort: false,
    servesSCTP: false,
    setsStrictARP: false,
  },
};
