// Where a stopped proxy's rules send its datapath canary (src/core/canary.ts),
// read from the text the kernel lists them in, for `diff` when the proxy's
// /statusz cannot say (the listener's port is chosen at each start). Both
// families: IPv4 endpoints print as ip:port, IPv6 ones as [ip]:port.

/** "[ip6]:port" or "ip4:port", as the rules print an endpoint. */
const ENDPOINT = String.raw`(?:\[([0-9A-Fa-f:.]+)\]|(\d+\.\d+\.\d+\.\d+)):(\d+)`;

/** The (ip, port) an ENDPOINT matched. */
function hostPort(m: RegExpExecArray | null): readonly [string, number] | null {
  return m ? [(m[1] ?? m[2])!, Number(m[3])] : null;
}

/** The canary's endpoint in `iptables-save -t nat` (or ip6tables-save) output. */
export function canaryEndpointInIptablesSave(text: string): readonly [string, number] | null {
  return hostPort(new RegExp(String.raw`canary\/datapath.*--to-destination ${ENDPOINT}`).exec(text));
}

/**
 * The canary's endpoint in `nft list table ip kube-proxy` (or ip6): the chain
 * named after the canary that holds the dnat, which is the endpoint chain in
 * upstream's layout and the service chain in the lean one.
 */
export function canaryEndpointInNftTable(text: string): readonly [string, number] | null {
  const chain = String.raw`chain \S*kube-proxy-ts\.canary\/datapath\S*[^}]*?dnat (?:ip6? )?to `;
  return hostPort(new RegExp(chain + ENDPOINT).exec(text));
}
