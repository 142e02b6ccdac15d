// kube-proxy's command line and configuration file, drop-in compatible with
// upstream cmd/kube-proxy/app/options.go.
//
// PUBLIC API (for src/cmd/main.ts)
//
//   parseCommandLine(argv, deps, version?): Promise<ParsedCommand>
//     argv    - process.argv.slice(2)
//     deps    - { readFile(path): Promise<string> } (used for --config only)
//     version - package.json version, for --version ("kube-proxy-ts v<version>")
//   Returns { kind: 'help' | 'version', text } (print text, exit 0) or
//   { kind: 'run', mode, config, resolved, timing, actions, warnings, configFile?, master? }.
//   Throws ProxyError: KPT_FLAG_INVALID (unknown flag, unparsable value, empty
//   --hostname-override, positional args), KPT_CONFIG_FILE (unreadable or
//   undecodable --config file), KPT_CONFIG_INVALID (ConfigValidationError, one
//   "field: Invalid value: v: why" per problem). Exit non-zero on any of them.
//
//   encodeConfigYAML(config) (re-exported) - the text --write-config-to writes.
//   resolveDataplaneConfig(resolved, family, localIPs, nodeIP, podCIDRs?) in
//   src/core/config/nodeport.ts - per-family DataplaneConfig for a datapath.
//
// PRECEDENCE (upstream Options.Complete):
// * Without --config, flags set the configuration on top of the v1alpha1
//   defaults. --iptables-[min-]sync-period apply when --proxy-mode is not ipvs
//   (iptables, nftables, userspace, ""), --ipvs-[min-]sync-period only when it
//   is ipvs; the other pair is ignored. As upstream, the unselected pair's
//   defaults are the iptables ones (so ipvs' minSyncPeriod defaults to 1s when
//   chosen by flag). The deprecated --healthz-port/--metrics-port then fill in
//   a missing port (0 disables the server) unless --write-config-to is given.
// * With --config, every flag that maps to a config field is ignored (a
//   warning lists them), EXCEPT the logging flags (-v, --vmodule,
//   --logging-format, --log-flush-frequency), which override the file
//   (--vmodule entries go before the file's), and --hostname-override.
// * Always honoured: --config, --write-config-to, --cleanup, --init-only,
//   --master, --hostname-override (trimmed, lower-cased; empty after trimming
//   is an error), --help, --version.
// * Then mode "" becomes iptables, nftables without nodePortAddresses gets
//   ["primary"], detectLocalMode "" becomes ClusterCIDR, and the result is
//   validated.

import { decodeConfigFile } from '../core/config/decode.js';
import { platformApplyDefaults, resolvedToV1Alpha1, timingOf, v1alpha1ToResolved } from '../core/config/convert.js';
import { ConfigValidationError } from '../core/config/field.js';
import { appendPortIfNeeded } from '../core/config/hostport.js';
import type { KubeProxyConfigurationV1Alpha1, ResolvedConfig, ResolvedTiming } from '../core/config/types.js';
import { MILLISECOND } from '../core/config/duration.js';
import { validateConfig } from '../core/config/validate.js';
import { ProxyError } from '../core/errors.js';
import type { ProxyMode } from '../core/types.js';
import { isLbAlgorithm, LB_ALGORITHMS } from '../core/lbalgorithm.js';
import { isMaglevSize } from '../dataplane/ebpf/hash.js';
import { type EbpfOptions, LB_MODES, XDP_MODES } from '../dataplane/ebpf/options.js';
import { splitArgs } from './argv.js';
import { parseFlagValues, type ParsedFlags } from './flagparse.js';
import {
  defaultOptions,
  FLAGS,
  formatFlagUsages,
  initialFlagTarget,
  type CommandOptions,
  type FlagTarget,
} from './flags.js';
import { flagzValues } from './flagz.js';

export { encodeConfigYAML } from '../core/config/encode.js';

export interface CommandDeps {
  readFile(path: string): Promise<string>;
}

