// Validation of the resolved configuration, rule for rule as upstream
// pkg/proxy/apis/config/validation/validation.go, reporting v1alpha1 JSON field
// paths (as newer upstream does) so users can find the line in their file.
// Mode-dependent values (sync periods, masqueradeBit) are reported under the
// section the selected mode reads them from.

import { parseCIDR, parseIP } from '../ip.js';
import { parseDuration, type Duration } from './duration.js';
import { forbidden, invalid, notSupported, type FieldError } from './field.js';
import { quantityValue } from './quantity.js';
import { parsePort, splitHostPort } from './hostport.js';
import { featureGateEnabled, KNOWN_FEATURE_GATES } from './features.js';
import {
  NODE_PORT_ADDRESSES_ALL,
  NODE_PORT_ADDRESSES_LOCALHOST,
  NODE_PORT_ADDRESSES_PRIMARY,
  type ResolvedConfig,
} from './types.js';

export const IPVS_SCHEDULERS = ['rr', 'wrr', 'lc', 'wlc', 'lblc', 'lblcr', 'sh', 'dh', 'sed', 'nq', 'mh'] as const;
export const VALID_PROXY_MODES = ['iptables', 'ipvs', 'nftables', 'userspace', 'ebpf'] as const;
export const LOCAL_MODES = ['ClusterCIDR', 'NodeCIDR', 'BridgeInterface', 'InterfaceNamePrefix', ''] as const;
/** The Kubernetes minor version our flags and config track (for showHiddenMetricsForVersion). */
export const KUBERNETES_VERSION = { major: 1, minor: 37 } as const;

export interface ValidationResult {
  readonly errors: FieldError[];
  /** Non-fatal findings, e.g. feature gates this program does not know. */
  readonly warnings: string[];
}

const d = (duration: Duration) => ({ duration });

export function validateConfig(c: ResolvedConfig): ValidationResult {
  const errs: FieldError[] = [];
  const warnings: string[] = [];
  for (const gate of Object.keys(c.featureGates)) {
    if (!KNOWN_FEATURE_GATES.has(gate))
      warnings.push(`featureGates: unrecognized feature gate ${JSON.stringify(gate)} ignored`);
  }
  checkMasqueradeBit(errs, 'iptables.masqueradeBit', c.iptables.masqueradeBit);
  if (c.mode === 'ipvs') validateIPVS(errs, c);
  if (c.mode === 'ipvs' && !featureGateEnabled(c.featureGates, 'KubeProxyIPVS'))
    errs.push(invalid('mode', c.mode, 'ipvs mode needs the KubeProxyIPVS feature gate, which is disabled'));
  if (c.mode === 'nftables') checkMasqueradeBit(errs, 'nftables.masqueradeBit', c.nftables.masqueradeBit);
  validateLinux(errs, c);
  if (c.mode !== '' && !(VALID_PROXY_MODES as readonly string[]).includes(c.mode)) {
    errs.push(
      invalid(
        'mode',
        c.mode,
        `must be ${VALID_PROXY_MODES.join(', ')} or blank (blank means the best-available proxy [currently iptables])`,
      ),
    );
  }
  if (c.clientConnection.burst < 0)
    errs.push(invalid('clientConnection.burst', c.clientConnection.burst, 'must be greater than or equal to 0'));
  if (c.configSyncPeriod <= 0) errs.push(invalid('configSyncPeriod', d(c.configSyncPeriod), 'must be greater than 0'));
  validateSyncPeriods(errs, c);
  if (!parseIP(c.bindAddress)) {
    errs.push(invalid('bindAddress', c.bindAddress, 'not a valid textual representation of an IP address'));
  }
  // Empty disables the server (--healthz-port=0 / --metrics-port=0 produce it).
  if (c.healthzBindAddress !== '') validateHostPort(errs, c.healthzBindAddress, 'healthzBindAddress');
  if (c.metricsBindAddress !== '') validateHostPort(errs, c.metricsBindAddress, 'metricsBindAddress');
  if (!validPortRange(c.portRange))
    errs.push(invalid('portRange', c.portRange, 'must be a valid port range (e.g. 300-2000)'));
  validateNodePortAddresses(errs, c.nodePortAddresses);
  validateShowHiddenMetrics(errs, c.showHiddenMetricsForVersion);
  if (!(LOCAL_MODES as readonly string[]).includes(c.detectLocalMode)) {
    errs.push(notSupported('detectLocalMode', c.detectLocalMode, LOCAL_MODES));
  }
  validateDetectLocal(errs, c);
  validateLogging(errs, c);
  return { errors: errs, warnings };
}

