// The kube-proxy command-line flags: names, types, defaults and help text as
// upstream cmd/kube-proxy/app/options.go (AddFlags) plus the logging flags of
// component-base logs/api/v1. Each flag knows how to apply its parsed value to
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

const IGNORED = ' This parameter is ignored if a config file is specified by --config.';
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

export const FLAGS: readonly FlagDef[] = [
  def('config', 'string', 'string', '', 'The path to the configuration file.', 'option', (t, v) => {
    t.opts.configFile = s(v);
  }),
  def(
    'write-config-to',
    'string',
    'string',
    '',
    'If set, write the default configuration values to this file and exit.',
    'option',
    (t, v) => {
      t.opts.writeConfigTo = s(v);
    },
  ),
  def('cleanup', 'bool', '', '', 'If true cleanup iptables and ipvs rules and exit.', 'option', (t, v) => {
    t.opts.cleanup = b(v);
  }),
  def(
    'feature-gates',
    'mapStringBool',
    'mapStringBool',
    '',
    'A set of key=value pairs that describe feature gates for alpha/experimental features. Options are:\n' +
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
    'Path to kubeconfig file with authorization information (the master location can be overridden by the master flag).',
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
    'The address of the Kubernetes API server (overrides any value in kubeconfig)',
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
    'Content type of requests sent to apiserver.',
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
    'Burst to use while talking with kubernetes apiserver',
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
    'QPS to use while talking with kubernetes apiserver',
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
    "If non-empty, will be used as the name of the Node that kube-proxy is running on. If unset, the node name is assumed to be the same as the node's hostname.",
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
    "Overrides kube-proxy's idea of what its node's primary IP is. Note that the name is a historical artifact, and kube-proxy does not actually bind any sockets to this IP." +
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
    'The IP address and port for the health check server to serve on, defaulting to "0.0.0.0:10256".' + IGNORED,
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
    'The IP address and port for the metrics server to serve on, defaulting to "127.0.0.1:10249". (Set to "0.0.0.0:10249" / "[::]:10249" to bind on all interfaces.) Set empty to disable.' +
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
    'If true kube-proxy will treat failure to bind to a port as fatal and exit',
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
    'If true enables profiling via web interface on /debug/pprof handler.' + IGNORED,
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
    "The previous version for which you want to show hidden metrics. Only the previous minor version is meaningful, other values will not be allowed. The format is <major>.<minor>, e.g.: '1.16'." +
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
    'If true, perform any initialization steps that must be done with full root privileges, and then exit. After doing this, you can run kube-proxy again with only the CAP_NET_ADMIN capability.',
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
    "Which proxy mode to use: 'iptables' (default), 'ipvs', 'nftables', or (kube-proxy-ts only) 'userspace' or 'ebpf'." +
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
    'If using the iptables or ipvs proxy mode, the bit of the fwmark space to mark packets requiring SNAT with.  Must be within the range [0, 31].',
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
    'SNAT all traffic sent via Service cluster IPs. This may be required with some CNI plugins. Only supported on Linux.',
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
    'If false, kube-proxy will disable the legacy behavior of allowing NodePort services to be accessed via localhost. (Applies only to iptables mode and IPv4; localhost NodePorts are never allowed with other proxy modes or with IPv6.)',
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
    "An interval (e.g. '5s', '1m', '2h22m') indicating how frequently various re-synchronizing and cleanup operations are performed. Must be greater than 0.",
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
    "The minimum period between iptables rule resyncs (e.g. '5s', '1m', '2h22m'). A value of 0 means every Service or EndpointSlice change will result in an immediate iptables resync.",
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
    "An interval (e.g. '5s', '1m', '2h22m') indicating how frequently various re-synchronizing and cleanup operations are performed. Must be greater than 0.",
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
    "The minimum period between IPVS rule resyncs (e.g. '5s', '1m', '2h22m'). A value of 0 means every Service or EndpointSlice change will result in an immediate IPVS resync.",
    'config',
    (t, v) => {
      t.opts.ipvsMinSyncPeriod = n(v);
    },
  ),
  def('ipvs-scheduler', 'string', 'string', '', 'The ipvs scheduler type when proxy mode is ipvs', 'config', (t, v) => {
    t.cfg.ipvs.scheduler = s(v);
  }),
  def(
    'ipvs-exclude-cidrs',
    'strings',
    'strings',
    '',
    'A comma-separated list of CIDRs which the ipvs proxier should not touch when cleaning up IPVS rules.',
    'config',
    (t, v) => {
      t.cfg.ipvs.excludeCIDRs = v as string[];
    },
  ),
  def(
    'ipvs-strict-arp',
    'bool',
    '',
    '',
    'Enable strict ARP by setting arp_ignore to 1 and arp_announce to 2',
    'config',
    (t, v) => {
      t.cfg.ipvs.strictARP = b(v);
    },
  ),
  def(
    'ipvs-tcp-timeout',
    'duration',
    'duration',
    '0s',
    "The timeout for idle IPVS TCP connections, 0 to leave as-is. (e.g. '5s', '1m', '2h22m').",
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
    "The timeout for IPVS TCP connections after receiving a FIN packet, 0 to leave as-is. (e.g. '5s', '1m', '2h22m').",
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
    "The timeout for IPVS UDP packets, 0 to leave as-is. (e.g. '5s', '1m', '2h22m').",
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
    'Mode to use to detect local traffic.' + IGNORED,
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
    'A bridge interface name. When --detect-local-mode is set to BridgeInterface, kube-proxy will consider traffic to be local if it originates from this bridge.',
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
    'An interface name prefix. When --detect-local-mode is set to InterfaceNamePrefix, kube-proxy will consider traffic to be local if it originates from any interface whose name begins with this prefix.',
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
    'The CIDR range of the pods in the cluster. (For dual-stack clusters, this can be a comma-separated dual-stack pair of CIDR ranges.). When --detect-local-mode is set to ClusterCIDR, kube-proxy will consider traffic to be local if its source IP is in this range. (Otherwise it is not used.)' +
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
    "A list of CIDR ranges that contain valid node IPs, or alternatively, the keywords 'primary' (the node's primary IPs according to the Node object), 'localhost' or 'all'. If set, connections to NodePort services will only be accepted on node IPs in one of the indicated ranges. If unset, NodePort connections will be accepted on all local IPs (nftables mode: the primary IPs)." +
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
    'The oom-score-adj value for kube-proxy process. Values must be within the range [-1000, 1000].' + IGNORED,
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
    'Maximum number of NAT connections to track per CPU core (0 to leave the limit as-is and ignore conntrack-min).',
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
    'Minimum number of conntrack entries to allocate, regardless of conntrack-max-per-core (set conntrack-max-per-core=0 to leave the limit as-is).',
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
    'Idle timeout for established TCP connections (0 to leave as-is)',
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
    'NAT timeout for TCP connections in the CLOSE_WAIT state',
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
    'Enable liberal mode for tracking TCP packets by setting nf_conntrack_tcp_be_liberal to 1',
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
    'Idle timeout for UNREPLIED UDP connections (0 to leave as-is)',
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
    'Idle timeout for ASSURED UDP connections (0 to leave as-is)',
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
    'How often configuration from the apiserver is refreshed.  Must be greater than 0.',
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
    'The port to bind the health check server. Use 0 to disable.',
    'config',
    (t, v) => {
      t.opts.healthzPort = n(v);
    },
    {
      deprecated:
        'This flag is deprecated and will be removed in a future release. Please use --healthz-bind-address instead.',
    },
  ),
  def(
    'metrics-port',
    'int32',
    'int32',
    '10249',
    'The port to bind the metrics server. Use 0 to disable.',
    'config',
    (t, v) => {
      t.opts.metricsPort = n(v);
    },
    {
      deprecated:
        'This flag is deprecated and will be removed in a future release. Please use --metrics-bind-address instead.',
    },
  ),
  // component-base logging flags
  def(
    'log-flush-frequency',
    'duration',
    'duration',
    '5s',
    'Maximum number of seconds between log flushes',
    'logging',
    (t, v) => {
      t.cfg.logging.flushFrequency = durationText(n(v));
    },
  ),
  def(
    'logging-format',
    'string',
    'string',
    'text',
    'Sets the log format. Permitted formats: "json", "text".',
    'logging',
    (t, v) => {
      t.cfg.logging.format = s(v);
    },
  ),
  def(
    'v',
    'level',
    'Level',
    '',
    'number for the log level verbosity',
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
    'comma-separated list of pattern=N settings for file-filtered logging (only works for text log format)',
    'logging',
    (t, v) => {
      t.cfg.logging.vmodule = [...(t.cfg.logging.vmodule ?? []), ...(v as VModuleItem[])];
    },
  ),
  // help and version (cobra / component-base verflag)
  def(
    'help',
    'bool',
    '',
    '',
    'help for kube-proxy',
    'option',
    (t, v) => {
      t.opts.help = b(v);
    },
    { short: 'h' },
  ),
  def('version', 'version', 'version[=true]', '', 'Print version information and quit', 'option', (t, v) => {
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
