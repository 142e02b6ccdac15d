// The shape of v1alpha1 KubeProxyConfiguration as a table, so that one walker
// can decode it strictly (unknown and duplicate fields are errors) or leniently
// (they are ignored), with Go encoding/json's type rules: a string field never
// accepts a number, an int32 field rejects fractions and overflow, null leaves
// the zero value.

export type FieldKind =
  | 'string'
  | 'bool'
  | 'int32'
  | 'float'
  /** Go metav1.Duration: a JSON string that time.ParseDuration accepts. */
  | 'duration'
  /** component-base TimeOrMetaDuration: a duration string or integer nanoseconds. */
  | 'durationOrInt'
  /** resource.Quantity: a string or a number; kept as a string. */
  | 'quantity'
  | 'stringList'
  | 'boolMap';

export type Schema = { readonly [field: string]: FieldKind | Schema | ListOf };

/** A list of objects, e.g. logging.vmodule. */
export interface ListOf {
  readonly listOf: Schema;
}

const outputRouting: Schema = { splitStream: 'bool', infoBufferSize: 'quantity' };

export const LOGGING_SCHEMA: Schema = {
  format: 'string',
  flushFrequency: 'durationOrInt',
  verbosity: 'int32',
  vmodule: { listOf: { filePattern: 'string', verbosity: 'int32' } },
  options: { text: outputRouting, json: outputRouting },
};

export const V1ALPHA1_SCHEMA: Schema = {
  apiVersion: 'string',
  kind: 'string',
  featureGates: 'boolMap',
  clientConnection: {
    kubeconfig: 'string',
    acceptContentTypes: 'string',
    contentType: 'string',
    qps: 'float',
    burst: 'int32',
  },
  logging: LOGGING_SCHEMA,
  hostnameOverride: 'string',
  bindAddress: 'string',
  healthzBindAddress: 'string',
  metricsBindAddress: 'string',
  bindAddressHardFail: 'bool',
  enableProfiling: 'bool',
  showHiddenMetricsForVersion: 'string',
  mode: 'string',
  iptables: {
    masqueradeBit: 'int32',
    masqueradeAll: 'bool',
    localhostNodePorts: 'bool',
    syncPeriod: 'duration',
    minSyncPeriod: 'duration',
  },
  ipvs: {
    syncPeriod: 'duration',
    minSyncPeriod: 'duration',
    scheduler: 'string',
    excludeCIDRs: 'stringList',
    strictARP: 'bool',
    tcpTimeout: 'duration',
    tcpFinTimeout: 'duration',
    udpTimeout: 'duration',
  },
  nftables: { masqueradeBit: 'int32', masqueradeAll: 'bool', syncPeriod: 'duration', minSyncPeriod: 'duration' },
  winkernel: {
    networkName: 'string',
    sourceVip: 'string',
    enableDSR: 'bool',
    rootHnsEndpointName: 'string',
    forwardHealthCheckVip: 'bool',
  },
  detectLocalMode: 'string',
  detectLocal: { bridgeInterface: 'string', interfaceNamePrefix: 'string' },
  clusterCIDR: 'string',
  nodePortAddresses: 'stringList',
  oomScoreAdj: 'int32',
  conntrack: {
    maxPerCore: 'int32',
    min: 'int32',
    tcpEstablishedTimeout: 'duration',
    tcpCloseWaitTimeout: 'duration',
    tcpBeLiberal: 'bool',
    udpTimeout: 'duration',
    udpStreamTimeout: 'duration',
  },
  configSyncPeriod: 'duration',
  portRange: 'string',
  windowsRunAsService: 'bool',
};