export interface RunCommand {
  readonly kind: 'run';
  /** resolved.mode, never "" (platform default applied). */
  readonly mode: ProxyMode;
  /**
   * Neither --proxy-mode nor the config file's `mode` chose a mode, so the
   * platform default (iptables) was taken: upstream warns from 1.37 on
   * (KEP-5343), because that default becomes nftables.
   */
  readonly modeDefaulted: boolean;
  /** The effective configuration as v1alpha1 (what --write-config-to writes). */
  readonly config: KubeProxyConfigurationV1Alpha1;
  /** The effective configuration as upstream's internal type. */
  readonly resolved: ResolvedConfig;
  /** resolved's periods in milliseconds, for the injected Clock. */
  readonly timing: ResolvedTiming;
  readonly actions: { readonly cleanup: boolean; readonly initOnly: boolean; readonly writeConfigTo?: string };
  /** To be logged: lenient decoding, deprecated flags, ignored flags, unknown gates. */
  readonly warnings: string[];
  readonly configFile?: string;
  readonly master?: string;
  /** Our --service-proxy-name: serve only Services claimed with this name (side-by-side trials). */
  readonly serviceProxyName?: string;
  /** Our --manifests: standalone mode, objects from this folder instead of the API server. */
  readonly manifestsDir?: string;
  /** Our --service-traffic-metrics N: per-Service traffic counters for up to N Service ports (0 = off). */
  readonly serviceTrafficMetrics: number;
  /** Our --datapath-canary: probe the datapath through a canary Service of our own (src/core/canary.ts). */
  readonly datapathCanary: boolean;
  /** Our --datapath-canary-interval, in ms. */
  readonly datapathCanaryMs: number;
  /** Our --early-sync-after, in ms (0: off): see src/engine/earlystart.ts. */
  readonly earlySyncMs: number;
  /** Our --handover-drain-period, in ms: how long a previous ebpf or ipvs mode's state drains (src/cmd/handover.ts). */
  readonly handoverDrainMs: number;
  /** Our --ebpf-* flags, checked (used by the ebpf mode). */
  readonly ebpf: EbpfFlags;
  /** Every flag with its value in this process (/flagz). */
  readonly flagz: Readonly<Record<string, string>>;
  /** This program's version (package.json), as --version prints it without the "v". */
  readonly version: string;
}

export interface TextCommand {
  readonly kind: 'help' | 'version';
  /** Print to stdout and exit 0. */
  readonly text: string;
}

export type ParsedCommand = TextCommand | RunCommand;

export const HELP_HEADER = `kube-proxy-ts is the Kubernetes network proxy, rebuilt in TypeScript. One runs on
every node. It watches the API server for Services, EndpointSlices and its own Node,
and programs the node so that a connection to a Service's cluster IP, NodePort,
external IP or load-balancer IP reaches one of the Service's ready endpoints: through
iptables, nftables, IPVS or eBPF rules in the kernel, or through its own relay
(userspace mode). It takes upstream kube-proxy's flags and configuration file.

Usage:
  kube-proxy-ts [flags]
  kube-proxy-ts explain | diff | migrate | status [flags]   (each has its own --help)

Flags:
`;

export function helpText(): string {
  return HELP_HEADER + formatFlagUsages();
}

/** Upstream addressFromDeprecatedFlags: port 0 disables, otherwise fill in a missing port. */
function addressFromDeprecatedFlags(addr: string, port: number): string {
  return port === 0 ? '' : appendPortIfNeeded(addr, port);
}

