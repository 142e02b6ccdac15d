// The v1alpha1 configuration as YAML, as `--write-config-to` writes it: keys
// sorted at every level (upstream goes JSON -> YAML through a map, which sorts),
// durations as Go prints them, and YAML 1.1 quoting so that strings such as
// "on" or "yes" read back as strings.

import { stringify } from 'yaml';
import type { KubeProxyConfigurationV1Alpha1 } from './types.js';

export function encodeConfigYAML(config: KubeProxyConfigurationV1Alpha1): string {
  const logging = { ...config.logging };
  if (!logging.vmodule || logging.vmodule.length === 0) delete logging.vmodule;
  const out: Partial<KubeProxyConfigurationV1Alpha1> = { ...config, logging };
  // Fields tagged omitempty upstream.
  if (Object.keys(config.featureGates).length === 0) delete out.featureGates;
  if (!config.windowsRunAsService) delete out.windowsRunAsService;
  return stringify(out, { version: '1.1', sortMapEntries: true, lineWidth: 0 });
}
