// Public surface of the configuration package: decode a file, build/validate
// the resolved configuration, and derive what a datapath needs.

export * from './types.js';
export { parseDuration, formatDuration, durationToMillis, DurationParseError, type Duration } from './duration.js';
export {
  defaultV1Alpha1,
  setDefaultsV1Alpha1,
  zeroV1Alpha1,
  PROXY_HEALTHZ_PORT,
  PROXY_STATUS_PORT,
} from './defaults.js';
export { decodeConfigFile, type DecodedConfig } from './decode.js';
export { encodeConfigYAML } from './encode.js';
export { v1alpha1ToResolved, resolvedToV1Alpha1, platformApplyDefaults, masqueradeBitOf, timingOf } from './convert.js';
export { validateConfig, IPVS_SCHEDULERS, VALID_PROXY_MODES, LOCAL_MODES, type ValidationResult } from './validate.js';
export { ConfigValidationError, formatFieldError, type FieldError } from './field.js';
export { expandNodePortAddresses, nodePortAddressesForFamily, resolveDataplaneConfig } from './nodeport.js';
export { splitHostPort, appendPortIfNeeded } from './hostport.js';
export { parseFeatureGates, parseGoBool, KNOWN_FEATURE_GATES } from './features.js';
export { resolveNodeName } from './nodename.js';
export { detectNodeIPs, type NodeIPs } from './nodeips.js';
