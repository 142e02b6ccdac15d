// The default a flag's help shows is the real one: for each flag, the value
// the defaults module gives the field it sets, written the way pflag prints a
// default. The field of each flag is spelt out here again, from upstream's
// AddFlags, rather than read from the flag table, so a flag pointed at the
// wrong field fails too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultV1Alpha1, PROXY_HEALTHZ_PORT, PROXY_STATUS_PORT } from '../core/config/defaults.js';
import { DEFAULT_EBPF_OPTIONS } from '../dataplane/ebpf/options.js';
import { parseFlagValues } from './flagparse.js';
import { FLAGS } from './flags.js';
import { parseCommandLine, type RunCommand } from './options.js';

const d = defaultV1Alpha1();
const logOptions = d.logging.options ?? {};

/** Flag -> its default in the file's form (durations as Go text, lists and maps as they are). */
const EXPECTED: Readonly<Record<string, unknown>> = {
  config: '',
  'write-config-to': '',
  cleanup: false,
  'feature-gates': d.featureGates,
  kubeconfig: d.clientConnection.kubeconfig,
  master: '',
  'service-proxy-name': '',
  manifests: '',
  'service-traffic-metrics': 0,
  'datapath-canary': true,
  'datapath-canary-interval': '5s',
  'handover-drain-period': '1m0s',
  'early-sync-after': '500ms',
  'ebpf-pin-path': DEFAULT_EBPF_OPTIONS.pinRoot,
  'ebpf-attach': DEFAULT_EBPF_OPTIONS.attach,
  'ebpf-lb-algorithm': DEFAULT_EBPF_OPTIONS.algorithm,
  'ebpf-maglev-table-size': DEFAULT_EBPF_OPTIONS.maglevM,
  'ebpf-socket-lb-cgroup': DEFAULT_EBPF_OPTIONS.socketLBCgroup,
  'ebpf-xdp': DEFAULT_EBPF_OPTIONS.xdp,
  'ebpf-lb-mode': DEFAULT_EBPF_OPTIONS.lbMode,
  'kube-api-content-type': d.clientConnection.contentType,
  'kube-api-burst': d.clientConnection.burst,
  'kube-api-qps': d.clientConnection.qps,
  'hostname-override': d.hostnameOverride,
  'bind-address': d.bindAddress,
  'healthz-bind-address': d.healthzBindAddress,
  'metrics-bind-address': d.metricsBindAddress,
  'bind-address-hard-fail': d.bindAddressHardFail,
  profiling: d.enableProfiling,
  'show-hidden-metrics-for-version': d.showHiddenMetricsForVersion,
  'init-only': false,
  'proxy-mode': d.mode,
  'iptables-masquerade-bit': d.iptables.masqueradeBit,
  'masquerade-all': d.iptables.masqueradeAll,
  'iptables-localhost-nodeports': d.iptables.localhostNodePorts,
  'iptables-sync-period': d.iptables.syncPeriod,
  'iptables-min-sync-period': d.iptables.minSyncPeriod,
  // Upstream's four sync-period flags start from the one internal pair, which mode "" takes from iptables.
  'ipvs-sync-period': d.iptables.syncPeriod,
  'ipvs-min-sync-period': d.iptables.minSyncPeriod,
  'ipvs-scheduler': d.ipvs.scheduler,
  'ipvs-exclude-cidrs': d.ipvs.excludeCIDRs ?? [],
  'ipvs-strict-arp': d.ipvs.strictARP,
  'ipvs-tcp-timeout': d.ipvs.tcpTimeout,
  'ipvs-tcpfin-timeout': d.ipvs.tcpFinTimeout,
  'ipvs-udp-timeout': d.ipvs.udpTimeout,
  'detect-local-mode': d.detectLocalMode,
  'pod-bridge-interface': d.detectLocal.bridgeInterface,
  'pod-interface-name-prefix': d.detectLocal.interfaceNamePrefix,
  'cluster-cidr': d.clusterCIDR,
  'nodeport-addresses': d.nodePortAddresses ?? [],
  'oom-score-adj': d.oomScoreAdj,
  'conntrack-max-per-core': d.conntrack.maxPerCore,
  'conntrack-min': d.conntrack.min,
  'conntrack-tcp-timeout-established': d.conntrack.tcpEstablishedTimeout,
  'conntrack-tcp-timeout-close-wait': d.conntrack.tcpCloseWaitTimeout,
  'conntrack-tcp-be-liberal': d.conntrack.tcpBeLiberal,
  'conntrack-udp-timeout': d.conntrack.udpTimeout,
  'conntrack-udp-timeout-stream': d.conntrack.udpStreamTimeout,
  'config-sync-period': d.configSyncPeriod,
  'healthz-port': PROXY_HEALTHZ_PORT,
  'metrics-port': PROXY_STATUS_PORT,
  'log-flush-frequency': d.logging.flushFrequency,
  'logging-format': d.logging.format,
  v: d.logging.verbosity,
  vmodule: d.logging.vmodule ?? [],
  'log-text-split-stream': logOptions.text?.splitStream ?? false,
  'log-text-info-buffer-size': logOptions.text?.infoBufferSize,
  'log-json-split-stream': logOptions.json?.splitStream ?? false,
  'log-json-info-buffer-size': logOptions.json?.infoBufferSize,
  help: false,
  version: false,
};

