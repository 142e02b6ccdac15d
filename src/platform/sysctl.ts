// /proc/sys access and upstream's conntrack sysctl set-up at start-up
// (cmd/kube-proxy/app/conntrack.go). Paths are injectable so
// tests never touch the host: note that /proc/sys/net/* shows the network
// namespace of the process that opens it, while the nf_conntrack hashsize
// (/sys/module/...) is global and nf_conntrack_max is read-only outside the
// initial namespace.

import { access, constants, readFile, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { ProxyError } from '../core/errors.js';
import type { Logger } from './logger.js';

/** Integer sysctls under a root (default /proc/sys); names like "net/netfilter/nf_conntrack_max". */
export class Sysctl {
  constructor(readonly root = '/proc/sys') {}

  /** "a/b/c" is used as is (so "eth0.100" survives); a dotted "a.b.c" name is converted. */
  path(name: string): string {
    const rel = name.includes('/') ? name : name.replaceAll('.', '/');
    if (rel.split('/').some((p) => p === '..' || p === '.'))
      throw new ProxyError('KPT_INPUT_INVALID', `bad sysctl name ${name}`);
    return join(this.root, rel);
  }

  async getInt(name: string): Promise<number> {
    const text = (await readFile(this.path(name), 'utf8')).trim();
    const n = Number(text.split(/\s+/)[0]);
    if (!Number.isInteger(n))
      throw new ProxyError('KPT_INPUT_INVALID', `sysctl ${name}: not an integer: ${JSON.stringify(text)}`);
    return n;
  }

  async setInt(name: string, value: number): Promise<void> {
    await writeFile(this.path(name), `${value}\n`);
  }

  /** Upstream setIntSysCtl: write only when different. Returns whether it wrote. */
  async ensureInt(name: string, value: number, log?: Logger): Promise<boolean> {
    let current: number | null = null;
    try {
      current = await this.getInt(name);
    } catch {
      // unreadable: try to write anyway, as upstream does
    }
    if (current === value) return false;
    log?.info({ name, value, current }, 'Set sysctl');
    try {
      await this.setInt(name, value);
    } catch (e) {
      throw new ProxyError('KPT_EXEC_FAILED', `setting sysctl ${name}=${value}: ${(e as Error).message}`, { cause: e });
    }
    return true;
  }
}

/** Conntrack settings (KubeProxyConntrackConfiguration); timeouts in SECONDS, 0/null = leave alone. */
export interface ConntrackSysctlConfig {
  readonly maxPerCore?: number | null;
  readonly min?: number | null;
  readonly tcpEstablishedTimeout?: number | null;
  readonly tcpCloseWaitTimeout?: number | null;
  readonly tcpBeLiberal?: boolean;
  readonly udpTimeout?: number | null;
  readonly udpStreamTimeout?: number | null;
}

export const CONNTRACK_MAX_CAP = 1_048_576;

/**
 * The nf_conntrack_max kube-proxy asks for; 0 = leave it as is. As upstream
 * getConntrackMax (pkg/proxy/conntrack/sysctls.go, cap added in 1.36 by
 * PR #137002): only the per-core product is capped, and a product above the
 * cap gives the cap even when `min` is larger; otherwise `min` is the floor, so
 * an explicit min above the cap is honoured.
 */
export function conntrackMax(cfg: ConntrackSysctlConfig, numCPU: number): number {
  const perCore = cfg.maxPerCore ?? 0;
  if (!(perCore > 0)) return 0;
  const scaled = Math.floor(perCore) * Math.max(1, Math.floor(numCPU));
  if (scaled > CONNTRACK_MAX_CAP) return CONNTRACK_MAX_CAP;
  return Math.max(scaled, Math.floor(cfg.min ?? 0));
}

export interface ConntrackSetupOptions {
  readonly sysctl?: Sysctl;
  /** The global nf_conntrack hash size parameter. */
  readonly hashsizePath?: string;
  /** CPUs this process may run on (upstream counts the cpuset). */
  readonly numCPU?: number;
  readonly log?: Logger;
}

export interface ConntrackSetupResult {
  /** Sysctl names (and "hashsize") actually written. */
  readonly changed: readonly string[];
  /** Non-fatal problems (read-only sysfs for the hashsize). */
  readonly warnings: readonly string[];
}

const NF = 'net/netfilter/';

/**
 * Upstream setupConntrack. A failed nf_conntrack_max or timeout write rejects
 * (upstream fails start-up); a hashsize that cannot be raised is a warning.
 */
export async function setupConntrack(
  cfg: ConntrackSysctlConfig,
  opts: ConntrackSetupOptions = {},
): Promise<ConntrackSetupResult> {
  const sysctl = opts.sysctl ?? new Sysctl();
  const changed: string[] = [];
  const warnings: string[] = [];
  const ensure = async (name: string, v: number) => {
    if (await sysctl.ensureInt(NF + name, v, opts.log)) changed.push(NF + name);
  };

  const max = conntrackMax(cfg, opts.numCPU ?? availableParallelism());
  if (max > 0) {
    if (await raiseConntrackMax(sysctl, max, opts.log)) changed.push(NF + 'nf_conntrack_max');
    // Raise-only too, and a failure is only a warning, so a node whose table an
    // admin sized larger is never stopped here.
    const w = await raiseHashsize(opts.hashsizePath ?? '/sys/module/nf_conntrack/parameters/hashsize', max, opts.log);
    if (w === true) changed.push('hashsize');
    else if (typeof w === 'string') warnings.push(w);
  }
  const pos = (v: number | null | undefined): v is number => typeof v === 'number' && v > 0;
  if (pos(cfg.tcpEstablishedTimeout))
    await ensure('nf_conntrack_tcp_timeout_established', Math.floor(cfg.tcpEstablishedTimeout));
  if (pos(cfg.tcpCloseWaitTimeout))
    await ensure('nf_conntrack_tcp_timeout_close_wait', Math.floor(cfg.tcpCloseWaitTimeout));
  if (cfg.tcpBeLiberal) await ensure('nf_conntrack_tcp_be_liberal', 1);
  if (pos(cfg.udpTimeout)) await ensure('nf_conntrack_udp_timeout', Math.floor(cfg.udpTimeout));
  if (pos(cfg.udpStreamTimeout)) await ensure('nf_conntrack_udp_timeout_stream', Math.floor(cfg.udpStreamTimeout));
  return { changed, warnings };
}

/**
 * nf_conntrack_max is only ever raised (upstream PR #142035, in 1.36.x and
 * 1.37.x too): a node whose admin set a larger table keeps it, and a proxy
 * without permission to write the sysctl (an LXC node) still starts when the
 * current value is already enough. An unreadable value is written, as before.
 * Returns whether it wrote.
 */
async function raiseConntrackMax(sysctl: Sysctl, want: number, log?: Logger): Promise<boolean> {
  const name = NF + 'nf_conntrack_max';
  let current: number | null = null;
  try {
    current = await sysctl.getInt(name);
  } catch {
    // unreadable: try the write, which reports the real problem
  }
  if (current !== null && current >= want) {
    log?.info({ nfConntrackMax: current, wanted: want }, 'nf_conntrack_max is already large enough; leaving it');
    return false;
  }
  return sysctl.ensureInt(name, want, log);
}

/** Raise the hashsize to max/4 if below it. true = written, string = warning, false = nothing to do. */
async function raiseHashsize(path: string, max: number, log?: Logger): Promise<boolean | string> {
  const want = Math.floor(max / 4);
  try {
    const current = Number((await readFile(path, 'utf8')).trim());
    if (Number.isInteger(current) && current >= want) return false;
    await access(path, constants.W_OK);
    log?.info({ conntrackHashsize: want }, 'Setting conntrack hashsize');
    await writeFile(path, `${want}\n`);
    return true;
  } catch (e) {
    const msg = `could not set conntrack hashsize to ${want} (${(e as Error).message}); sysfs may be read-only`;
    log?.warn({ path }, msg);
    return msg;
  }
}

/** iptables localhost NodePorts need net.ipv4.conf.all.route_localnet=1. Returns whether it wrote. */
export function ensureRouteLocalnet(sysctl: Sysctl = new Sysctl(), log?: Logger): Promise<boolean> {
  return sysctl.ensureInt('net/ipv4/conf/all/route_localnet', 1, log);
}
