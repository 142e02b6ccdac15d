// The node facts `kube-proxy-ts migrate` weighs (src/engine/migrate.ts),
// read without changing anything: the addresses of each interface
// (`ip -j addr show`; kube-ipvs0's apart), the IPVS table's virtual servers
// and their schedulers (/proc/net/ip_vs, present only while IPVS is loaded:
// nothing here loads a module, as ipvsadm or a generic netlink lookup of the
// IPVS family could), the listening sockets (/proc/net/{tcp,udp}{,6}) and the
// ARP sysctls. Every read goes through the CommandRunner, so --netns reads a
// namespace; the parsers are pure and tested on captured text.
import { formatIP, normalizeIP } from '../core/ip.js';
import type { Protocol } from '../core/types.js';
import type { Listener, NodeFacts, VirtualServerFact } from '../engine/migrate.js';
import type { CommandRunner } from '../platform/exec.js';

/** IPVS mode's dummy interface (upstream's name). */
export const IPVS_DUMMY = 'kube-ipvs0';

/** `ip -j addr show` -> each interface's addresses. */
export function parseIpAddr(json: string): { ifname: string; address: string }[] {
  const links = JSON.parse(json) as Array<{ ifname?: string; addr_info?: Array<{ local?: string }> }>;
  const out: { ifname: string; address: string }[] = [];
  for (const l of links)
    for (const a of l.addr_info ?? []) {
      const ip = normalizeIP(a.local);
      if (ip !== null) out.push({ ifname: l.ifname ?? '', address: ip });
    }
  return out;
}

/** /proc/net/tcp's address: 8 hex digits of a host-order (little-endian) word, or 32 for IPv6 (four such words). */
function procAddress(hex: string): string | null {
  if (hex.length !== 8 && hex.length !== 32) return null;
  const bytes = new Uint8Array(hex.length / 2);
  for (let w = 0; w < hex.length / 8; w++)
    for (let b = 0; b < 4; b++)
      bytes[w * 4 + b] = parseInt(hex.slice(w * 8 + (3 - b) * 2, w * 8 + (3 - b) * 2 + 2), 16);
  return formatIP(bytes);
}

/**
 * The listening sockets in /proc/net/tcp{,6} (state 0A, LISTEN) or
 * /proc/net/udp{,6} (state 07 with no remote address: an unconnected socket
 * that takes datagrams from anyone).
 */
export function parseProcNet(text: string, protocol: 'TCP' | 'UDP'): Listener[] {
  const out: Listener[] = [];
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 4) continue;
    const [local, remote, st] = [f[1]!, f[2]!, f[3]!];
    const [lhex, lport] = local.split(':');
    const address = procAddress(lhex ?? '');
    if (address === null || lport === undefined) continue;
    const listening = protocol === 'TCP' ? st === '0A' : st === '07' && /^0+:0+$/.test(remote);
    if (listening) out.push({ protocol, address, port: parseInt(lport, 16) });
  }
  return dedupe(out);
}

function dedupe(ls: Listener[]): Listener[] {
  const seen = new Set<string>();
  return ls.filter((l) => {
    const k = `${l.protocol} ${l.address} ${l.port}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/**
 * /proc/net/ip_vs's virtual servers: `TCP  0A600001:0050 rr` (IPv4 in
 * network order) or `TCP  [fd00:0000:...:0001]:0050 rr`; real server lines
 * (`  -> ...`) and firewall-mark services (`FWM`) are skipped.
 */
export function parseProcIpvs(text: string): VirtualServerFact[] {
  const out: VirtualServerFact[] = [];
  for (const line of text.split('\n')) {
    const m = /^(TCP|UDP|SCTP)\s+(?:([0-9A-Fa-f]{8})|\[([0-9A-Fa-f:]+)\]):([0-9A-Fa-f]{4})\s+(\S+)/.exec(line);
    if (!m) continue;
    let address: string | null;
    if (m[2] !== undefined) {
      const n = parseInt(m[2], 16);
      address = formatIP(new Uint8Array([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255]));
    } else address = normalizeIP(m[3]);
    if (address === null) continue;
    out.push({ protocol: m[1] as Protocol, address, port: parseInt(m[4]!, 16), scheduler: m[5]! });
  }
  return out;
}

/** A sysctl's integer value from its /proc/sys file, or null. */
export function parseSysctl(text: string): number | null {
  const n = Number(text.trim());
  return text.trim() !== '' && Number.isInteger(n) ? n : null;
}

/** A file's text through the runner, or null when it cannot be read (missing: IPVS not loaded, no IPv6). */
async function readText(run: CommandRunner, path: string): Promise<string | null> {
  const r = await run('cat', [path], { allowFailure: true });
  return r.code === 0 ? r.stdout : null;
}

export async function readNodeFacts(run: CommandRunner): Promise<NodeFacts> {
  const addrs = parseIpAddr((await run('ip', ['-j', 'addr', 'show'])).stdout);
  const hasDummy = addrs.some((a) => a.ifname === IPVS_DUMMY) || (await dummyExists(run));
  const listeners: Listener[] = [];
  for (const [file, proto] of [
    ['tcp', 'TCP'],
    ['tcp6', 'TCP'],
    ['udp', 'UDP'],
    ['udp6', 'UDP'],
  ] as const) {
    const text = await readText(run, `/proc/net/${file}`);
    if (text !== null) listeners.push(...parseProcNet(text, proto));
  }
  const ipvs = await readText(run, '/proc/net/ip_vs');
  const sysctl = async (name: string) => {
    const t = await readText(run, `/proc/sys/net/ipv4/conf/all/${name}`);
    return t === null ? null : parseSysctl(t);
  };
  return {
    addresses: [...new Set(addrs.filter((a) => a.ifname !== IPVS_DUMMY).map((a) => a.address))],
    ipvsAddresses: hasDummy ? addrs.filter((a) => a.ifname === IPVS_DUMMY).map((a) => a.address) : null,
    virtualServers: ipvs === null ? null : parseProcIpvs(ipvs),
    listeners,
    arpIgnore: await sysctl('arp_ignore'),
    arpAnnounce: await sysctl('arp_announce'),
  };
}

async function dummyExists(run: CommandRunner): Promise<boolean> {
  return (await run('ip', ['link', 'show', 'dev', IPVS_DUMMY], { allowFailure: true })).code === 0;
}
