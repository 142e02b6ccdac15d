// The kube-proxy command-line flags as data: names, types and meaning as
// upstream's cmd/kube-proxy/app/options.go (AddFlags) plus the logging flags
// of component-base logs/api/v1. The help texts are our own words.
//
// A flag names the field its value goes to (`to`), in the flag-built
// configuration (`cfg`, upstream's o.config) or in the options that are not
// configuration fields (`opts`). There is no default here: a flag's default is
// what its field holds before any flag is applied, which for `cfg` comes from
// core/config/defaults.ts, so the help text cannot drift from the real value
// (flags.ts turns these records into FLAGS). The datapath's flags are in
// datapathflags.ts.
//
// scope: 'config'  - maps to a config field; ignored when --config is given.
//        'logging' - logging flags; override the config file (copyLogsFromFlags).
//        'option'  - not config (--config, --cleanup, --master, --hostname-override ...).

import type { Duration } from '../core/config/duration.js';
import { KNOWN_FEATURE_GATES } from '../core/config/features.js';
import type { ResolvedConfig } from '../core/config/types.js';

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
  datapathCanaryInterval: Duration;
  handoverDrainPeriod: Duration;
  earlySyncAfter: Duration;
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
  ebpfXdp: string;
  ebpfLbMode: string;
}

export interface FlagTarget {
  cfg: ResolvedConfig;
  opts: CommandOptions;
}

/** Every dotted path into T's nested objects (not into arrays), so a misspelt `to` fails to compile. */
type DotPaths<T> = T extends readonly unknown[]
  ? never
  : T extends object
    ? { [K in keyof T & string]-?: K | `${K}.${DotPaths<NonNullable<T[K]>>}` }[keyof T & string]
    : never;

export type FlagPath = `cfg.${DotPaths<ResolvedConfig>}` | `opts.${DotPaths<CommandOptions>}`;

export interface FlagSpec {
  readonly name: string;
  readonly short?: string;
  readonly kind: FlagKind;
  readonly usage: string;
  readonly scope: 'config' | 'logging' | 'option';
  /** The field the parsed value is written to; what it holds before any flag is the default. */
  readonly to: FlagPath;
  /**
   * The field keeps the value in another form than the flag parses it to:
   * 'trimmed' text, or a duration written as Go text ('goDuration').
   */
  readonly stored?: 'trimmed' | 'goDuration';
  readonly deprecated?: string;
}

/** The note that ends the help of the config flags most likely to be given together with --config. */
export const IGNORED = ' Ignored when --config names a configuration file.';