export async function parseCommandLine(
  argv: readonly string[],
  deps: CommandDeps,
  version = '0.0.0',
): Promise<ParsedCommand> {
  const split = splitArgs(argv);
  const flags = parseFlagValues(split.occurrences);
  // The same start as the help's defaults (newKubeProxyConfiguration and the options' own).
  const target = initialFlagTarget();
  for (const f of FLAGS) {
    const v = flags.values.get(f.name);
    if (v !== undefined) f.apply(target, v);
  }
  const { opts } = target;
  if (opts.help) return { kind: 'help', text: helpText() };
  if (opts.version) return { kind: 'version', text: `kube-proxy-ts v${version}` };
  if (split.positional.some((a) => a.length > 0)) {
    throw new ProxyError(
      'KPT_FLAG_INVALID',
      `"kube-proxy" does not take any arguments, got ${JSON.stringify(split.positional)}`,
    );
  }
  const warnings = [...flags.warnings];
  let cfg = target.cfg;
  if (opts.configFile === '' && opts.writeConfigTo === '') {
    cfg.healthzBindAddress = addressFromDeprecatedFlags(cfg.healthzBindAddress, opts.healthzPort);
    cfg.metricsBindAddress = addressFromDeprecatedFlags(cfg.metricsBindAddress, opts.metricsPort);
  }
  if (opts.configFile !== '') {
    cfg = await loadConfigFile(opts.configFile, deps, warnings);
    copyLoggingFlags(flags, cfg);
    const ignored = FLAGS.filter((f) => f.scope === 'config' && flags.values.has(f.name)).map((f) => `--${f.name}`);
    if (ignored.length > 0) warnings.push(`flags ignored because --config is given: ${ignored.join(' ')}`);
  } else {
    processV1Alpha1Flags(flags, opts, cfg);
  }
  // Read before platformApplyDefaults fills it in: an explicit --proxy-mode="" counts as unset, as upstream.
  const modeDefaulted = cfg.mode === '';
  platformApplyDefaults(cfg);
  applyHostnameOverride(opts, cfg);
  const { errors, warnings: vw } = validateConfig(cfg);
  if (errors.length > 0) throw new ConfigValidationError(errors);
  warnings.push(...vw);
  return {
    kind: 'run',
    // The one place the mode is normalised: platformApplyDefaults made "" iptables; this narrows the type.
    mode: cfg.mode === '' ? 'iptables' : cfg.mode,
    modeDefaulted,
    config: resolvedToV1Alpha1(cfg),
    resolved: cfg,
    timing: timingOf(cfg),
    actions: {
      cleanup: opts.cleanup,
      initOnly: opts.initOnly,
      ...(opts.writeConfigTo ? { writeConfigTo: opts.writeConfigTo } : {}),
    },
    warnings,
    ...(opts.configFile ? { configFile: opts.configFile } : {}),
    ...(opts.master ? { master: opts.master } : {}),
    ...(opts.serviceProxyName ? { serviceProxyName: opts.serviceProxyName } : {}),
    ...(opts.manifestsDir ? { manifestsDir: opts.manifestsDir } : {}),
    serviceTrafficMetrics: opts.serviceTrafficMetrics,
    datapathCanary: opts.datapathCanary,
    datapathCanaryMs: canaryIntervalMs(opts.datapathCanaryInterval),
    handoverDrainMs: drainMs(opts.handoverDrainPeriod),
    earlySyncMs: nonNegativeMs(opts.earlySyncAfter, 'early-sync-after'),
    ebpf: ebpfFlags(opts),
    flagz: flagzValues(flags.values),
    version,
  };
}

/** A probe waits up to 1 s for its answer; probing more often than that would only queue probes. */
function canaryIntervalMs(d: number): number {
  const ms = nonNegativeMs(d, 'datapath-canary-interval');
  if (ms < 1000)
    throw new ProxyError('KPT_FLAG_INVALID', 'invalid argument for --datapath-canary-interval: must be at least 1s');
  return ms;
}

function drainMs(d: number): number {
  return nonNegativeMs(d, 'handover-drain-period');
}

function nonNegativeMs(d: number, flag: string): number {
  if (d < 0) throw new ProxyError('KPT_FLAG_INVALID', `invalid argument for --${flag}: must not be negative`);
  return Math.round(d / MILLISECOND);
}

/** Our ebpf mode's flags, as EbpfOptions minus what is derived at start (the connection map size). */
export type EbpfFlags = Omit<EbpfOptions, 'ctEntries'>;

