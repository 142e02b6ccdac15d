// The iptables mode's restore text (upstream's syncProxyRules in
// pkg/proxy/iptables/proxier.go without the I/O): the rules every sync
// writes whole (filter table, top-level nat chains) and the assembly of one
// `iptables-restore` input from the rendered service ports. Which service
// chains are written or deleted is not decided here but by the one
// reconciler, through driver.ts. Output order is upstream's, byte for byte:
// filter chain lines, filter rules, then nat chain lines and nat rules.
//
// The `--comment` texts are upstream's, byte for byte: iptables-save shows
// them, and operators, their tools and `kube-proxy-ts explain` match on
// them. Keep them identical; they are facts of compatibility, not our prose.

import { cidrContains, isLoopback, isZeroCIDR, parseCIDR, parseIP } from '../../core/ip.js';
import type { DataplaneConfig, IPFamily, LocalDetector, ServicePort, SyncState } from '../../core/types.js';
import type { ChainNamer } from './names.js';
import { LineBuffer, chainLine } from './restore.js';
import { finish, type Steps } from '../../core/steps.js';
import {
  KUBE_EXTERNAL_SERVICES,
  KUBE_MARK_MASQ,
  KUBE_NODEPORTS,
  KUBE_PROXY_FIREWALL,
  KUBE_SERVICES,
  type RenderedServicePort,
  type ServiceRenderContext,
} from './servicerules.js';

export const KUBE_FORWARD = 'KUBE-FORWARD';
export const KUBE_POSTROUTING = 'KUBE-POSTROUTING';
export const KUBE_FIREWALL = 'KUBE-FIREWALL';
export const CT_INVALID_COUNTER = 'ct_state_invalid_dropped_pkts';

export interface IptablesOptions {
  /** iptables supports MASQUERADE --random-fully. */
  readonly randomFully: boolean;
  /** nfacct counters that exist (upstream nfAcctCounters). */
  readonly nfacct: { readonly ctStateInvalidDropped: boolean; readonly localhostNodePortsAccepted: boolean };
  /** nf_conntrack_tcp_be_liberal=1: omit the INVALID drop. */
  readonly beLiberal: boolean;
  /** Large-cluster mode when total endpoints exceed this (upstream 1000). */
  readonly largeClusterThreshold: number;
}

export const DEFAULT_IPTABLES_OPTIONS: IptablesOptions = {
  randomFully: true,
  nfacct: { ctStateInvalidDropped: true, localhostNodePortsAccepted: true },
  beLiberal: false,
  largeClusterThreshold: 1000,
};

export interface IptablesRenderInput {
  readonly state: SyncState;
  readonly config: DataplaneConfig;
  readonly options: IptablesOptions;
}

export interface SkippedServicePort {
  readonly key: string;
  readonly reason: string;
}

export interface IptablesRender {
  /**
   * The exact `iptables-restore --noflush --counters` input, as the pieces it
   * was built from (whole lines each): the platform streams them into the
   * restore's stdin, so a large cluster's ruleset never exists as one more
   * string.
   */
  readonly restoreParts: readonly string[];
  /** The same input as one string (joined on first use: tests, tools). */
  readonly restoreText: string;
  readonly partial: boolean;
  readonly largeClusterMode: boolean;
  /** Filter chains declared (KUBE-FIREWALL only for IPv4 + localhost NodePorts). */
  readonly filterChains: readonly string[];
  /** Service chains in the nat table after this restore (written or kept). */
  readonly natChains: number;
  /** Stale chains deleted with -X, sorted. */
  readonly deletedChains: readonly string[];
  /**
   * The nat KUBE-SERVICES and KUBE-NODEPORTS were left as the last restore wrote them, their rules
   * being the same (a partial sync in large-cluster mode: driver.ts); `natTopRules` counts them.
   */
  readonly natTopKept: boolean;
  /** Rules in nat KUBE-SERVICES and KUBE-NODEPORTS after this restore. */
  readonly natTopRules: number;
  /** Filter rules written (upstream sync_proxy_rules_iptables_last, table filter). */
  readonly filterRules: number;
  /** Nat rules written, excluding -X lines (…_last, table nat). */
  readonly natRules: number;
  /** Nat rules in the kernel after the restore, incl. unchanged chains (…_total, table nat). */
  readonly natRulesTotal: number;
  readonly noLocalEndpoints: { readonly internal: number; readonly external: number };
  readonly skipped: readonly SkippedServicePort[];
}

interface DetectorArgs {
  ifLocal: string[] | null;
  ifNotLocal: string[] | null;
}

