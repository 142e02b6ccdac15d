// The flag records of flagtable.ts and datapathflags.ts made usable: each
// gets its default (what its field holds in the target the command line
// starts from), its help type name and an `apply` that writes a parsed value
// to its field. Also the help text (pflag's layout) and pflag's text for a
// value, which /flagz shows.

import { v1alpha1ToResolved } from '../core/config/convert.js';
import { defaultV1Alpha1, PROXY_HEALTHZ_PORT, PROXY_STATUS_PORT } from '../core/config/defaults.js';
import { formatDuration, MINUTE, parseDuration, SECOND } from '../core/config/duration.js';
import type { ResolvedConfig, VModuleItem } from '../core/config/types.js';
import { BugError } from '../core/errors.js';
import { DEFAULT_EBPF_OPTIONS } from '../dataplane/ebpf/options.js';
import { DATAPATH_FLAGS } from './datapathflags.js';
import {
  COMMAND_FLAGS,
  HELP_FLAGS,
  LOGGING_FLAGS,
  type CommandOptions,
  type FlagKind,
  type FlagSpec,
  type FlagTarget,
} from './flagtable.js';

export type { CommandOptions, FlagKind, FlagTarget } from './flagtable.js';

export type FlagValue = string | number | boolean | string[] | Record<string, boolean> | VModuleItem[];

export interface FlagDef extends FlagSpec {
  /** Type shown in help ("" for booleans), as pflag's UnquoteUsage. */
  readonly typeName: string;
  /** The default as pflag's Value.String() prints it; help leaves zero values out. */
  readonly defValue: string;
  readonly apply: (t: FlagTarget, v: FlagValue) => void;
}

const TYPE_NAMES: Readonly<Record<FlagKind, string>> = {
  string: 'string',
  bool: '',
  int32: 'int32',
  float32: 'float32',
  duration: 'duration',
  strings: 'strings',
  ip: 'ip',
  ipport: 'ipport',
  mapStringBool: 'mapStringBool',
  level: 'Level',
  moduleSpec: 'pattern=N,...',
  proxyMode: 'ProxyMode',
  localMode: 'LocalMode',
  quantity: 'quantity',
  version: 'version[=true]',
};

/** The options' values before any flag; the sync periods start from the configuration's. */
export function defaultOptions(cfg: ResolvedConfig): CommandOptions {
  return {
    configFile: '',
    writeConfigTo: '',
    cleanup: false,
    initOnly: false,
    master: '',
    serviceProxyName: '',
    manifestsDir: '',
    serviceTrafficMetrics: 0,
    datapathCanary: true,
    datapathCanaryInterval: 5 * SECOND,
    handoverDrainPeriod: MINUTE,
    earlySyncAfter: SECOND / 2,
    healthzPort: PROXY_HEALTHZ_PORT,
    metricsPort: PROXY_STATUS_PORT,
    hostnameOverride: '',
    iptablesSyncPeriod: cfg.syncPeriod,
    iptablesMinSyncPeriod: cfg.minSyncPeriod,
    ipvsSyncPeriod: cfg.syncPeriod,
    ipvsMinSyncPeriod: cfg.minSyncPeriod,
    clusterCIDRs: '',
    help: false,
    version: false,
    ebpfPinPath: DEFAULT_EBPF_OPTIONS.pinRoot,
    ebpfAttach: DEFAULT_EBPF_OPTIONS.attach,
    ebpfLbAlgorithm: DEFAULT_EBPF_OPTIONS.algorithm,
    ebpfMaglevTableSize: DEFAULT_EBPF_OPTIONS.maglevM,
    ebpfSocketLBCgroup: '',
    ebpfXdp: DEFAULT_EBPF_OPTIONS.xdp,
    ebpfLbMode: DEFAULT_EBPF_OPTIONS.lbMode,
  };
}

/** Upstream newKubeProxyConfiguration: the defaulted v1alpha1 configuration (mode "") as the internal type. */
export function initialFlagTarget(): FlagTarget {
  const cfg = v1alpha1ToResolved(defaultV1Alpha1());
  return { cfg, opts: defaultOptions(cfg) };
}

/** pflag's String() of a typed flag value; a field that is not there yet prints as the kind's zero. */
export function flagValueText(kind: FlagKind, v: FlagValue | null | undefined): string {
  switch (kind) {
    case 'bool':
    case 'version':
      return String((v as boolean | undefined) ?? false);
    case 'duration':
      return formatDuration((v as number | null | undefined) ?? 0);
    case 'strings':
      return `[${((v as string[] | undefined) ?? []).join(',')}]`;
    case 'mapStringBool':
      return Object.entries((v as Record<string, boolean> | undefined) ?? {})
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([k, on]) => `${k}=${on}`)
        .join(',');
    case 'moduleSpec':
      return ((v as VModuleItem[] | undefined) ?? []).map((m) => `${m.filePattern}=${m.verbosity}`).join(',');
    case 'int32':
    case 'float32':
    case 'level':
      return String(v ?? 0);
    default:
      return String(v ?? '');
  }
}

