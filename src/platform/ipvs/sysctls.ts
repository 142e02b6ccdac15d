// The sysctls IPVS mode needs (upstream ipvs NewProxier): IPVS connections
// tracked by conntrack (so iptables' masquerade sees them), connections to a
// deleted real server expired on their next packet, persistence templates of
// a weight-0 real server expired, forwarding on, and with --ipvs-strict-arp
// no ARP answers for kube-ipvs0's addresses from other links. conn_reuse_mode
// is set to 0 only on kernels between 4.1 and 5.9, where reuse caused 1 s
// stalls (upstream issue #93297) and 0 is the fix; newer kernels keep theirs.
import { release } from 'node:os';
import type { Sysctl } from '../iptables/sysctl.js';

export const IPVS_SYSCTLS = {
  conntrack: 'net/ipv4/vs/conntrack',
  connReuseMode: 'net/ipv4/vs/conn_reuse_mode',
  expireNodestConn: 'net/ipv4/vs/expire_nodest_conn',
  expireQuiescentTemplate: 'net/ipv4/vs/expire_quiescent_template',
  ipForward: 'net/ipv4/ip_forward',
  arpIgnore: 'net/ipv4/conf/all/arp_ignore',
  arpAnnounce: 'net/ipv4/conf/all/arp_announce',
} as const;

/** [major, minor] of a kernel release string ("6.1.0-57-amd64" -> [6, 1]). */
export function kernelVersion(rel: string = release()): [number, number] | null {
  const m = /^(\d+)\.(\d+)/.exec(rel);
  return m ? [Number(m[1]), Number(m[2])] : null;
}

/** The settings for this kernel and flags, in the order upstream applies them. */
export function ipvsSysctlPlan(strictARP: boolean, kernel: [number, number] | null): Array<[string, string]> {
  const at = (a: number, b: number) => kernel !== null && (kernel[0] > a || (kernel[0] === a && kernel[1] >= b));
  const out: Array<[string, string]> = [[IPVS_SYSCTLS.conntrack, '1']];
  if (at(4, 1) && !at(5, 9)) out.push([IPVS_SYSCTLS.connReuseMode, '0']);
  out.push(
    [IPVS_SYSCTLS.expireNodestConn, '1'],
    [IPVS_SYSCTLS.expireQuiescentTemplate, '1'],
    [IPVS_SYSCTLS.ipForward, '1'],
  );
  if (strictARP) out.push([IPVS_SYSCTLS.arpIgnore, '1'], [IPVS_SYSCTLS.arpAnnounce, '2']);
  return out;
}

/** Write each value that differs (upstream EnsureSysctl); reports each write. */
export async function ensureIpvsSysctls(
  sysctl: Sysctl,
  _family: string,
  strictARP: boolean,
  report: (fields: Record<string, unknown>, msg: string) => void = () => {},
  kernel: [number, number] | null = kernelVersion(),
): Promise<void> {
  for (const [name, value] of ipvsSysctlPlan(strictARP, kernel)) {
    const cur = await sysctl.get(name);
    if (cur === value) continue;
    await sysctl.set(name, value);
    report({ name, value, previous: cur }, 'Set sysctl');
  }
}
