// Feature gates this program knows by name. Upstream rejects unknown gates;
// we accept them with a warning instead, because the full Kubernetes gate list
// is long and changes every release, and rejecting a gate that upstream
// accepts would break drop-in use. Gates that change our behaviour are read
// by the code that implements them.

import { ProxyError } from '../errors.js';

export const KNOWN_FEATURE_GATES: ReadonlySet<string> = new Set([
  'AllAlpha',
  'AllBeta',
  'AllowServiceExternalIPs',
  'ComponentFlagz',
  'ComponentStatusz',
  'ContextualLogging',
  'KubeProxyIPVS',
  'KubeProxyNFTablesLocalhostNodePorts',
  'LoggingAlphaOptions',
  'LoggingBetaOptions',
  'MultiCIDRServiceAllocator',
  'NFTablesNetlink',
  'NFTablesProxyMode',
  'PreferSameTrafficDistribution',
  'ServiceTrafficDistribution',
  'TopologyAwareHints',
  'WatchListClient',
]);

/** Parse "--feature-gates A=true,B=false"; throws Error naming the bad pair. */
export function parseFeatureGates(value: string, into: Record<string, boolean>): void {
  for (const raw of value.split(',')) {
    const pair = raw.trim();
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    if (eq < 0) throw new ProxyError('KPT_INPUT_INVALID', `missing bool value for ${pair}`);
    const key = pair.slice(0, eq).trim();
    const b = parseGoBool(pair.slice(eq + 1).trim());
    if (b === null)
      throw new ProxyError(
        'KPT_INPUT_INVALID',
        `invalid value of ${key}=${pair.slice(eq + 1)}, err: strconv.ParseBool: parsing ${JSON.stringify(pair.slice(eq + 1))}: invalid syntax`,
      );
    into[key] = b;
  }
}

/** Go strconv.ParseBool. */
export function parseGoBool(s: string): boolean | null {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(s)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(s)) return false;
  return null;
}

type Stage = 'Alpha' | 'Beta' | 'GA';

/** Default and stage of the gates our code reads (upstream's values for the release we follow). */
const GATE_SPECS: Readonly<Record<string, { readonly default: boolean; readonly stage: Stage }>> = {
  // k8s.io/component-base/zpages/features: beta and on by default since 1.36.
  ComponentFlagz: { default: true, stage: 'Beta' },
  ComponentStatusz: { default: true, stage: 'Beta' },
  // KEP-5707: false drops Service spec.externalIPs before any mode sees them.
  AllowServiceExternalIPs: { default: true, stage: 'GA' },
  // KEP-5495: IPVS mode needs it; deprecated in 1.37, still on by default.
  KubeProxyIPVS: { default: true, stage: 'GA' },
  // Upstream's switch from the nft binary to netlink. Known, without effect
  // here: nftables mode always writes and reads its table over netlink.
  NFTablesNetlink: { default: false, stage: 'Alpha' },
  // client-go's (kube components take client-go's gates): beta since 1.30, on
  // by default since 1.35. The informers get their state by a streaming
  // watch-list where the server offers it.
  WatchListClient: { default: true, stage: 'Beta' },
  // component-base logs/api/v1: the split-stream and info-buffer logging options need it.
  LoggingAlphaOptions: { default: false, stage: 'Alpha' },
  // KEP-6032: alpha in 1.37, beta and on by default in 1.38. nftables mode
  // serves TCP NodePorts on loopback through a userspace relay when
  // nodePortAddresses names loopback (src/platform/nftables/localhost.ts).
  KubeProxyNFTablesLocalhostNodePorts: { default: true, stage: 'Beta' },
};

/**
 * Whether a gate this program reads is on: an explicit setting wins, then
 * AllAlpha / AllBeta for gates of that stage (as upstream's featuregate),
 * then the default. Gates we do not read are off.
 */
export function featureGateEnabled(gates: Readonly<Record<string, boolean>>, name: string): boolean {
  const explicit = gates[name];
  if (explicit !== undefined) return explicit;
  const spec = GATE_SPECS[name];
  if (!spec) return false;
  if (spec.stage === 'Alpha' && gates['AllAlpha'] !== undefined) return gates['AllAlpha'];
  if (spec.stage === 'Beta' && gates['AllBeta'] !== undefined) return gates['AllBeta'];
  return spec.default;
}