/** Where to find the configuration and the API server, our own flags, and the client connection. */
export const COMMAND_FLAGS: readonly FlagSpec[] = [
  {
    name: 'config',
    kind: 'string',
    scope: 'option',
    to: 'opts.configFile',
    usage: 'Read the configuration from this KubeProxyConfiguration file (YAML or JSON).',
  },
  {
    name: 'write-config-to',
    kind: 'string',
    scope: 'option',
    to: 'opts.writeConfigTo',
    usage:
      'Write the configuration this invocation resolves to (the defaults, a --config file and the given flags) to this file, then exit.',
  },
  {
    name: 'cleanup',
    kind: 'bool',
    scope: 'option',
    to: 'opts.cleanup',
    usage: 'Remove the rules and state that any proxy mode may have left on this node, then exit.',
  },
  {
    name: 'feature-gates',
    kind: 'mapStringBool',
    scope: 'config',
    to: 'cfg.featureGates',
    usage:
      'Feature gates for alpha and beta features, as comma-separated key=value pairs. The known gates:\n' +
      [...KNOWN_FEATURE_GATES]
        .sort()
        .map((g) => `${g}=true|false`)
        .join('\n') +
      '\n' +
      IGNORED.trim(),
  },
  {
    name: 'kubeconfig',
    kind: 'string',
    scope: 'config',
    to: 'cfg.clientConnection.kubeconfig',
    usage:
      'Path of a kubeconfig file with the API server address and the credentials to use (--master overrides the address).',
  },
  {
    name: 'master',
    kind: 'string',
    scope: 'option',
    to: 'opts.master',
    usage: 'Address of the Kubernetes API server; overrides the one in the kubeconfig.',
  },
  {
    name: 'service-proxy-name',
    kind: 'string',
    scope: 'option',
    to: 'opts.serviceProxyName',
    stored: 'trimmed',
    usage:
      "kube-proxy-ts only (not upstream): serve only Services labelled service.kubernetes.io/service-proxy-name=<this>, leave everything else and other modes' rules alone. For trials side by side with another proxy on the same node.",
  },
  {
    name: 'manifests',
    kind: 'string',
    scope: 'option',
    to: 'opts.manifestsDir',
    usage:
      'kube-proxy-ts only (not upstream): standalone mode. Read Services, EndpointSlices, this Node and ServiceCIDRs from the YAML or JSON manifests in this directory (as kubectl apply -f takes them) instead of the API server, and follow changes to it.',
  },
  {
    name: 'service-traffic-metrics',
    kind: 'int32',
    scope: 'option',
    to: 'opts.serviceTrafficMetrics',
    usage:
      'kube-proxy-ts only, nftables and ebpf modes: count new connections and client bytes per Service port in the kernel and export them on the metrics address, for at most this many Service ports per IP family (two series each); the ports past it are not counted and kubeproxy_ts_service_traffic_untracked_service_ports says how many. 0 (default) turns it off.',
  },
  {
    name: 'datapath-canary',
    kind: 'bool',
    scope: 'option',
    to: 'opts.datapathCanary',
    usage:
      "kube-proxy-ts only (not upstream): program a canary Service of the proxy's own per IP family (ClusterIP 169.254.255.253, and 100::a9fe:fffd for IPv6, which no user's Service can have) pointing at a listener of the proxy on the node's address of that family, connect to it through the datapath every --datapath-canary-interval, and answer 503 on /healthz and on health-check node ports while 3 probes in a row fail, until 2 succeed. In the modes where it is proven (docs/compatibility.md). false turns it off.",
  },
  {
    name: 'datapath-canary-interval',
    kind: 'duration',
    scope: 'option',
    to: 'opts.datapathCanaryInterval',
    usage:
      'kube-proxy-ts only: how often the datapath canary connects through the datapath (at least 1s; each probe waits up to 1 s for its answer). With the 3 failed probes it takes to turn unhealthy and the 2 good ones to turn back, this sets how soon a broken datapath drains the node from load balancers: about 3 intervals, and 2 to return.',
  },
  {
    name: 'early-sync-after',
    kind: 'duration',
    scope: 'option',
    to: 'opts.earlySyncAfter',
    usage:
      'kube-proxy-ts only, nftables and ebpf modes: on a node whose datapath holds nothing of an earlier run, program the Services seen so far once the first lists of Services and EndpointSlices have been coming in this long, rather than waiting for the last of them (in a large cluster the lists take seconds). A Service waits for its first EndpointSlice; /healthz turns healthy only after the first sync with every Service in it. 0 turns it off.',
  },
  {
    name: 'handover-drain-period',
    kind: 'duration',
    scope: 'option',
    to: 'opts.handoverDrainPeriod',
    usage:
      "kube-proxy-ts only: when the proxy starts in another mode than the node's rules were written by, it programs its own first and removes the previous mode's only after its first complete sync. A previous ebpf or ipvs mode translates its established connections itself, so its state stays this long (taking no new connections) before it goes; 0 removes it at once.",
  },
  {
    name: 'ebpf-pin-path',
    kind: 'string',
    scope: 'option',
    to: 'opts.ebpfPinPath',
    usage:
      'kube-proxy-ts only, ebpf mode: where its BPF maps and program attachments are pinned (on a bpf filesystem), so traffic keeps flowing while the proxy restarts and the next proxy takes them over.',
  },
  {
    name: 'ebpf-attach',
    kind: 'string',
    scope: 'option',
    to: 'opts.ebpfAttach',
    usage:
      "kube-proxy-ts only, ebpf mode: how the tc programs attach: 'tcx' (kernel 6.6+), 'tc' (cls_bpf filters on a clsact qdisc) or 'auto' (tcx where the kernel has it).",
  },
  {
    name: 'ebpf-lb-algorithm',
    kind: 'string',
    scope: 'option',
    to: 'opts.ebpfLbAlgorithm',
    usage:
      "kube-proxy-ts only, ebpf mode: how a new connection's endpoint is chosen: 'random', 'round-robin' (each node cycles through the endpoints), 'maglev' (consistent hashing of the client address and port, the same choice on every node) or 'source-hash' (the client address alone decides, the same choice on every node). A Service (in nftables mode too) can choose for itself with the annotation kube-proxy-ts/lb-algorithm.",
  },
  {
    name: 'ebpf-lb-mode',
    kind: 'string',
    scope: 'option',
    to: 'opts.ebpfLbMode',
    usage:
      "kube-proxy-ts only, ebpf mode: how NodePort, externalIP and load-balancer connections with externalTrafficPolicy Cluster reach an endpoint on another node: 'snat' (the default: masqueraded, the replies come back through this node) or 'dsr' (DNATed only: the endpoint sees the client's address and its node answers the client directly). Set the same on every node: in dsr mode the endpoint's node must read the IP option the entering node adds.",
  },
  {
    name: 'ebpf-maglev-table-size',
    kind: 'int32',
    scope: 'option',
    to: 'opts.ebpfMaglevTableSize',
    usage:
      'kube-proxy-ts only, ebpf mode: entries of each Maglev table, a prime well above the largest endpoint count (about 100x keeps the spread within 1%); at most 65521.',
  },
  {
    name: 'ebpf-socket-lb-cgroup',
    kind: 'string',
    scope: 'option',
    to: 'opts.ebpfSocketLBCgroup',
    usage:
      "kube-proxy-ts only, ebpf mode: balance connections at the socket (connect, sendmsg, recvmsg, getpeername) for every process in this cgroup v2 directory and below, the node's and pods', e.g. the host's cgroup v2 root as the DaemonSet's ebpf patch mounts it (on a hybrid cgroup host, its unified subdirectory is used). Empty (the default): off; the tc programs balance every connection.",
  },
  {
    name: 'ebpf-xdp',
    kind: 'string',
    scope: 'option',
    to: 'opts.ebpfXdp',
    usage:
      "kube-proxy-ts only, ebpf mode: an XDP program on the node's uplinks (the interfaces holding the node's IPs) takes NodePort, externalIP and load-balancer traffic from outside before the tc programs do: 'native' (in the network driver), 'generic' (the kernel's XDP on socket buffers, any driver), 'auto' (native where the driver has it, else generic) or 'off' (the default). An interface that already runs another XDP program keeps it.",
  },
  {
    name: 'kube-api-content-type',
    kind: 'string',
    scope: 'config',
    to: 'cfg.clientConnection.contentType',
    usage: 'Content type of the requests sent to the API server.',
  },
  {
    name: 'kube-api-burst',
    kind: 'int32',
    scope: 'config',
    to: 'cfg.clientConnection.burst',
    usage: 'How many requests to the API server may go out at once, above the steady --kube-api-qps rate.',
  },
  {
    name: 'kube-api-qps',
    kind: 'float32',
    scope: 'config',
    to: 'cfg.clientConnection.qps',
    usage: 'Steady rate of requests to the API server, per second.',
  },
  {
    name: 'hostname-override',
    kind: 'string',
    scope: 'option',
    to: 'opts.hostnameOverride',
    usage: "Name of this node's Node object. When empty, the host name is used.",
  },
];

