// The kube-proxy command-line flags: names, types, defaults and meaning as
// upstream's cmd/kube-proxy/app/options.go (AddFlags) plus the logging flags
// of component-base logs/api/v1. The help texts are our own words. Each flag knows how to apply its parsed value to
// the flag-built configuration (`cfg`, upstream's o.config) or to the options
// that are not configuration fields (`opts`).
//
// scope: 'config'  - maps to a config field; ignored when --config is given.
//        'logging' - logging flags; override the config file (copyLogsFromFlags).
//        'option'  - not config (--config, --cleanup, --master, --hostname-override ...).

import { formatDuration as durationText, type Duration } from '../core/config/duration.js';
import { KNOWN_FEATURE_GATES } from '../core/config/features.js';
import type { ResolvedConfig, VModuleItem } from '../core/config/types.js';

export type FlagKind =
  | 'string'
  | 'bool'
  | 'int32'
  | 'float32'
  | 'duration'
  | 'strings'
  | 'ip'
  | 'ipport'
  | 'mapStringBool'
  | 'level'
  | 'moduleSpec'
  | 'proxyMode'
  | 'localMode'
  | 'quantity'
  | 'version';

export type FlagValue = string | number | boolean | string[] | Record<string, boolean> | VModuleItem[];

/** Values from flags that are not config fields (upstream Options' own fields). */
export interface CommandOptions {
  configFile: string;
  writeConfigTo: string;
  cleanup: boolean;
  initOnly: boolean;
  master: string;
  serviceProxyName: string;
  manifestsDir: string;
  serviceTrafficMetrics: number;
  datapathCanary: boolean;
  healthzPort: number;
  metricsPort: number;
  hostnameOverride: string;
  iptablesSyncPeriod: Duration;
  iptablesMinSyncPeriod: Duration;
  ipvsSyncPeriod: Duration;
  ipvsMinSyncPeriod: Duration;
  clusterCIDRs: string;
  help: boolean;
  version: boolean;
  /** Our --ebpf-* flags (ebpf mode only). */
  ebpfPinPath: string;
  ebpfAttach: string;
  ebpfLbAlgorithm: string;
  ebpfMaglevTableSize: number;
  ebpfSocketLBCgroup: string;
}

export interface FlagTarget {
  cfg: ResolvedConfig;
  opts: CommandOptions;
}

export interface FlagDef {
  readonly name: string;
  readonly short?: string;
  readonly kind: FlagKind;
  /** Type shown in help ("" for booleans), as pflag's UnquoteUsage. */
  readonly typeName: string;
  /** Default shown in help; "" shows none. */
  readonly defValue: string;
  readonly usage: string;
  readonly deprecated?: string;
  readonly scope: 'config' | 'logging' | 'option';
  readonly apply: (t: FlagTarget, v: FlagValue) => void;
}

const IGNORED = ' Ignored when --config names a configuration file.';
const s = (v: FlagValue) => v as string;
const n = (v: FlagValue) => v as number;
const b = (v: FlagValue) => v as boolean;

function def(
  name: string,
  kind: FlagKind,
  typeName: string,
  defValue: string,
  usage: string,
  scope: FlagDef['scope'],
  apply: FlagDef['apply'],
  extra: { short?: string; deprecated?: string } = {},
): FlagDef {
  return { name, kind, typeName, defValue, usage, scope, apply, ...extra };
}

/** The logging.options section of one format, created on first use. */
function routing(t: FlagTarget, format: 'text' | 'json'): { splitStream?: boolean; infoBufferSize?: string } {
  const options = (t.cfg.logging.options ??= {});
  return (options[format] ??= {});
}