function checkMasqueradeBit(errs: FieldError[], field: string, bit: number | null): void {
  if (bit !== null && (bit < 0 || bit > 31)) errs.push(invalid(field, bit, 'must be within the range [0, 31]'));
}

function sectionOf(c: ResolvedConfig): string {
  return c.mode === 'ipvs' || c.mode === 'nftables' ? c.mode : 'iptables';
}

function validateSyncPeriods(errs: FieldError[], c: ResolvedConfig): void {
  const s = sectionOf(c);
  if (c.syncPeriod <= 0) errs.push(invalid(`${s}.syncPeriod`, d(c.syncPeriod), 'must be greater than 0'));
  if (c.minSyncPeriod < 0)
    errs.push(invalid(`${s}.minSyncPeriod`, d(c.minSyncPeriod), 'must be greater than or equal to 0'));
  if (c.minSyncPeriod > c.syncPeriod) {
    errs.push(invalid(`${s}.syncPeriod`, d(c.minSyncPeriod), `must be greater than or equal to ${s}.minSyncPeriod`));
  }
}

function validateIPVS(errs: FieldError[], c: ResolvedConfig): void {
  const v = c.ipvs;
  const nonNeg = 'must be greater than or equal to 0';
  if (v.tcpTimeout < 0) errs.push(invalid('ipvs.tcpTimeout', d(v.tcpTimeout), nonNeg));
  if (v.tcpFinTimeout < 0) errs.push(invalid('ipvs.tcpFinTimeout', d(v.tcpFinTimeout), nonNeg));
  if (v.udpTimeout < 0) errs.push(invalid('ipvs.udpTimeout', d(v.udpTimeout), nonNeg));
  if (v.scheduler !== '' && !(IPVS_SCHEDULERS as readonly string[]).includes(v.scheduler)) {
    errs.push(
      invalid(
        'ipvs.scheduler',
        v.scheduler,
        `must be in [${IPVS_SCHEDULERS.join(' ')} ], blank means the default algorithm method (currently rr)`,
      ),
    );
  }
  v.excludeCIDRs.forEach((cidr, i) => {
    if (!parseCIDR(cidr)) errs.push(invalid(`ipvs.excludeCIDRs[${i}]`, cidr, 'must be a valid CIDR'));
  });
}

function validateLinux(errs: FieldError[], c: ResolvedConfig): void {
  const ct = c.linux.conntrack;
  const nonNeg = 'must be greater than or equal to 0';
  if (ct.maxPerCore !== null && ct.maxPerCore < 0) errs.push(invalid('conntrack.maxPerCore', ct.maxPerCore, nonNeg));
  if (ct.min !== null && ct.min < 0) errs.push(invalid('conntrack.min', ct.min, nonNeg));
  const durations: Array<[string, Duration | null]> = [
    ['conntrack.tcpEstablishedTimeout', ct.tcpEstablishedTimeout],
    ['conntrack.tcpCloseWaitTimeout', ct.tcpCloseWaitTimeout],
    ['conntrack.udpTimeout', ct.udpTimeout],
    ['conntrack.udpStreamTimeout', ct.udpStreamTimeout],
  ];
  for (const [field, value] of durations) {
    if (value !== null && value < 0) errs.push(invalid(field, d(value), nonNeg));
  }
  const oom = c.linux.oomScoreAdj;
  if (oom !== null && (oom < -1000 || oom > 1000))
    errs.push(invalid('oomScoreAdj', oom, 'must be within the range [-1000, 1000]'));
}

function validateHostPort(errs: FieldError[], input: string, field: string): void {
  const hp = splitHostPort(input);
  if (!hp) {
    errs.push(invalid(field, input, 'must be IP:port'));
    return;
  }
  if (!parseIP(hp.host)) errs.push(invalid(field, hp.host, 'must be a valid IP'));
  if (parsePort(hp.port) === null) errs.push(invalid(field, hp.port, 'must be a valid port'));
}

/** k8s.io/apimachinery/pkg/util/net ParsePortRange: "", "N", "N-M" or "N+M". */
export function validPortRange(s: string): boolean {
  if (s === '') return true;
  const m = /^([0-9]+)(?:([-+])([0-9]+))?$/.exec(s);
  if (!m) return false;
  const base = Number(m[1]);
  if (base > 65535) return false;
  if (!m[2]) return true;
  const other = Number(m[3]);
  const end = m[2] === '-' ? other : base + other;
  return end <= 65535 && end >= base;
}