/** component-base logging flags. */
export const LOGGING_FLAGS: readonly FlagSpec[] = [
  {
    name: 'log-flush-frequency',
    kind: 'duration',
    scope: 'logging',
    to: 'cfg.logging.flushFrequency',
    stored: 'goDuration',
    usage: 'The longest time between two flushes of the log.',
  },
  {
    name: 'logging-format',
    kind: 'string',
    scope: 'logging',
    to: 'cfg.logging.format',
    usage: 'Log format: "json" or "text".',
  },
  {
    name: 'v',
    short: 'v',
    kind: 'level',
    scope: 'logging',
    to: 'cfg.logging.verbosity',
    usage: 'Log verbosity: the higher, the more is logged.',
  },
  {
    name: 'vmodule',
    kind: 'moduleSpec',
    scope: 'logging',
    to: 'cfg.logging.vmodule',
    usage: 'Verbosity per source file, as comma-separated pattern=N settings (text log format only).',
  },
  ...(['text', 'json'] as const).flatMap((format): FlagSpec[] => [
    {
      name: `log-${format}-split-stream`,
      kind: 'bool',
      scope: 'logging',
      to: `cfg.logging.options.${format}.splitStream`,
      usage: `[Alpha] With --logging-format=${format}, send info lines to stdout and ${format === 'text' ? 'warnings and errors' : 'errors'} to stderr (by default everything goes to stderr). Needs the LoggingAlphaOptions feature gate.`,
    },
    {
      name: `log-${format}-info-buffer-size`,
      kind: 'quantity',
      scope: 'logging',
      to: `cfg.logging.options.${format}.infoBufferSize`,
      usage: `[Alpha] With --log-${format}-split-stream, hold up to this many bytes of info lines before writing them (0, the default, writes each line at once). A number of bytes (512), or with a suffix: k, M, G (powers of 1000) or Ki, Mi, Gi (powers of 1024). Needs the LoggingAlphaOptions feature gate.`,
    },
  ]),
];

/** help and version (cobra / component-base verflag). */
export const HELP_FLAGS: readonly FlagSpec[] = [
  { name: 'help', short: 'h', kind: 'bool', scope: 'option', to: 'opts.help', usage: 'Show this help.' },
  { name: 'version', kind: 'version', scope: 'option', to: 'opts.version', usage: 'Print the version and exit.' },
];