export const FLAGS: readonly FlagDef[] = [
  def(
    'config',
    'string',
    'string',
    '',
    'Read the configuration from this KubeProxyConfiguration file (YAML or JSON).',
    'option',
    (t, v) => {
      t.opts.configFile = s(v);
    },
  ),
  def(
    'write-config-to',
    'string',
    'string',
    '',
    'Write the configuration this invocation resolves to (the defaults, a --config file and the given flags) to this file, then exit.',
    'option',
    (t, v) => {
      t.opts.writeConfigTo = s(v);
    },
  ),
  def(
    'cleanup',
    'bool',
    '',
    '',
    'Remove the rules and state that any proxy mode may have left on this node, then exit.',
    'option',
    (t, v) => {
      t.opts.cleanup = b(v);
    },
  ),
  def(
    'feature-gates',
    'mapStringBool',
    'mapStringBool',
    '',
    'Feature gates for alpha and beta features, as comma-separated key=value pairs. The known gates:\n' +
      [...KNOWN_FEATURE_GATES]
        .sort()
        .map((g) => `${g}=true|false`)
        .join('\n') +
      '\n' +
      IGNORED.trim(),
    'config',
    (t, v) => {
      Object.assign(t.cfg.featureGates, v as Record<string, boolean>);
    },
  ),
  def(
    'kubeconfig',
    'string',
    'string',
    '',
    'Path of a kubeconfig file with the API server address and the credentials to use (--master overrides the address).',
    'config',
    (t, v) => {
      t.cfg.clientConnection.kubeconfig = s(v);
    },
  ),
  def(
    'master',
    'string',
    'string',
    '',
    'Address of the Kubernetes API server; overrides the one in the kubeconfig.',
    'option',
    (t, v) => {
      t.opts.master = s(v);
    },
  ),
  def(
    'service-proxy-name',
    'string',
    'string',
    '',
    "kube-proxy-ts only (not upstream): serve only Services labelled service.kubernetes.io/service-proxy-name=<this>, leave everything else and other modes' rules alone. For trials side by side with another proxy on the same node.",
    'option',
    (t, v) => {
      t.opts.serviceProxyName = s(v).trim();
    },
  ),
  def(
    'manifests',
    'string',
    'string',
    '',
    'kube-proxy-ts only (not upstream): standalone mode. Read Services, EndpointSlices, this Node and ServiceCIDRs from the YAML or JSON manifests in this directory (as kubectl apply -f takes them) instead of the API server, and follow changes to it.',
    'option',
    (t, v) => {
      t.opts.manifestsDir = s(v);
    },
  ),
  def(
    'service-traffic-metrics',
    'int32',
    'int32',
    '0',
    'kube-proxy-ts only, nftables and ebpf modes: count new connections and client bytes per Service port in the kernel and export them on the metrics address, for at most this many Service ports per IP family (two series each); the ports past it are not counted and kubeproxy_ts_service_traffic_untracked_service_ports says how many. 0 (default) turns it off.',
    'option',
    (t, v) => {
      t.opts.serviceTrafficMetrics = n(v);
    },
  ),
  def(
    'datapath-canary',
    'bool',
    '',
    'true',
    "kube-proxy-ts only (not upstream): program a canary Service of the proxy's own (ClusterIP 169.254.255.253, which no user's Service can have) pointing at a listener of the proxy on the node's address, connect to it through the datapath every 5 s, and answer 503 on /healthz and on health-check node ports while 3 probes in a row fail, until 2 succeed. In the modes where it is proven (docs/compatibility.md). false turns it off.",
    'option',
    (t, v) => {
      t.opts.datapathCanary = b(v);
    },
  ),
  def(
    'ebpf-pin-path',
    'string',
    'string',
    '/sys/fs/bpf/kube-proxy-ts',
    'kube-proxy-ts only, ebpf mode: where its BPF maps and program attachments are pinned (on a bpf filesystem), so traffic keeps flowing while the proxy restarts and the next proxy takes them over.',
    'option',
    (t, v) => {
      t.opts.ebpfPinPath = s(v);
    },
  ),
  def(
    'ebpf-attach',
    'string',
    'string',
    'auto',
    "kube-proxy-ts only, ebpf mode: how the tc programs attach: 'tcx' (kernel 6.6+), 'tc' (cls_bpf filters on a clsact qdisc) or 'auto' (tcx where the kernel has it).",
    'option',
    (t, v) => {
      t.opts.ebpfAttach = s(v);
    },
  ),
  def(
    'ebpf-lb-algorithm',
    'string',
    'string',
    'random',
    "kube-proxy-ts only, ebpf mode: how a new connection's endpoint is chosen: 'random' or 'maglev' (consistent hashing, the same choice on every node). A Service can choose for itself with the annotation kube-proxy-ts/lb-algorithm.",
    'option',
    (t, v) => {
      t.opts.ebpfLbAlgorithm = s(v);
    },
  ),
  def(
    'ebpf-maglev-table-size',
    'int32',
    'int32',
    '16381',
    'kube-proxy-ts only, ebpf mode: entries of each Maglev table, a prime well above the largest endpoint count (about 100x keeps the spread within 1%); at most 65521.',
    'option',
    (t, v) => {
      t.opts.ebpfMaglevTableSize = n(v);
    },
  ),
  def(
    'ebpf-socket-lb-cgroup',
    'string',
    'string',
    '',
    "kube-proxy-ts only, ebpf mode: balance connections of the node's own processes at the socket (connect, sendmsg, recvmsg, getpeername) for this cgroup v2 directory and below, e.g. the cgroup v2 root. Empty: off.",
    'option',
    (t, v) => {
      t.opts.ebpfSocketLBCgroup = s(v);
    },
  ),
  def(
    'kube-api-content-type',
    'string',
    'string',
    'application/vnd.kubernetes.protobuf',
    'Content type of the requests sent to the API server.',
    'config',
    (t, v) => {
      t.cfg.clientConnection.contentType = s(v);
    },
  ),
  def(
    'kube-api-burst',
    'int32',
    'int32',
    '10',
    'How many requests to the API server may go out at once, above the steady --kube-api-qps rate.',
    'config',
    (t, v) => {
      t.cfg.clientConnection.burst = n(v);
    },
  ),
  def(
    'kube-api-qps',
    'float32',
    'float32',
    '5',
    'Steady rate of requests to the API server, per second.',
    'config',
    (t, v) => {
      t.cfg.clientConnection.qps = n(v);
    },
  ),
  def(
    'hostname-override',
    'string',
    'string',
    '',
    "Name of this node's Node object. When empty, the host name is used.",
    'option',
    (t, v) => {
      t.opts.hostnameOverride = s(v);
    },
  ),
  def(
    'bind-address',
    'ip',
    'ip',
    '0.0.0.0',
    "This node's primary IP, for when it should not come from the Node object. Despite the name, nothing binds to it." +
      IGNORED,
    'config',
    (t, v) => {
      if (s(v) !== '') t.cfg.bindAddress = s(v);
    },
  ),
  def(
    'healthz-bind-address',
    'ipport',
    'ipport',
    '0.0.0.0:10256',
    'Address and port of the health check server (/healthz and /livez).' + IGNORED,
    'config',
    (t, v) => {
      if (s(v) !== '') t.cfg.healthzBindAddress = s(v);
    },
  ),
  def(
    'metrics-bind-address',
    'ipport',
    'ipport',
    '127.0.0.1:10249',
    'Address and port of the metrics server; "0.0.0.0:10249" or "[::]:10249" serve it on every interface, an empty value turns it off.' +
      IGNORED,
    'config',
    (t, v) => {
      if (s(v) !== '') t.cfg.metricsBindAddress = s(v);
    },
  ),
  def(
    'bind-address-hard-fail',
    'bool',
    '',
    '',
    'Exit when the health check or metrics server cannot bind its port, instead of running on without it.',
    'config',
    (t, v) => {
      t.cfg.bindAddressHardFail = b(v);
    },
  ),
  def(
    'profiling',
    'bool',
    '',
    '',
    'Serve CPU and heap profiles under /debug/pprof/ on the metrics address.' + IGNORED,
    'config',
    (t, v) => {
      t.cfg.enableProfiling = b(v);
    },
  ),
  def(
    'show-hidden-metrics-for-version',
    'string',
    'string',
    '',
    "Also show the metrics hidden in this release that were deprecated in this earlier version, given as <major>.<minor> (for example '1.16'); only the previous minor version is accepted." +
      IGNORED,
    'config',
    (t, v) => {
      t.cfg.showHiddenMetricsForVersion = s(v);
    },
  ),
  def(
    'init-only',
    'bool',
    '',
    '',
    'Do the set-up steps that need full root privileges, then exit, so that the proxy itself can run with only CAP_NET_ADMIN.',
    'option',
    (t, v) => {
      t.opts.initOnly = b(v);
    },
  ),
  def(
    'proxy-mode',
    'proxyMode',
    'ProxyMode',
    '',
    "The datapath to program: 'iptables' (the default), 'ipvs', 'nftables', or, in kube-proxy-ts only, 'userspace' or 'ebpf'." +
      IGNORED,
    'config',
    (t, v) => {
      t.cfg.mode = s(v) as ResolvedConfig['mode'];
    },
  ),
  def(
    'iptables-masquerade-bit',
    'int32',
    'int32',
    '14',
    'iptables and ipvs modes: the bit of the packet mark (0 to 31) that flags packets needing SNAT.',
    'config',
    (t, v) => {
      t.cfg.iptables.masqueradeBit = n(v);
    },
  ),
  def(
    'masquerade-all',
    'bool',
    '',
    '',
    'SNAT every packet sent to a Service cluster IP. Some CNI plugins need this. Linux only.',
    'config',
    (t, v) => {
      t.cfg.linux.masqueradeAll = b(v);
    },
  ),
  def(
    'iptables-localhost-nodeports',
    'bool',
    '',
    'true',
    'When false, iptables mode does not serve NodePorts on localhost (IPv4 only; it has no way for IPv6). nftables mode serves TCP NodePorts on 127.0.0.1 and ::1 through a userspace relay instead, when nodePortAddresses includes localhost and the KubeProxyNFTablesLocalhostNodePorts gate is on.',
    'config',
    (t, v) => {
      t.cfg.iptables.localhostNodePorts = b(v);
    },
  ),
  def(
    'iptables-sync-period',
    'duration',
    'duration',
    '30s',
    "How often the rules are synced in full and stale state is cleaned up, as a duration such as '5s', '1m' or '2h22m'. Must be above 0.",
    'config',
    (t, v) => {
      t.opts.iptablesSyncPeriod = n(v);
    },
  ),
  def(
    'iptables-min-sync-period',
    'duration',
    'duration',
    '1s',
    "The shortest time between two iptables rule syncs, as a duration such as '5s', '1m' or '2h22m'. With 0, every Service or EndpointSlice change is synced at once.",
    'config',
    (t, v) => {
      t.opts.iptablesMinSyncPeriod = n(v);
    },
  ),
  def(
    'ipvs-sync-period',
    'duration',
    'duration',
    '30s',
    "How often the rules are synced in full and stale state is cleaned up, as a duration such as '5s', '1m' or '2h22m'. Must be above 0.",
    'config',
    (t, v) => {
      t.opts.ipvsSyncPeriod = n(v);
    },
  ),
  def(
    'ipvs-min-sync-period',
    'duration',
    'duration',
    '1s',
    "The shortest time between two IPVS rule syncs, as a duration such as '5s', '1m' or '2h22m'. With 0, every Service or EndpointSlice change is synced at once.",
    'config',
    (t, v) => {
      t.opts.ipvsMinSyncPeriod = n(v);
    },
  ),
  def(
    'ipvs-scheduler',
    'string',
    'string',
    '',
    'ipvs mode: the IPVS scheduling algorithm of the virtual servers.',
    'config',
    (t, v) => {
      t.cfg.ipvs.scheduler = s(v);
    },
  ),
  def(
    'ipvs-exclude-cidrs',
    'strings',
    'strings',
    '',
    'Comma-separated CIDRs whose IPVS state ipvs mode leaves alone when it cleans up.',
    'config',
    (t, v) => {
      t.cfg.ipvs.excludeCIDRs = v as string[];
    },
  ),
  def('ipvs-strict-arp', 'bool', '', '', 'Turn strict ARP on: arp_ignore=1 and arp_announce=2.', 'config', (t, v) => {
    t.cfg.ipvs.strictARP = b(v);
  }),
  def(
    'ipvs-tcp-timeout',
    'duration',
    'duration',
    '0s',
    "Idle timeout of IPVS TCP connections, as a duration such as '5s', '1m' or '2h22m'; 0 leaves it unchanged.",
    'config',
    (t, v) => {
      t.cfg.ipvs.tcpTimeout = n(v);
    },
  ),
  def(
    'ipvs-tcpfin-timeout',
    'duration',
    'duration',
    '0s',
    "Timeout of IPVS TCP connections once a FIN has been received, as a duration such as '5s', '1m' or '2h22m'; 0 leaves it unchanged.",
    'config',
    (t, v) => {
      t.cfg.ipvs.tcpFinTimeout = n(v);
    },
  ),
  def(
    'ipvs-udp-timeout',
    'duration',
    'duration',
    '0s',
    "Timeout of IPVS UDP packets, as a duration such as '5s', '1m' or '2h22m'; 0 leaves it unchanged.",
    'config',
    (t, v) => {
      t.cfg.ipvs.udpTimeout = n(v);
    },
  ),
  def(
    'detect-local-mode',
    'localMode',
    'LocalMode',
    '',
    'How traffic from local pods is recognised: ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix.' +
      IGNORED,
    'config',
    (t, v) => {
      t.cfg.detectLocalMode = s(v) as ResolvedConfig['detectLocalMode'];
    },
  ),
  def(
    'pod-bridge-interface',
    'string',
    'string',
    '',
    'With --detect-local-mode BridgeInterface: traffic arriving from this bridge comes from local pods.',
    'config',
    (t, v) => {
      t.cfg.detectLocal.bridgeInterface = s(v);
    },
  ),
  def(
    'pod-interface-name-prefix',
    'string',
    'string',
    '',
    'With --detect-local-mode InterfaceNamePrefix: traffic arriving from an interface whose name starts with this prefix comes from local pods.',
    'config',
    (t, v) => {
      t.cfg.detectLocal.interfaceNamePrefix = s(v);
    },
  ),
  def(
    'cluster-cidr',
    'string',
    'string',
    '',
    "The pods' IP range; in a dual-stack cluster one range per family, separated by a comma. With --detect-local-mode ClusterCIDR, traffic from it comes from local pods; other modes do not use it." +
      IGNORED,
    'config',
    (t, v) => {
      t.opts.clusterCIDRs = s(v);
    },
  ),
  def(
    'nodeport-addresses',
    'strings',
    'strings',
    '',
    "Where NodePorts are served: CIDR ranges holding node IPs, or the keywords 'primary' (the node's primary IPs from its Node object), 'localhost' and 'all'. When unset, every local IP serves them (in nftables mode, the primary IPs). In nftables mode, 'localhost' (or a loopback CIDR) turns on the loopback TCP relay of the KubeProxyNFTablesLocalhostNodePorts gate." +
      IGNORED,
    'config',
    (t, v) => {
      t.cfg.nodePortAddresses = v as string[];
    },
  ),
  def(
    'oom-score-adj',
    'int32',
    'int32',
    '-999',
    'The oom_score_adj of the proxy process, from -1000 to 1000.' + IGNORED,
    'config',
    (t, v) => {
      t.cfg.linux.oomScoreAdj = n(v);
    },
  ),
  def(
    'conntrack-max-per-core',
    'int32',
    'int32',
    '32768',
    'How many conntrack entries to allow per CPU core; 0 leaves the limit alone and ignores --conntrack-min.',
    'config',
    (t, v) => {
      t.cfg.linux.conntrack.maxPerCore = n(v);
    },
  ),
  def(
    'conntrack-min',
    'int32',
    'int32',
    '131072',
    'The fewest conntrack entries to allow, whatever --conntrack-max-per-core gives (set that to 0 to leave the limit alone).',
    'config',
    (t, v) => {
      t.cfg.linux.conntrack.min = n(v);
    },
  ),
  def(
    'conntrack-tcp-timeout-established',
    'duration',
    'duration',
    '24h0m0s',
    'Idle timeout of established TCP connections; 0 leaves it unchanged.',
    'config',
    (t, v) => {
      t.cfg.linux.conntrack.tcpEstablishedTimeout = n(v);
    },
  ),
  def(
    'conntrack-tcp-timeout-close-wait',
    'duration',
    'duration',
    '1h0m0s',
    'Conntrack timeout of TCP connections in the CLOSE_WAIT state.',
    'config',
    (t, v) => {
      t.cfg.linux.conntrack.tcpCloseWaitTimeout = n(v);
    },
  ),
  def(
    'conntrack-tcp-be-liberal',
    'bool',
    '',
    '',
    'Track TCP liberally: set nf_conntrack_tcp_be_liberal to 1.',
    'config',
    (t, v) => {
      t.cfg.linux.conntrack.tcpBeLiberal = b(v);
    },
  ),
  def(
    'conntrack-udp-timeout',
    'duration',
    'duration',
    '0s',
    'Idle timeout of UDP flows that have seen no reply (UNREPLIED); 0 leaves it unchanged.',
    'config',
    (t, v) => {
      t.cfg.linux.conntrack.udpTimeout = n(v);
    },
  ),
  def(
    'conntrack-udp-timeout-stream',
    'duration',
    'duration',
    '0s',
    'Idle timeout of UDP flows that have seen replies (ASSURED); 0 leaves it unchanged.',
    'config',
    (t, v) => {
      t.cfg.linux.conntrack.udpStreamTimeout = n(v);
    },
  ),
  def(
    'config-sync-period',
    'duration',
    'duration',
    '15m0s',
    'How often everything read from the API server is handed to the proxy again. Must be above 0.',
    'config',
    (t, v) => {
      t.cfg.configSyncPeriod = n(v);
    },
  ),
  def(
    'healthz-port',
    'int32',
    'int32',
    '10256',
    'Port of the health check server; 0 turns it off.',
    'config',
    (t, v) => {
      t.opts.healthzPort = n(v);
    },
    {
      deprecated: 'use --healthz-bind-address instead; this flag will be removed.',
    },
  ),
  def(
    'metrics-port',
    'int32',
    'int32',
    '10249',
    'Port of the metrics server; 0 turns it off.',
    'config',
    (t, v) => {
      t.opts.metricsPort = n(v);
    },
    {
      deprecated: 'use --metrics-bind-address instead; this flag will be removed.',
    },
  ),
  // component-base logging flags
  def(
    'log-flush-frequency',
    'duration',
    'duration',
    '5s',
    'The longest time between two flushes of the log.',
    'logging',
    (t, v) => {
      t.cfg.logging.flushFrequency = durationText(n(v));
    },
  ),
  def('logging-format', 'string', 'string', 'text', 'Log format: "json" or "text".', 'logging', (t, v) => {
    t.cfg.logging.format = s(v);
  }),
  def(
    'v',
    'level',
    'Level',
    '',
    'Log verbosity: the higher, the more is logged.',
    'logging',
    (t, v) => {
      t.cfg.logging.verbosity = n(v);
    },
    { short: 'v' },
  ),
  def(
    'vmodule',
    'moduleSpec',
    'pattern=N,...',
    '',
    'Verbosity per source file, as comma-separated pattern=N settings (text log format only).',
    'logging',
    (t, v) => {
      t.cfg.logging.vmodule = [...(t.cfg.logging.vmodule ?? []), ...(v as VModuleItem[])];
    },
  ),
  ...(['text', 'json'] as const).flatMap((format) => [
    def(
      `log-${format}-split-stream`,
      'bool',
      '',
      '',
      `[Alpha] With --logging-format=${format}, send info lines to stdout and ${format === 'text' ? 'warnings and errors' : 'errors'} to stderr (by default everything goes to stderr). Needs the LoggingAlphaOptions feature gate.`,
      'logging',
      (t, v) => {
        routing(t, format).splitStream = b(v);
      },
    ),
    def(
      `log-${format}-info-buffer-size`,
      'quantity',
      'quantity',
      '0',
      `[Alpha] With --log-${format}-split-stream, hold up to this many bytes of info lines before writing them (0, the default, writes each line at once). A number of bytes (512), or with a suffix: k, M, G (powers of 1000) or Ki, Mi, Gi (powers of 1024). Needs the LoggingAlphaOptions feature gate.`,
      'logging',
      (t, v) => {
        routing(t, format).infoBufferSize = s(v);
      },
    ),
  ]),
  // help and version (cobra / component-base verflag)
  def(
    'help',
    'bool',
    '',
    '',
    'Show this help.',
    'option',
    (t, v) => {
      t.opts.help = b(v);
    },
    { short: 'h' },
  ),
  def('version', 'version', 'version[=true]', '', 'Print the version and exit.', 'option', (t, v) => {
    t.opts.version = b(v);
  }),
];

