// The node name kube-proxy uses (upstream nodeutil.GetHostname): the
// hostnameOverride if set, else the OS hostname; trimmed and lower-cased; an
// empty result is an error. Pure: main passes the OS hostname in.

import { ProxyError } from '../errors.js';

export function resolveNodeName(hostnameOverride: string, osHostname: string): string {
  const name = (hostnameOverride.length > 0 ? hostnameOverride : osHostname).trim();
  if (name.length === 0) throw new ProxyError('KPT_CONFIG_INVALID', 'empty hostname is invalid');
  return name.toLowerCase();
}
