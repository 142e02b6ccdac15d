// The flags of upstream's configuration fields that shape the datapath:
// addresses, the mode and its sections (iptables, ipvs), how local traffic is
// detected, NodePort addresses, conntrack, sync periods and the deprecated
// port flags. Records as in flagtable.ts; flags.ts keeps them in upstream's
// order between COMMAND_FLAGS and LOGGING_FLAGS.

import { IGNORED, type FlagSpec } from './flagtable.js';

const DURATION_EXAMPLE = "as a duration such as '5s', '1m' or '2h22m'";
const SYNC_PERIOD = `How often the rules are synced in full and stale state is cleaned up, ${DURATION_EXAMPLE}. Must be above 0.`;
const minSyncPeriod = (what: string) =>
  `The shortest time between two ${what} rule syncs, ${DURATION_EXAMPLE}. With 0, every Service or EndpointSlice change is synced at once.`;

export const DATAPATH_FLAGS: readonly FlagSpec[] = [
  {
    name: 'bind-address',
    kind: 'ip',
    scope: 'config',
    to: 'cfg.bindAddress',
    usage:
      "This node's primary IP, for when it should not come from the Node object. Despite the name, nothing binds to it." +
      IGNORED,
  },
  {
    name: 'healthz-bind-address',
    kind: 'ipport',
    scope: 'config',
    to: 'cfg.healthzBindAddress',
    usage: 'Address and port of the health check server (/healthz and /livez).' + IGNORED,
  },
  {
    name: 'metrics-bind-address',
    kind: 'ipport',
    scope: 'config',
    to: 'cfg.metricsBindAddress',
    usage:
      'Address and port of the metrics server; "0.0.0.0:10249" or "[::]:10249" serve it on every interface, an empty value turns it off.' +
      IGNORED,
  },
  {
    name: 'bind-address-hard-fail',
    kind: 'bool',
    scope: 'config',
    to: 'cfg.bindAddressHardFail',
    usage: 'Exit when the health check or metrics server cannot bind its port, instead of running on without it.',
  },
  {
    name: 'profiling',
    kind: 'bool',
    scope: 'config',
    to: 'cfg.enableProfiling',
    usage: 'Serve CPU and heap profiles under /debug/pprof/ on the metrics address.' + IGNORED,
  },
  {
    name: 'show-hidden-metrics-for-version',
    kind: 'string',
    scope: 'config',
    to: 'cfg.showHiddenMetricsForVersion',
    usage:
      "Also show the metrics hidden in this release that were deprecated in this earlier version, given as <major>.<minor> (for example '1.16'); only the previous minor version is accepted." +
      IGNORED,
  },
  {
    name: 'init-only',
    kind: 'bool',
    scope: 'option',
    to: 'opts.initOnly',
    usage:
      'Do the set-up steps that need full root privileges, then exit, so that the proxy itself can run with only CAP_NET_ADMIN.',
  },
  {
    name: 'proxy-mode',
    kind: 'proxyMode',
    scope: 'config',
    to: 'cfg.mode',
    usage:
      "The datapath to program: 'iptables' (the default), 'ipvs', 'nftables', or, in kube-proxy-ts only, 'userspace' or 'ebpf'." +
      IGNORED,
  },
  {
    name: 'iptables-masquerade-bit',
    kind: 'int32',
    scope: 'config',
    to: 'cfg.iptables.masqueradeBit',
    usage: 'iptables and ipvs modes: the bit of the packet mark (0 to 31) that flags packets needing SNAT.',
  },
  {
    name: 'masquerade-all',
    kind: 'bool',
    scope: 'config',
    to: 'cfg.linux.masqueradeAll',
    usage: 'SNAT every packet sent to a Service cluster IP. Some CNI plugins need this. Linux only.',
  },
  {
    name: 'iptables-localhost-nodeports',
    kind: 'bool',
    scope: 'config',
    to: 'cfg.iptables.localhostNodePorts',
    usage:
      'When false, iptables mode does not serve NodePorts on localhost (IPv4 only; it has no way for IPv6). nftables mode serves TCP NodePorts on 127.0.0.1 and ::1 through a userspace relay instead, when nodePortAddresses includes localhost and the KubeProxyNFTablesLocalhostNodePorts gate is on.',
  },
  // The four sync-period flags land in options: processV1Alpha1Flags picks the pair that matches the mode.
  {
    name: 'iptables-sync-period',
    kind: 'duration',
    scope: 'config',
    to: 'opts.iptablesSyncPeriod',
    usage: SYNC_PERIOD,
  },
  {
    name: 'iptables-min-sync-period',
    kind: 'duration',
    scope: 'config',
    to: 'opts.iptablesMinSyncPeriod',
    usage: minSyncPeriod('iptables'),
  },
  { name: 'ipvs-sync-period', kind: 'duration', scope: 'config', to: 'opts.ipvsSyncPeriod', usage: SYNC_PERIOD },
  {
    name: 'ipvs-min-sync-period',
    kind: 'duration',
    scope: 'config',
    to: 'opts.ipvsMinSyncPeriod',
    usage: minSyncPeriod('IPVS'),
  },
  {
    name: 'ipvs-scheduler',
    kind: 'string',
    scope: 'config',
    to: 'cfg.ipvs.scheduler',
    usage: 'ipvs mode: the IPVS scheduling algorithm of the virtual servers.',
  },
  {
    name: 'ipvs-exclude-cidrs',
    kind: 'strings',
    scope: 'config',
    to: 'cfg.ipvs.excludeCIDRs',
    usage: 'Comma-separated CIDRs whose IPVS state ipvs mode leaves alone when it cleans up.',
  },
  {
    name: 'ipvs-strict-arp',
    kind: 'bool',
    scope: 'config',
    to: 'cfg.ipvs.strictARP',
    usage: 'Turn strict ARP on: arp_ignore=1 and arp_announce=2.',
  },
  {
    name: 'ipvs-tcp-timeout',
    kind: 'duration',
    scope: 'config',
    to: 'cfg.ipvs.tcpTimeout',
    usage: `Idle timeout of IPVS TCP connections, ${DURATION_EXAMPLE}; 0 leaves it unchanged.`,
  },
  {
    name: 'ipvs-tcpfin-timeout',
    kind: 'duration',
    scope: 'config',
    to: 'cfg.ipvs.tcpFinTimeout',
    usage: `Timeout of IPVS TCP connections once a FIN has been received, ${DURATION_EXAMPLE}; 0 leaves it unchanged.`,
  },
  {
    name: 'ipvs-udp-timeout',
    kind: 'duration',
    scope: 'config',
    to: 'cfg.ipvs.udpTimeout',
    usage: `Timeout of IPVS UDP packets, ${DURATION_EXAMPLE}; 0 leaves it unchanged.`,
  },
  {
    name: 'detect-local-mode',
    kind: 'localMode',
    scope: 'config',
    to: 'cfg.detectLocalMode',
    usage:
      'How traffic from local pods is recognised: ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix.' +
      IGNORED,
  },
  {
    name: 'pod-bridge-interface',
    kind: 'string',
    scope: 'config',
    to: 'cfg.detectLocal.bridgeInterface',
    usage: 'With --detect-local-mode BridgeInterface: traffic arriving from this bridge comes from local pods.',
  },
  {
    name: 'pod-interface-name-prefix',
    kind: 'string',
    scope: 'config',
    to: 'cfg.detectLocal.interfaceNamePrefix',
    usage:
      'With --detect-local-mode InterfaceNamePrefix: traffic arriving from an interface whose name starts with this prefix comes from local pods.',
  },
  {
    // Kept as text: processV1Alpha1Flags splits it into cfg.detectLocal.clusterCIDRs.
    name: 'cluster-cidr',
    kind: 'string',
    scope: 'config',
    to: 'opts.clusterCIDRs',
    usage:
      "The pods' IP range; in a dual-stack cluster one range per family, separated by a comma. With --detect-local-mode ClusterCIDR, traffic from it comes from local pods; other modes do not use it." +
      IGNORED,
  },
  {
    name: 'nodeport-addresses',
    kind: 'strings',
    scope: 'config',
    to: 'cfg.nodePortAddresses',
    usage:
      "Where NodePorts are served: CIDR ranges holding node IPs, or the keywords 'primary' (the node's primary IPs from its Node object), 'localhost' and 'all'. When unset, every local IP serves them (in nftables mode, the primary IPs). In nftables mode, 'localhost' (or a loopback CIDR) turns on the loopback TCP relay of the KubeProxyNFTablesLocalhostNodePorts gate." +
      IGNORED,
  },
  {
    name: 'oom-score-adj',
    kind: 'int32',
    scope: 'config',
    to: 'cfg.linux.oomScoreAdj',
    usage: 'The oom_score_adj of the proxy process, from -1000 to 1000.' + IGNORED,
  },
  {
    name: 'conntrack-max-per-core',
    kind: 'int32',
    scope: 'config',
    to: 'cfg.linux.conntrack.maxPerCore',
    usage: 'How many conntrack entries to allow per CPU core; 0 leaves the limit alone and ignores --conntrack-min.',
  },
  {
    name: 'conntrack-min',
    kind: 'int32',
    scope: 'config',
    to: 'cfg.linux.conntrack.min',
    usage:
      'The fewest conntrack entries to allow, whatever --conntrack-max-per-core gives (set that to 0 to leave the limit alone).',
  },
  {
    name: 'conntrack-tcp-timeout-established',
    kind: 'duration',
    scope: 'config',
    to: 'cfg.linux.conntrack.tcpEstablishedTimeout',
    usage: 'Idle timeout of established TCP connections; 0 leaves it unchanged.',
  },
  {
    name: 'conntrack-tcp-timeout-close-wait',
    kind: 'duration',
    scope: 'config',
    to: 'cfg.linux.conntrack.tcpCloseWaitTimeout',
    usage: 'Conntrack timeout of TCP connections in the CLOSE_WAIT state.',
  },
  {
    name: 'conntrack-tcp-be-liberal',
    kind: 'bool',
    scope: 'config',
    to: 'cfg.linux.conntrack.tcpBeLiberal',
    usage: 'Track TCP liberally: set nf_conntrack_tcp_be_liberal to 1.',
  },
  {
    name: 'conntrack-udp-timeout',
    kind: 'duration',
    scope: 'config',
    to: 'cfg.linux.conntrack.udpTimeout',
    usage: 'Idle timeout of UDP flows that have seen no reply (UNREPLIED); 0 leaves it unchanged.',
  },
  {
    name: 'conntrack-udp-timeout-stream',
    kind: 'duration',
    scope: 'config',
    to: 'cfg.linux.conntrack.udpStreamTimeout',
    usage: 'Idle timeout of UDP flows that have seen replies (ASSURED); 0 leaves it unchanged.',
  },
  {
    name: 'config-sync-period',
    kind: 'duration',
    scope: 'config',
    to: 'cfg.configSyncPeriod',
    usage: 'How often everything read from the API server is handed to the proxy again. Must be above 0.',
  },
  {
    name: 'healthz-port',
    kind: 'int32',
    scope: 'config',
    to: 'opts.healthzPort',
    usage: 'Port of the health check server; 0 turns it off.',
    deprecated: 'use --healthz-bind-address instead; this flag will be removed.',
  },
  {
    name: 'metrics-port',
    kind: 'int32',
    scope: 'config',
    to: 'opts.metricsPort',
    usage: 'Port of the metrics server; 0 turns it off.',
    deprecated: 'use --metrics-bind-address instead; this flag will be removed.',
  },
];