export const FLAGS_BY_NAME: ReadonlyMap<string, FlagDef> = new Map(FLAGS.map((f) => [f.name, f]));
export const FLAGS_BY_SHORT: ReadonlyMap<string, FlagDef> = new Map(
  FLAGS.filter((f) => f.short !== undefined).map((f) => [f.short!, f]),
);

/** Flags that take no separate value argument (pflag NoOptDefVal). */
export function isNoValueFlag(f: FlagDef): boolean {
  return f.kind === 'bool' || f.kind === 'version';
}

/** pflag-style usage text: one line per flag, sorted by name, defaults shown. */
export function formatFlagUsages(): string {
  const rows = [...FLAGS]
    .sort((a, b2) => a.name.localeCompare(b2.name))
    .map((f) => {
      const left = `${f.short ? `  -${f.short}, ` : '      '}--${f.name}${f.typeName ? ` ${f.typeName}` : ''}`;
      let usage = f.usage;
      // pflag omits zero defaults ("", "0", "0s", "false").
      if (!['', '0', '0s', 'false'].includes(f.defValue)) {
        usage += f.kind === 'string' ? ` (default "${f.defValue}")` : ` (default ${f.defValue})`;
      }
      if (f.deprecated) usage += ` (DEPRECATED: ${f.deprecated})`;
      return { left, usage };
    });
  const width = Math.max(...rows.map((r) => r.left.length)) + 3;
  // Continuation lines of multi-line usages line up under the first, as pflag.
  return rows.map((r) => r.left.padEnd(width) + r.usage.replaceAll('\n', `\n${' '.repeat(width)}`)).join('\n') + '\n';
}