function ebpfFlags(o: CommandOptions): EbpfFlags {
  const bad = (flag: string, msg: string): never => {
    throw new ProxyError('KPT_FLAG_INVALID', `invalid argument for --${flag}: ${msg}`);
  };
  if (o.ebpfAttach !== 'auto' && o.ebpfAttach !== 'tcx' && o.ebpfAttach !== 'tc')
    bad('ebpf-attach', `${JSON.stringify(o.ebpfAttach)}: must be tcx, tc or auto`);
  if (!isLbAlgorithm(o.ebpfLbAlgorithm))
    bad('ebpf-lb-algorithm', `${JSON.stringify(o.ebpfLbAlgorithm)}: must be one of ${LB_ALGORITHMS.join(', ')}`);
  if (!isMaglevSize(o.ebpfMaglevTableSize))
    bad('ebpf-maglev-table-size', `${o.ebpfMaglevTableSize}: must be a prime between 3 and 65521`);
  if (!(XDP_MODES as readonly string[]).includes(o.ebpfXdp))
    bad('ebpf-xdp', `${JSON.stringify(o.ebpfXdp)}: must be one of ${XDP_MODES.join(', ')}`);
  if (!(LB_MODES as readonly string[]).includes(o.ebpfLbMode))
    bad('ebpf-lb-mode', `${JSON.stringify(o.ebpfLbMode)}: must be one of ${LB_MODES.join(', ')}`);
  if (!o.ebpfPinPath.startsWith('/')) bad('ebpf-pin-path', `${JSON.stringify(o.ebpfPinPath)}: must be absolute`);
  return {
    pinRoot: o.ebpfPinPath,
    attach: o.ebpfAttach as EbpfFlags['attach'],
    algorithm: o.ebpfLbAlgorithm as EbpfFlags['algorithm'],
    maglevM: o.ebpfMaglevTableSize,
    socketLBCgroup: o.ebpfSocketLBCgroup,
    xdp: o.ebpfXdp as EbpfFlags['xdp'],
    lbMode: o.ebpfLbMode as EbpfFlags['lbMode'],
  };
}

async function loadConfigFile(path: string, deps: CommandDeps, warnings: string[]): Promise<ResolvedConfig> {
  let text: string;
  try {
    text = await deps.readFile(path);
  } catch (err) {
    throw new ProxyError(
      'KPT_CONFIG_FILE',
      `failed to read config file ${JSON.stringify(path)}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  const decoded = decodeConfigFile(text, path);
  warnings.push(...decoded.warnings);
  return v1alpha1ToResolved(decoded.config);
}

/** copyLogsFromFlags: logging flags that were given override the file. */
function copyLoggingFlags(flags: ParsedFlags, cfg: ResolvedConfig): void {
  const fileVModule = cfg.logging.vmodule ?? [];
  cfg.logging.vmodule = [];
  const target: FlagTarget = { cfg, opts: defaultOptions(cfg) };
  for (const f of FLAGS) {
    const v = flags.values.get(f.name);
    if (f.scope === 'logging' && v !== undefined) f.apply(target, v);
  }
  const merged = [...cfg.logging.vmodule, ...fileVModule];
  if (merged.length > 0) cfg.logging.vmodule = merged;
  else delete cfg.logging.vmodule;
}

/** Upstream processV1Alpha1Flags: flags that do not map 1:1 onto the internal config. */
function processV1Alpha1Flags(flags: ParsedFlags, opts: CommandOptions, cfg: ResolvedConfig): void {
  const changed = (name: string) => flags.values.has(name);
  const ipvs = cfg.mode === 'ipvs';
  if (changed('iptables-sync-period') && !ipvs) cfg.syncPeriod = opts.iptablesSyncPeriod;
  if (changed('iptables-min-sync-period') && !ipvs) cfg.minSyncPeriod = opts.iptablesMinSyncPeriod;
  if (changed('ipvs-sync-period') && ipvs) cfg.syncPeriod = opts.ipvsSyncPeriod;
  if (changed('ipvs-min-sync-period') && ipvs) cfg.minSyncPeriod = opts.ipvsMinSyncPeriod;
  if (changed('cluster-cidr')) cfg.detectLocal.clusterCIDRs = opts.clusterCIDRs.split(',');
}

/** Upstream processHostnameOverrideFlag: the flag wins over the file. */
function applyHostnameOverride(opts: CommandOptions, cfg: ResolvedConfig): void {
  if (opts.hostnameOverride.length === 0) return;
  const name = opts.hostnameOverride.trim();
  if (name.length === 0)
    throw new ProxyError('KPT_FLAG_INVALID', '--hostname-override: empty hostname-override is invalid');
  cfg.hostnameOverride = name.toLowerCase();
}