/** How pflag prints a default of this shape (lists in brackets, maps as k=v, vmodule as pattern=N). */
function pflagText(name: string, v: unknown): string {
  if (name === 'vmodule')
    return (v as { filePattern: string; verbosity: number }[]).map((m) => `${m.filePattern}=${m.verbosity}`).join(',');
  if (Array.isArray(v)) return `[${v.join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return Object.entries(v)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, on]) => `${k}=${String(on)}`)
      .join(',');
  }
  return String(v);
}

/** A copy without the fields that hold false or an empty list: given, they mean what leaving them out means. */
function withoutEmpty(v: unknown): unknown {
  if (Array.isArray(v) || v === null || typeof v !== 'object') return v;
  const kept = Object.entries(v).filter(([, x]) => x !== false && !(Array.isArray(x) && x.length === 0));
  return Object.fromEntries(kept.map(([k, x]) => [k, withoutEmpty(x)]));
}

test('every flag has an expected default here, and no entry names a flag that does not exist', () => {
  assert.deepEqual(Object.keys(EXPECTED).sort(), FLAGS.map((f) => f.name).sort());
});

test("each flag's help default is the defaults module's value", () => {
  for (const f of FLAGS) {
    assert.equal(f.defValue, pflagText(f.name, EXPECTED[f.name]), `--${f.name}`);
  }
});

test('the help shows exactly the defaults that are not zero, quoting strings as pflag does', async () => {
  const help = (
    (await parseCommandLine(['--help'], { readFile: () => Promise.reject(new Error('no file')) })) as {
      text: string;
    }
  ).text;
  const shown = new Map<string, string>();
  for (const line of help.split('\n')) {
    const m = /^\s+(?:-\w, )?--([\w-]+).*?\(default (.*?)\)(?: \(DEPRECATED.*)?$/.exec(line);
    if (m) shown.set(m[1]!, m[2]!);
  }
  for (const f of FLAGS) {
    const text = pflagText(f.name, EXPECTED[f.name]);
    const zero = ['', '0', '0s', 'false', '[]'].includes(text);
    const want = zero ? undefined : f.kind === 'string' ? `"${text}"` : text;
    assert.equal(shown.get(f.name), want, `--${f.name}`);
  }
});

test('giving a flag its shown default on the command line parses, and leaves every default as it was', async () => {
  const deps = { readFile: () => Promise.reject(new Error('no file')) };
  const plain = (await parseCommandLine([], deps)) as RunCommand;
  for (const f of FLAGS) {
    if (f.name === 'help' || f.name === 'version') continue; // they print instead of running
    // An empty list is given as an empty value; the bracketed form is only how pflag prints it.
    const raw = f.defValue === '[]' ? '' : f.defValue;
    assert.doesNotThrow(() => parseFlagValues(new Map([[f.name, [raw]]])), `--${f.name}`);
    if (f.name === 'cluster-cidr') continue; // a given --cluster-cidr is split on commas: "" is one empty CIDR, as upstream
    const cmd = (await parseCommandLine([`--${f.name}=${raw}`], deps)) as RunCommand;
    assert.deepEqual(cmd.flagz, { ...plain.flagz }, `--${f.name}`);
    assert.deepEqual(cmd.ebpf, plain.ebpf, `--${f.name}`);
    assert.deepEqual(withoutEmpty(cmd.config), withoutEmpty(plain.config), `--${f.name}`);
  }
});