/** Upstream LocalTrafficDetector IfLocal/IfNotLocal for one family (first CIDR of the family). */
export function detectorArgs(d: LocalDetector, family: IPFamily): DetectorArgs {
  switch (d.kind) {
    case 'none':
      return { ifLocal: null, ifNotLocal: null };
    case 'cidr': {
      const c = d.cidrs.map((s) => parseCIDR(s.trim())).find((x) => x !== null && x.family === family);
      return c ? { ifLocal: ['-s', c.text], ifNotLocal: ['!', '-s', c.text] } : { ifLocal: null, ifNotLocal: null };
    }
    case 'bridge':
      return { ifLocal: ['-i', d.interfaceName], ifNotLocal: ['!', '-i', d.interfaceName] };
    case 'prefix':
      return { ifLocal: ['-i', `${d.interfacePrefix}+`], ifNotLocal: ['!', '-i', `${d.interfacePrefix}+`] };
  }
}

/** nodePortAddresses null or containing a zero CIDR means "all local IPs". */
function matchAll(cfg: DataplaneConfig): boolean {
  return cfg.nodePortAddresses === null || cfg.nodePortAddresses.some((c) => isZeroCIDR(c));
}

/** Upstream: localhost NodePorts need IPv4 and a nodePortAddresses containing IPv4 loopback. */
export function localhostNodePortsOn(cfg: DataplaneConfig): boolean {
  if (cfg.family !== 'IPv4' || !cfg.localhostNodePorts) return false;
  if (matchAll(cfg)) return true;
  return (cfg.nodePortAddresses ?? []).some((c) => {
    const p = parseCIDR(c);
    return p !== null && cidrContains(p, '127.0.0.1');
  });
}

/** Why a service port cannot be rendered, or null. */
export function invalidServicePort(svc: ServicePort, family: IPFamily): string | null {
  if (svc.family !== family) return `family ${svc.family} in a ${family} render`;
  if (parseIP(svc.clusterIP)?.family !== family) return `bad clusterIP ${svc.clusterIP}`;
  if (!Number.isInteger(svc.port) || svc.port < 1 || svc.port > 65535) return `bad port ${svc.port}`;
  return null;
}

/** What one sync's restore input is built from, besides its service ports (driver.ts). */
export interface RestoreFrame {
  readonly config: DataplaneConfig;
  readonly options: IptablesOptions;
  /** localhostNodePortsOn(config). */
  readonly lnp: boolean;
  readonly largeClusterMode: boolean;
  readonly partial: boolean;
  readonly skipped: readonly SkippedServicePort[];
}

/**
 * The end of nat KUBE-SERVICES, after every service port's rules: the jump to KUBE-NODEPORTS, one
 * line per node address (upstream writes it last).
 */
export function nodePortsJumpText(config: DataplaneConfig, lnp: boolean): string {
  const b = new LineBuffer();
  writeNodePortsJump(b, config, lnp, config.family === 'IPv6');
  return b.text();
}

/**
 * The restore input, in upstream's order: the filter section whole, then
 * the nat section with the top-level chains whole, the own chains of the
 * ports marked in `write` (declared, which flushes them, and refilled; their
 * `own` text must be there) and the `deleted` chains (declared and `-X`'d,
 * sorted). `ports` are in service-port key order. With `keepTop`, nat
 * KUBE-SERVICES and KUBE-NODEPORTS are neither declared (which would flush
 * them) nor written: the caller knows the kernel holds exactly these rules.
 */
export function renderRestore(
  frame: RestoreFrame,
  ports: readonly RenderedServicePort[],
  write: readonly boolean[],
  deleted: readonly string[],
  keepTop = false,
): IptablesRender {
  return finish(renderRestoreSteps(frame, ports, write, deleted, keepTop));
}

/** Service ports, or chain lines, handled per step of renderRestoreSteps(). */
const STEP_ITEMS = 2000;

