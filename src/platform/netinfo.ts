// The host's own addresses, as the proxier needs them: local IPs per family
// (for nodePortAddresses matching) and whether a family is usable at all.
import { existsSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { normalizeIP } from '../core/ip.js';
import type { IPFamily } from '../core/types.js';

/** Every address configured on this host's interfaces for one family, normalised. */
export function localIPs(family: IPFamily): string[] {
  const out = new Set<string>();
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) {
      if ((a.family === 'IPv4') !== (family === 'IPv4')) continue;
      const ip = normalizeIP(a.address);
      if (ip) out.add(ip);
    }
  }
  return [...out].sort();
}

/** Upstream's check: IPv6 is usable when the kernel exposes /proc/net/if_inet6. */
export function ipv6Supported(): boolean {
  return existsSync('/proc/net/if_inet6');
}