function validateNodePortAddresses(errs: FieldError[], addrs: readonly string[]): void {
  const keywords: readonly string[] = [
    NODE_PORT_ADDRESSES_PRIMARY,
    NODE_PORT_ADDRESSES_LOCALHOST,
    NODE_PORT_ADDRESSES_ALL,
  ];
  addrs.forEach((a, i) => {
    if (keywords.includes(a)) return;
    if (!parseCIDR(a)) {
      errs.push(
        invalid(
          `nodePortAddresses[${i}]`,
          a,
          "must be a valid CIDR or one of the keywords 'primary', 'localhost', 'all'",
        ),
      );
    }
  });
}

function validateShowHiddenMetrics(errs: FieldError[], version: string): void {
  if (version === '') return;
  const valid = `${KUBERNETES_VERSION.major}.${KUBERNETES_VERSION.minor - 1}`;
  if (version !== valid) {
    errs.push(
      invalid(
        'showHiddenMetricsForVersion',
        version,
        `--show-hidden-metrics-for-version must be omitted or have the value '${valid}'. Only the previous minor version is allowed`,
      ),
    );
  }
}

const DUAL_STACK_DETAIL =
  'must be a either a single CIDR or dual-stack pair of CIDRs (e.g. [10.100.0.0/16, fde4:8dba:82e1::/48]';

function validateDetectLocal(errs: FieldError[], c: ResolvedConfig): void {
  const dl = c.detectLocal;
  switch (c.detectLocalMode) {
    case 'BridgeInterface':
      if (dl.bridgeInterface === '') errs.push(invalid('detectLocal.bridgeInterface', '', 'must not be empty'));
      break;
    case 'InterfaceNamePrefix':
      if (dl.interfaceNamePrefix === '') errs.push(invalid('detectLocal.interfaceNamePrefix', '', 'must not be empty'));
      break;
    case 'ClusterCIDR': {
      const cidrs = dl.clusterCIDRs;
      if (cidrs.length === 0) break;
      const joined = cidrs.join(',');
      if (cidrs.length > 2) {
        errs.push(invalid('clusterCIDR', joined, DUAL_STACK_DETAIL));
        break;
      }
      const parsed = cidrs.map((s) => parseCIDR(s));
      if (parsed.some((p) => p === null)) {
        errs.push(
          invalid('clusterCIDR', joined, 'must be a valid CIDR block (e.g. 10.100.0.0/16 or fde4:8dba:82e1::/48)'),
        );
      } else if (parsed.length === 2 && parsed[0]!.family === parsed[1]!.family) {
        errs.push(invalid('clusterCIDR', joined, DUAL_STACK_DETAIL));
      }
      break;
    }
    default:
      break;
  }
}

const ALPHA_OFF = 'Feature LoggingAlphaOptions is disabled';

function validateLogging(errs: FieldError[], c: ResolvedConfig): void {
  const l = c.logging;
  if (l.format !== 'text' && l.format !== 'json') errs.push(notSupported('logging.format', l.format, ['json', 'text']));
  if (l.verbosity < 0) errs.push(invalid('logging.verbosity', l.verbosity, 'must be greater than or equal to 0'));
  try {
    if (parseDuration(l.flushFrequency) <= 0)
      errs.push(invalid('logging.flushFrequency', l.flushFrequency, 'must be greater than 0'));
  } catch {
    errs.push(invalid('logging.flushFrequency', l.flushFrequency, 'must be a valid duration'));
  }
  // component-base validateFormatOptions: the alpha routing options need their gate, for either format.
  const alpha = featureGateEnabled(c.featureGates, 'LoggingAlphaOptions');
  for (const format of ['text', 'json'] as const) {
    const o = l.options?.[format];
    const path = `logging.options.${format}`;
    if (o?.splitStream === true && !alpha) errs.push(forbidden(`${path}.splitStream`, ALPHA_OFF));
    let size = 0;
    try {
      size = quantityValue(o?.infoBufferSize ?? '0');
    } catch (e) {
      errs.push(invalid(`${path}.infoBufferSize`, o?.infoBufferSize ?? '', (e as Error).message));
    }
    if (size !== 0 && !alpha) errs.push(forbidden(`${path}.infoBufferSize`, ALPHA_OFF));
  }
  (l.vmodule ?? []).forEach((item, i) => {
    if (item.filePattern === '') errs.push(invalid(`logging.vmodule[${i}].filePattern`, '', 'must not be empty'));
    else if (/[,=]/.test(item.filePattern)) {
      errs.push(
        invalid(`logging.vmodule[${i}].filePattern`, item.filePattern, 'must not contain commas or equal signs'),
      );
    }
    if (item.verbosity < 0)
      errs.push(invalid(`logging.vmodule[${i}].verbosity`, item.verbosity, 'must be greater than or equal to 0'));
  });
}