/** renderRestore() as resumable steps (src/core/steps.ts): the same pieces, a few thousand items a step. */
export function* renderRestoreSteps(
  frame: RestoreFrame,
  ports: readonly RenderedServicePort[],
  write: readonly boolean[],
  deleted: readonly string[],
  keepTop = false,
): Steps<IptablesRender> {
  const { config, options, lnp } = frame;
  const mark = `0x${config.masqueradeMark.toString(16).padStart(8, '0')}`;

  const filterChains = [KUBE_SERVICES, KUBE_EXTERNAL_SERVICES, KUBE_FORWARD, KUBE_NODEPORTS, KUBE_PROXY_FIREWALL];
  const natHead = new LineBuffer();
  const filterHead = new LineBuffer();
  natHead.write('-A', KUBE_POSTROUTING, '-m', 'mark', '!', '--mark', `${mark}/${mark}`, '-j', 'RETURN');
  natHead.write('-A', KUBE_POSTROUTING, '-j', 'MARK', '--xor-mark', mark);
  natHead.write(
    '-A',
    KUBE_POSTROUTING,
    '-m',
    'comment',
    '--comment',
    '"kubernetes service traffic requiring SNAT"',
    '-j',
    'MASQUERADE',
    options.randomFully ? ['--random-fully'] : [],
  );
  natHead.write('-A', KUBE_MARK_MASQ, '-j', 'MARK', '--or-mark', mark);
  if (lnp) {
    filterChains.push(KUBE_FIREWALL);
    filterHead.write(
      '-A',
      KUBE_FIREWALL,
      '-m',
      'comment',
      '--comment',
      '"block incoming localnet connections"',
      '-d',
      '127.0.0.0/8',
      '!',
      '-s',
      '127.0.0.0/8',
      '-m',
      'conntrack',
      '!',
      '--ctstate',
      'RELATED,ESTABLISHED,DNAT',
      '-j',
      'DROP',
    );
  }

  // Per-service chunks in service-key order; one join at the end.
  const natChainLines: string[] = [];
  const natRuleChunks: string[] = [];
  const filterChunks: string[] = [];
  let natChains = 0;
  let natWritten = 0;
  let natSkipped = 0;
  let natTopRules = 0;
  let filterCount = 0;
  let noLocalInternal = 0;
  let noLocalExternal = 0;
  for (let i = 0; i < ports.length; i++) {
    if (i % STEP_ITEMS === STEP_ITEMS - 1) yield;
    const r = ports[i]!;
    if (r.filter !== '') filterChunks.push(r.filter);
    filterCount += r.filterCount;
    if (keepTop) natSkipped += r.natTopCount;
    else {
      if (r.natTop !== '') natRuleChunks.push(r.natTop);
      natWritten += r.natTopCount;
    }
    natTopRules += r.natTopCount;
    natChains += r.chains.length;
    if (write[i] === true) {
      for (const c of r.chains) natChainLines.push(chainLine(c));
      if (r.own !== '') natRuleChunks.push(r.own!);
      natWritten += r.ownCount;
    } else {
      natSkipped += r.ownCount;
    }
    if (r.noLocalInternal) noLocalInternal++;
    if (r.noLocalExternal) noLocalExternal++;
  }

  const natTail = new LineBuffer();
  for (const c of deleted) {
    natChainLines.push(chainLine(c));
    natTail.write('-X', c);
  }
  // Counted but not kept when the top-level chains stay.
  const jump = new LineBuffer(keepTop);
  writeNodePortsJump(jump, config, lnp, config.family === 'IPv6');
  natTopRules += jump.count;
  if (keepTop) natSkipped += jump.count;
  const filterTail = new LineBuffer();
  writeForwardRules(filterTail, options, mark);

  // The chunk lists hold one or two entries per service port: appended one by one, never spread into one
  // push() call, whose arguments all go on the stack (a RangeError past ~125k, about 60k Services).
  const parts = ['*filter\n'];
  for (const c of filterChains) parts.push(chainLine(c), '\n');
  parts.push(filterHead.text());
  for (let i = 0; i < filterChunks.length; i++) {
    if (i % STEP_ITEMS === STEP_ITEMS - 1) yield;
    parts.push(filterChunks[i]!);
  }
  parts.push(filterTail.text(), 'COMMIT\n*nat\n');
  const natTopChains = keepTop
    ? [KUBE_POSTROUTING, KUBE_MARK_MASQ]
    : [KUBE_SERVICES, KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_MARK_MASQ];
  for (const c of natTopChains) parts.push(chainLine(c), '\n');
  for (let i = 0; i < natChainLines.length; i++) {
    if (i % STEP_ITEMS === STEP_ITEMS - 1) yield;
    parts.push(natChainLines[i]!, '\n');
  }
  parts.push(natHead.text());
  for (let i = 0; i < natRuleChunks.length; i++) {
    if (i % STEP_ITEMS === STEP_ITEMS - 1) yield;
    parts.push(natRuleChunks[i]!);
  }
  parts.push(natTail.text(), jump.text(), 'COMMIT\n');
  const natRules = natHead.count + natWritten + natTail.count - deleted.length + (keepTop ? 0 : jump.count);
  let joined: string | undefined;
  return {
    restoreParts: parts,
    get restoreText(): string {
      return (joined ??= parts.join(''));
    },
    partial: frame.partial,
    largeClusterMode: frame.largeClusterMode,
    filterChains,
    natChains,
    deletedChains: deleted,
    natTopKept: keepTop,
    natTopRules,
    filterRules: filterHead.count + filterCount + filterTail.count,
    natRules,
    natRulesTotal: natRules + natSkipped,
    noLocalEndpoints: { internal: noLocalInternal, external: noLocalExternal },
    skipped: frame.skipped,
  };
}

