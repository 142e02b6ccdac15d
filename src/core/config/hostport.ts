// Go net.SplitHostPort and upstream proxyutil.AppendPortIfNeeded, kept exact
// because validation messages and defaulting depend on their corner cases
// ("0.0.0.0" has no port; "::1" has too many colons; "[::1]:80" is fine).

import { parseIP } from '../ip.js';

export interface HostPort {
  readonly host: string;
  readonly port: string;
}

/** Go net.SplitHostPort; null where Go returns an error. */
export function splitHostPort(hostport: string): HostPort | null {
  const i = hostport.lastIndexOf(':');
  if (i < 0) return null; // missing port in address
  let host: string;
  if (hostport.startsWith('[')) {
    const end = hostport.indexOf(']');
    if (end < 0) return null; // missing ']'
    if (end + 1 === hostport.length) return null; // missing port
    if (end + 1 !== i) return null; // "[h]x:p" or too many colons
    host = hostport.slice(1, end);
    if (host.includes('[') || host.includes(']')) return null;
  } else {
    host = hostport.slice(0, i);
    if (host.includes(':')) return null; // too many colons
    if (host.includes('[') || host.includes(']')) return null;
  }
  const port = hostport.slice(i + 1);
  if (port.includes('[') || port.includes(']')) return null;
  return { host, port };
}

/** "ip" -> "ip:port" / "[ip]:port"; anything else (already ip:port, invalid) unchanged. */
export function appendPortIfNeeded(addr: string, port: number): string {
  if (splitHostPort(addr)) return addr;
  const ip = parseIP(addr);
  if (!ip) return addr;
  return ip.family === 'IPv4' ? `${addr}:${port}` : `[${addr}]:${port}`;
}

/** Go strconv.Atoi on a port string, range-checked 1..65535; null if invalid. */
export function parsePort(port: string): number | null {
  if (!/^[+-]?[0-9]+$/.test(port)) return null;
  const n = Number(port);
  return Number.isSafeInteger(n) && n >= 1 && n <= 65535 ? n : null;
}