/** The object holding a path's last field, and that field's name; missing objects on the way are created. */
function fieldOf(t: FlagTarget, path: string): { holder: Record<string, unknown>; key: string } {
  const keys = path.split('.');
  const key = keys.pop()!;
  let holder = t as unknown as Record<string, unknown>;
  for (const k of keys) holder = (holder[k] ??= {}) as Record<string, unknown>;
  return { holder, key };
}

/**
 * Writes a parsed value to the flag's field with the Set semantics of the
 * flag's pflag type: an empty ip or ipport sets nothing (utilflag.IPVar and
 * IPPortVar), feature gates merge into the gates already there, --vmodule
 * entries add to those already there; everything else replaces.
 */
function applyValue(f: FlagSpec, t: FlagTarget, v: FlagValue): void {
  if ((f.kind === 'ip' || f.kind === 'ipport') && v === '') return;
  const { holder, key } = fieldOf(t, f.to);
  if (f.kind === 'mapStringBool') Object.assign(holder[key] as Record<string, boolean>, v);
  else if (f.kind === 'moduleSpec')
    holder[key] = [...((holder[key] as VModuleItem[] | undefined) ?? []), ...(v as VModuleItem[])];
  else if (f.stored === 'trimmed') holder[key] = (v as string).trim();
  else if (f.stored === 'goDuration') holder[key] = formatDuration(v as number);
  else holder[key] = v;
}

/** What the flag's field holds in t, as the flag's parsed value (undefined where nothing is there yet). */
function readValue(f: FlagSpec, t: FlagTarget): FlagValue | undefined {
  let v: unknown = t;
  for (const k of f.to.split('.')) v = (v as Record<string, unknown> | undefined)?.[k];
  if (v === null || v === undefined) return undefined;
  return f.stored === 'goDuration' ? parseDuration(v as string) : (v as FlagValue);
}

/** In upstream's order of registration, which parsing, applying and /flagz follow. */
const FLAG_TABLE: readonly FlagSpec[] = [...COMMAND_FLAGS, ...DATAPATH_FLAGS, ...LOGGING_FLAGS, ...HELP_FLAGS];

function buildFlags(): FlagDef[] {
  const initial = initialFlagTarget();
  const names = new Set<string>();
  return FLAG_TABLE.map((f) => {
    if (names.has(f.name)) throw new BugError(`flag --${f.name} is declared twice`);
    names.add(f.name);
    return {
      ...f,
      typeName: TYPE_NAMES[f.kind],
      defValue: flagValueText(f.kind, readValue(f, initial)),
      apply: (t: FlagTarget, v: FlagValue) => applyValue(f, t, v),
    };
  });
}

export const FLAGS: readonly FlagDef[] = buildFlags();

export const FLAGS_BY_NAME: ReadonlyMap<string, FlagDef> = new Map(FLAGS.map((f) => [f.name, f]));
export const FLAGS_BY_SHORT: ReadonlyMap<string, FlagDef> = new Map(
  FLAGS.filter((f) => f.short !== undefined).map((f) => [f.short!, f]),
);

/** Flags that take no separate value argument (pflag NoOptDefVal). */
export function isNoValueFlag(f: FlagDef): boolean {
  return f.kind === 'bool' || f.kind === 'version';
}

/** pflag-style usage text: one line per flag, sorted by name, defaults shown. */
export function formatFlagUsages(): string {
  const rows = [...FLAGS]
    .sort((a, b2) => a.name.localeCompare(b2.name))
    .map((f) => {
      const left = `${f.short ? `  -${f.short}, ` : '      '}--${f.name}${f.typeName ? ` ${f.typeName}` : ''}`;
      let usage = f.usage;
      // pflag omits zero defaults ("", "0", "0s", "false", an empty list).
      if (!['', '0', '0s', 'false', '[]'].includes(f.defValue)) {
        usage += f.kind === 'string' ? ` (default "${f.defValue}")` : ` (default ${f.defValue})`;
      }
      if (f.deprecated) usage += ` (DEPRECATED: ${f.deprecated})`;
      return { left, usage };
    });
  const width = Math.max(...rows.map((r) => r.left.length)) + 3;
  // Continuation lines of multi-line usages line up under the first, as pflag.
  return rows.map((r) => r.left.padEnd(width) + r.usage.replaceAll('\n', `\n${' '.repeat(width)}`)).join('\n') + '\n';
}