/** Everything every service port's render needs to know about this sync. */
export function renderContext(
  cfg: DataplaneConfig,
  options: IptablesOptions,
  lnp: boolean,
  largeClusterMode: boolean,
  nodeIP: string | null,
  names: ChainNamer,
): ServiceRenderContext {
  const det = detectorArgs(cfg.localDetector, cfg.family);
  const ifLocal = det.ifLocal === null ? null : det.ifLocal.join(' ');
  const ifNotLocal = det.ifNotLocal === null ? null : det.ifNotLocal.join(' ');
  const localhostNodePortCounter = lnp && options.nfacct.localhostNodePortsAccepted;
  const key = JSON.stringify([
    cfg.family,
    cfg.masqueradeAll,
    ifLocal,
    ifNotLocal,
    localhostNodePortCounter,
    largeClusterMode,
    nodeIP,
  ]);
  return {
    masqueradeAll: cfg.masqueradeAll,
    ifLocal,
    ifNotLocal,
    localhostNodePortCounter,
    largeClusterMode,
    nodeIP,
    key,
    names,
  };
}

/** Map keys sorted; buildSyncState already inserts in order, so usually no sort is needed. */
export function sortedKeys(m: ReadonlyMap<string, unknown>): string[] {
  const keys = [...m.keys()];
  for (let i = 1; i < keys.length; i++) if (keys[i - 1]! > keys[i]!) return keys.sort();
  return keys;
}

/** The last rule of nat KUBE-SERVICES: hand local destinations to KUBE-NODEPORTS. */
function writeNodePortsJump(natRules: LineBuffer, cfg: DataplaneConfig, lnp: boolean, ipv6: boolean): void {
  const cmt = [
    '-m',
    'comment',
    '--comment',
    '"kubernetes service nodeports; NOTE: this must be the last rule in this chain"',
  ];
  if (matchAll(cfg)) {
    const dest = ['-m', 'addrtype', '--dst-type', 'LOCAL'];
    if (ipv6) dest.push('!', '-d', '::1/128');
    else if (!lnp) dest.push('!', '-d', '127.0.0.0/8');
    natRules.write('-A', KUBE_SERVICES, cmt, dest, '-j', KUBE_NODEPORTS);
    return;
  }
  const cidrs = (cfg.nodePortAddresses ?? [])
    .map((c) => parseCIDR(c))
    .filter((c) => c !== null && c.family === cfg.family);
  const seen = new Set<string>();
  for (const ipText of cfg.localIPs) {
    const ip = parseIP(ipText);
    if (!ip || ip.family !== cfg.family || seen.has(ip.text)) continue;
    if (!cidrs.some((c) => cidrContains(c!, ip))) continue;
    // Upstream logs an error and skips loopback when it cannot be served.
    if (isLoopback(ip) && (ipv6 || !lnp)) continue;
    seen.add(ip.text);
    natRules.write('-A', KUBE_SERVICES, cmt, '-d', ip.text, '-j', KUBE_NODEPORTS);
  }
}

function writeForwardRules(filterRules: LineBuffer, options: IptablesOptions, mark: string): void {
  if (!options.beLiberal) {
    filterRules.write(
      '-A',
      KUBE_FORWARD,
      '-m',
      'conntrack',
      '--ctstate',
      'INVALID',
      options.nfacct.ctStateInvalidDropped ? ['-m', 'nfacct', '--nfacct-name', CT_INVALID_COUNTER] : [],
      '-j',
      'DROP',
    );
  }
  filterRules.write(
    '-A',
    KUBE_FORWARD,
    '-m',
    'comment',
    '--comment',
    '"kubernetes forwarding rules"',
    '-m',
    'mark',
    '--mark',
    `${mark}/${mark}`,
    '-j',
    'ACCEPT',
  );
  filterRules.write(
    '-A',
    KUBE_FORWARD,
    '-m',
    'comment',
    '--comment',
    '"kubernetes forwarding conntrack rule"',
    '-m',
    'conntrack',
    '--ctstate',
    'RELATED,ESTABLISHED',
    '-j',
    'ACCEPT',
  );
}
