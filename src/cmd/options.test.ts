import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hasCode } from '../core/errors.js';
import { SECOND } from '../core/config/duration.js';
import { encodeConfigYAML, parseCommandLine, type ParsedCommand, type RunCommand } from './options.js';
import { FLAGS } from './flags.js';

const HEAD = 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n';

function files(map: Record<string, string>) {
  return {
    readFile: async (p: string) => {
      if (!(p in map)) throw new Error(`ENOENT: no such file or directory, open '${p}'`);
      return map[p]!;
    },
  };
}

async function run(argv: string[], fs: Record<string, string> = {}): Promise<RunCommand> {
  const r: ParsedCommand = await parseCommandLine(argv, files(fs), '1.2.3');
  assert.equal(r.kind, 'run');
  return r as RunCommand;
}

async function rejects(argv: string[], code: string, re: RegExp, fs: Record<string, string> = {}): Promise<void> {
  await assert.rejects(parseCommandLine(argv, files(fs)), (err: unknown) => {
    assert.ok(hasCode(err, code as never), `code ${String((err as { code?: string }).code)} for ${argv.join(' ')}`);
    assert.match((err as Error).message, re);
    return true;
  });
}

test('no flags: upstream defaults, mode iptables, detect-local ClusterCIDR', async () => {
  const r = await run([]);
  assert.equal(r.mode, 'iptables');
  assert.equal(r.resolved.mode, 'iptables');
  assert.equal(r.resolved.detectLocalMode, 'ClusterCIDR');
  assert.equal(r.resolved.syncPeriod, 30 * SECOND);
  assert.equal(r.resolved.minSyncPeriod, SECOND);
  assert.deepEqual(r.timing, { syncPeriodMs: 30000, minSyncPeriodMs: 1000, configSyncPeriodMs: 900000 });
  assert.equal(r.resolved.healthzBindAddress, '0.0.0.0:10256');
  assert.equal(r.resolved.metricsBindAddress, '127.0.0.1:10249');
  assert.deepEqual(r.actions, { cleanup: false, initOnly: false });
  assert.deepEqual(r.warnings, []);
  assert.equal(r.config.mode, 'iptables');
  assert.equal(r.configFile, undefined);
});

test('pflag forms: --flag=value, --flag value, bool --flag / --flag=false, -v=4 / -v 4 / -v4 / --v=4', async () => {
  const a = await run([
    '--proxy-mode',
    'ipvs',
    '--masquerade-all',
    '--iptables-localhost-nodeports=false',
    '-v=4',
    '--oom-score-adj',
    '-500',
  ]);
  assert.equal(a.resolved.mode, 'ipvs');
  assert.equal(a.resolved.linux.masqueradeAll, true);
  assert.equal(a.resolved.iptables.localhostNodePorts, false);
  assert.equal(a.resolved.logging.verbosity, 4);
  assert.equal(a.resolved.linux.oomScoreAdj, -500);
  for (const v of [['-v', '3'], ['-v3'], ['--v=3'], ['--v', '3']]) {
    assert.equal((await run(v)).resolved.logging.verbosity, 3, v.join(' '));
  }
  const b = await run(['--masquerade-all=true', '--masquerade-all=false', '--cleanup', '--init-only=true']);
  assert.equal(b.resolved.linux.masqueradeAll, false, 'last value wins');
  assert.deepEqual(b.actions, { cleanup: true, initOnly: true });
  // A boolean never consumes the next argument.
  await rejects(['--cleanup', 'false'], 'KPT_FLAG_INVALID', /does not take any arguments, got \["false"\]/);
  // Go int parsing: base prefixes.
  assert.equal((await run(['--conntrack-min=0x10'])).resolved.linux.conntrack.min, 16);
});

test('every flag of the issue exists and is accepted', async () => {
  const names = new Set(FLAGS.map((f) => f.name));
  for (const n of [
    'config',
    'kubeconfig',
    'master',
    'proxy-mode',
    'hostname-override',
    'bind-address',
    'cluster-cidr',
    'healthz-bind-address',
    'metrics-bind-address',
    'masquerade-all',
    'iptables-masquerade-bit',
    'iptables-sync-period',
    'iptables-min-sync-period',
    'iptables-localhost-nodeports',
    'ipvs-scheduler',
    'ipvs-sync-period',
    'ipvs-min-sync-period',
    'ipvs-strict-arp',
    'nodeport-addresses',
    'detect-local-mode',
    'pod-interface-name-prefix',
    'pod-bridge-interface',
    'conntrack-max-per-core',
    'conntrack-min',
    'conntrack-tcp-timeout-established',
    'conntrack-tcp-timeout-close-wait',
    'conntrack-udp-timeout',
    'conntrack-udp-timeout-stream',
    'config-sync-period',
    'cleanup',
    'write-config-to',
    'init-only',
    'feature-gates',
    'v',
    'version',
    'help',
    'kube-api-qps',
    'kube-api-burst',
    'kube-api-content-type',
    'oom-score-adj',
    'conntrack-tcp-be-liberal',
    'ipvs-exclude-cidrs',
    'ipvs-tcp-timeout',
    'ipvs-tcpfin-timeout',
    'ipvs-udp-timeout',
    'healthz-port',
    'metrics-port',
    'bind-address-hard-fail',
    'profiling',
    'logging-format',
  ]) {
    assert.ok(names.has(n), n);
  }
  const r = await run([
    '--kubeconfig=/k',
    '--master=https://a:6443',
    '--hostname-override=Node-A',
    '--bind-address=10.0.0.5',
    '--cluster-cidr=10.244.0.0/16,fd00:10::/48',
    '--healthz-bind-address=10.0.0.5:1234',
    '--metrics-bind-address=0.0.0.0:9999',
    '--iptables-masquerade-bit=10',
    '--ipvs-scheduler=wrr',
    '--ipvs-strict-arp',
    '--nodeport-addresses=primary,10.0.0.0/8',
    '--detect-local-mode=InterfaceNamePrefix',
    '--pod-interface-name-prefix=veth',
    '--pod-bridge-interface=cbr0',
    '--conntrack-max-per-core=0',
    '--conntrack-min=1',
    '--conntrack-tcp-timeout-established=1h',
    '--conntrack-tcp-timeout-close-wait=30m',
    '--conntrack-udp-timeout=30s',
    '--conntrack-udp-timeout-stream=2m',
    '--config-sync-period=1m',
    '--kube-api-qps=7.5',
    '--kube-api-burst=20',
    '--kube-api-content-type=application/json',
    '--conntrack-tcp-be-liberal',
    '--ipvs-exclude-cidrs=10.1.0.0/16',
    '--ipvs-tcp-timeout=5s',
    '--ipvs-tcpfin-timeout=6s',
    '--ipvs-udp-timeout=7s',
    '--bind-address-hard-fail',
    '--profiling',
    '--logging-format=json',
    '--feature-gates=AllAlpha=false,NoSuch=true',
  ]);
  const c = r.resolved;
  assert.equal(r.master, 'https://a:6443');
  assert.equal(c.clientConnection.kubeconfig, '/k');
  assert.equal(c.hostnameOverride, 'node-a');
  assert.equal(c.bindAddress, '10.0.0.5');
  assert.deepEqual(c.detectLocal, {
    bridgeInterface: 'cbr0',
    interfaceNamePrefix: 'veth',
    clusterCIDRs: ['10.244.0.0/16', 'fd00:10::/48'],
  });
  assert.equal(c.detectLocalMode, 'InterfaceNamePrefix');
  assert.equal(c.healthzBindAddress, '10.0.0.5:1234');
  assert.equal(c.metricsBindAddress, '0.0.0.0:9999');
  assert.equal(c.iptables.masqueradeBit, 10);
  assert.equal(c.ipvs.scheduler, 'wrr');
  assert.equal(c.ipvs.strictARP, true);
  assert.deepEqual(c.ipvs.excludeCIDRs, ['10.1.0.0/16']);
  assert.deepEqual([c.ipvs.tcpTimeout, c.ipvs.tcpFinTimeout, c.ipvs.udpTimeout], [5 * SECOND, 6 * SECOND, 7 * SECOND]);
  assert.deepEqual(c.nodePortAddresses, ['primary', '10.0.0.0/8']);
  assert.deepEqual(c.linux.conntrack, {
    maxPerCore: 0,
    min: 1,
    tcpEstablishedTimeout: 3600 * SECOND,
    tcpCloseWaitTimeout: 1800 * SECOND,
    tcpBeLiberal: true,
    udpTimeout: 30 * SECOND,
    udpStreamTimeout: 120 * SECOND,
  });
  assert.equal(c.configSyncPeriod, 60 * SECOND);
  assert.deepEqual(c.clientConnection, {
    kubeconfig: '/k',
    acceptContentTypes: '',
    contentType: 'application/json',
    qps: 7.5,
    burst: 20,
  });
  assert.equal(c.bindAddressHardFail, true);
  assert.equal(c.enableProfiling, true);
  assert.equal(c.logging.format, 'json');
  assert.deepEqual(c.featureGates, { AllAlpha: false, NoSuch: true });
  assert.ok(r.warnings.some((w) => /NoSuch/.test(w)));
});

test('repeated list flags append, feature gates merge', async () => {
  const r = await run([
    '--nodeport-addresses=10.0.0.0/8',
    '--nodeport-addresses',
    'localhost',
    '--feature-gates=A=true',
    '--feature-gates=B=false,A=false',
  ]);
  assert.deepEqual(r.resolved.nodePortAddresses, ['10.0.0.0/8', 'localhost']);
  assert.deepEqual(r.resolved.featureGates, { A: false, B: false });
});

test('--proxy-mode accepts iptables, nftables, ipvs, userspace and "" (iptables)', async () => {
  for (const m of ['iptables', 'nftables', 'ipvs', 'userspace'])
    assert.equal((await run([`--proxy-mode=${m}`])).resolved.mode, m);
  assert.equal((await run(['--proxy-mode='])).resolved.mode, 'iptables');
  await rejects(
    ['--proxy-mode=kernelspace'],
    'KPT_FLAG_INVALID',
    /invalid argument "kernelspace" for "--proxy-mode" flag/,
  );
});

test('modeDefaulted: true only when neither the flag nor the config file chose a mode (KEP-5343 warning)', async () => {
  assert.equal((await run([])).modeDefaulted, true);
  assert.equal((await run(['--proxy-mode='])).modeDefaulted, true, 'an empty flag is no choice');
  assert.equal((await run(['--proxy-mode=iptables'])).modeDefaulted, false, 'iptables asked for explicitly');
  assert.equal((await run(['--proxy-mode=nftables'])).modeDefaulted, false);
  const noMode = await run(['--config=/c'], { '/c': HEAD });
  assert.deepEqual([noMode.mode, noMode.modeDefaulted], ['iptables', true]);
  const fileMode = await run(['--config=/c'], { '/c': `${HEAD}mode: iptables\n` });
  assert.deepEqual([fileMode.mode, fileMode.modeDefaulted], ['iptables', false]);
  const emptyMode = await run(['--config=/c'], { '/c': `${HEAD}mode: ""\n` });
  assert.equal(emptyMode.modeDefaulted, true);
});

test('the alpha logging flags fill logging.options, and win over --config as the other logging flags do', async () => {
  const r = await run([
    '--feature-gates=LoggingAlphaOptions=true',
    '--log-text-split-stream',
    '--log-text-info-buffer-size=64Ki',
    '--log-json-split-stream=false',
    '--log-json-info-buffer-size=512',
  ]);
  assert.deepEqual(r.resolved.logging.options, {
    text: { splitStream: true, infoBufferSize: '64Ki' },
    json: { splitStream: false, infoBufferSize: '512' },
  });
  const file = `${HEAD}featureGates:\n  LoggingAlphaOptions: true\nlogging:\n  options:\n    json:\n      infoBufferSize: 1Mi\n`;
  const withFile = await run(['--config=/c', '--log-json-split-stream'], { '/c': file });
  assert.deepEqual(withFile.resolved.logging.options?.json, { splitStream: true, infoBufferSize: '1Mi' });
  assert.deepEqual(withFile.warnings, [], 'logging flags are not "ignored because --config is given"');
});

test('sync period flags follow the mode as upstream processV1Alpha1Flags', async () => {
  const ipt = await run(['--iptables-sync-period=10s', '--iptables-min-sync-period=2s', '--ipvs-sync-period=99s']);
  assert.deepEqual([ipt.resolved.syncPeriod, ipt.resolved.minSyncPeriod], [10 * SECOND, 2 * SECOND]);
  const nft = await run(['--proxy-mode=nftables', '--iptables-sync-period=10s']);
  assert.equal(nft.resolved.syncPeriod, 10 * SECOND, 'nftables reads the iptables flags');
  assert.equal(nft.config.nftables.syncPeriod, '10s');
  const ipvs = await run([
    '--proxy-mode=ipvs',
    '--iptables-sync-period=10s',
    '--ipvs-sync-period=20s',
    '--ipvs-min-sync-period=0',
  ]);
  assert.deepEqual([ipvs.resolved.syncPeriod, ipvs.resolved.minSyncPeriod], [20 * SECOND, 0]);
  assert.deepEqual([ipvs.config.ipvs.syncPeriod, ipvs.config.ipvs.minSyncPeriod], ['20s', '0s']);
  // Without its own flags, ipvs keeps the defaults converted from the iptables section (upstream quirk).
  const ipvsDefault = await run(['--proxy-mode=ipvs']);
  assert.deepEqual([ipvsDefault.resolved.syncPeriod, ipvsDefault.resolved.minSyncPeriod], [30 * SECOND, SECOND]);
});

test('nftables defaults nodePortAddresses to primary and keeps nftables.masqueradeBit', async () => {
  const r = await run(['--proxy-mode=nftables', '--iptables-masquerade-bit=3', '--masquerade-all']);
  assert.deepEqual(r.resolved.nodePortAddresses, ['primary']);
  assert.equal(r.config.nftables.masqueradeAll, true);
  assert.equal(r.config.iptables.masqueradeAll, false);
  assert.equal(r.resolved.nftables.masqueradeBit, 14);
});

test('deprecated --healthz-port / --metrics-port: 0 disables, otherwise fills a missing port', async () => {
  const off = await run(['--healthz-port=0', '--metrics-port=0']);
  assert.equal(off.resolved.healthzBindAddress, '');
  assert.equal(off.resolved.metricsBindAddress, '');
  assert.equal(off.warnings.filter((w) => /has been deprecated/.test(w)).length, 2);
  const fill = await run([
    '--healthz-bind-address=::1',
    '--healthz-port=1234',
    '--metrics-bind-address=127.0.0.2',
    '--metrics-port=5678',
  ]);
  assert.equal(fill.resolved.healthzBindAddress, '[::1]:1234');
  assert.equal(fill.resolved.metricsBindAddress, '127.0.0.2:5678');
  const keep = await run(['--healthz-port=1234']);
  assert.equal(keep.resolved.healthzBindAddress, '0.0.0.0:10256', 'an address with a port is kept, as upstream');
});

test('bad flags exit with KPT_FLAG_INVALID naming the flag', async () => {
  await rejects(['--foo'], 'KPT_FLAG_INVALID', /unknown flag: --foo/);
  await rejects(['-x'], 'KPT_FLAG_INVALID', /unknown shorthand flag: 'x' in -x/);
  await rejects(
    ['--iptables-sync-period=abc'],
    'KPT_FLAG_INVALID',
    /"--iptables-sync-period" flag: time: invalid duration "abc"/,
  );
  await rejects(['--iptables-sync-period=5'], 'KPT_FLAG_INVALID', /missing unit in duration/);
  await rejects(
    ['--bind-address=10.0.0.300'],
    'KPT_FLAG_INVALID',
    /"--bind-address" flag: "10.0.0.300" is not a valid IP address/,
  );
  await rejects(['--healthz-bind-address=1.2.3.4:http'], 'KPT_FLAG_INVALID', /"--healthz-bind-address" flag/);
  await rejects(['--oom-score-adj=abc'], 'KPT_FLAG_INVALID', /"--oom-score-adj" flag: strconv.ParseInt/);
  await rejects(['--kube-api-burst=99999999999'], 'KPT_FLAG_INVALID', /value out of range/);
  await rejects(['--masquerade-all=yes'], 'KPT_FLAG_INVALID', /"--masquerade-all" flag: strconv.ParseBool/);
  await rejects(['-v=-1'], 'KPT_FLAG_INVALID', /"-v, --v" flag/);
  await rejects(['--feature-gates=A'], 'KPT_FLAG_INVALID', /"--feature-gates" flag: missing bool value for A/);
  await rejects(['--detect-local-mode=Pods'], 'KPT_FLAG_INVALID', /"--detect-local-mode" flag/);
  await rejects(['--kubeconfig'], 'KPT_FLAG_INVALID', /flag needs an argument: --kubeconfig/);
  await rejects(['--hostname-override=   '], 'KPT_FLAG_INVALID', /empty hostname-override is invalid/);
  await rejects(
    ['--iptables-masquerade-bit=32'],
    'KPT_CONFIG_INVALID',
    /^iptables\.masqueradeBit: Invalid value: 32: must be within the range \[0, 31\]$/,
  );
  await rejects(['--cluster-cidr=10.0.0.0/8,10.1.0.0/16'], 'KPT_CONFIG_INVALID', /^clusterCIDR: Invalid value/);
});

test('--help lists every flag with its default; --version prints the version', async () => {
  const h = await parseCommandLine(['--help'], files({}));
  assert.equal(h.kind, 'help');
  const text = (h as { text: string }).text;
  for (const f of FLAGS) assert.match(text, new RegExp(`--${f.name}\\b`), f.name);
  assert.match(text, /--iptables-masquerade-bit int32 +.*\(default 14\)/);
  assert.match(text, /--conntrack-tcp-timeout-established duration +.*\(default 24h0m0s\)/);
  assert.match(text, /--kube-api-content-type string +.*\(default "application\/vnd.kubernetes.protobuf"\)/);
  assert.match(text, /-v, --v Level/);
  assert.equal((await parseCommandLine(['-h'], files({}))).kind, 'help');
  const v = await parseCommandLine(['--version'], files({}), '0.1.0');
  assert.deepEqual(v, { kind: 'version', text: 'kube-proxy-ts v0.1.0' });
});

const FILE = `${HEAD}mode: ipvs\nhostnameOverride: from-file\nclusterCIDR: 10.244.0.0/16\nipvs:\n  syncPeriod: 45s\n  minSyncPeriod: 5s\nlogging:\n  verbosity: 2\n  vmodule:\n  - filePattern: file*\n    verbosity: 1\n`;

test('--config: config-field flags are ignored (with a warning), logging flags and --hostname-override win', async () => {
  const r = await run(
    [
      '--config=/etc/kp.yaml',
      '--proxy-mode=nftables',
      '--ipvs-sync-period=1s',
      '--masquerade-all',
      '--cleanup',
      '--master=https://m',
      '-v=6',
      '--vmodule=flag*=3',
      '--hostname-override=  NODE-X ',
    ],
    { '/etc/kp.yaml': FILE },
  );
  assert.equal(r.configFile, '/etc/kp.yaml');
  assert.equal(r.master, 'https://m');
  assert.equal(r.actions.cleanup, true);
  assert.equal(r.resolved.mode, 'ipvs');
  assert.equal(r.resolved.syncPeriod, 45 * SECOND);
  assert.equal(r.resolved.minSyncPeriod, 5 * SECOND);
  assert.equal(r.resolved.linux.masqueradeAll, false);
  assert.equal(r.resolved.logging.verbosity, 6);
  assert.deepEqual(r.resolved.logging.vmodule, [
    { filePattern: 'flag*', verbosity: 3 },
    { filePattern: 'file*', verbosity: 1 },
  ]);
  assert.equal(r.resolved.hostnameOverride, 'node-x');
  assert.deepEqual(r.resolved.detectLocal.clusterCIDRs, ['10.244.0.0/16']);
  assert.ok(
    r.warnings.some(
      (w) => w.includes('--proxy-mode') && w.includes('--masquerade-all') && w.includes('--ipvs-sync-period'),
    ),
  );
  // Without the flags, the file's values stand.
  const plain = await run(['--config', '/etc/kp.yaml'], { '/etc/kp.yaml': FILE });
  assert.equal(plain.resolved.hostnameOverride, 'from-file');
  assert.equal(plain.resolved.logging.verbosity, 2);
});

test('--config: lenient fallback warns, errors name the file and field', async () => {
  const r = await run(['--config=/c'], { '/c': `${HEAD}resourceContainer: /kube-proxy\nmode: iptables\n` });
  assert.ok(r.warnings.some((w) => /lenient decoding.*unknown field "resourceContainer"/.test(w)));
  await rejects(['--config=/missing'], 'KPT_CONFIG_FILE', /failed to read config file "\/missing"/);
  await rejects(['--config=/c'], 'KPT_CONFIG_FILE', /\/c: .*apiVersion "v1" is not supported/, {
    '/c': 'apiVersion: v1\nkind: KubeProxyConfiguration\n',
  });
  await rejects(['--config=/c'], 'KPT_CONFIG_INVALID', /^conntrack\.min: Invalid value: -1/, {
    '/c': `${HEAD}conntrack:\n  min: -1\n`,
  });
});

test('--write-config-to output read back with --config gives the same effective config', async () => {
  const argvs = [
    [],
    [
      '--proxy-mode=ipvs',
      '--ipvs-sync-period=20s',
      '--ipvs-min-sync-period=2s',
      '--ipvs-scheduler=lc',
      '--masquerade-all',
      '-v=3',
    ],
    [
      '--proxy-mode=nftables',
      '--iptables-sync-period=1m',
      '--cluster-cidr=10.244.0.0/16,fd00:10::/48',
      '--nodeport-addresses=primary,localhost',
      '--hostname-override=Node-1',
      '--bind-address=fd00::1',
      '--feature-gates=AllBeta=true',
      '--conntrack-tcp-timeout-close-wait=0s',
    ],
    [
      '--detect-local-mode=BridgeInterface',
      '--pod-bridge-interface=cbr0',
      '--healthz-port=0',
      '--oom-score-adj=0',
      '--vmodule=a=1,b=2',
    ],
  ];
  for (const argv of argvs) {
    const first = await run([...argv, '--write-config-to=/out.yaml']);
    assert.equal(first.actions.writeConfigTo, '/out.yaml');
    const yaml = encodeConfigYAML(first.config);
    const second = await run(['--config=/out.yaml'], { '/out.yaml': yaml });
    assert.deepEqual(second.resolved, first.resolved, argv.join(' '));
    assert.deepEqual(second.config, first.config, argv.join(' '));
    assert.deepEqual(
      second.warnings.filter((w) => /lenient/.test(w)),
      [],
      'the written file decodes strictly',
    );
    assert.equal(encodeConfigYAML(second.config), yaml, 'and re-encodes to the same text');
  }
});

test('written YAML is v1alpha1 with every defaulted field', async () => {
  const yaml = encodeConfigYAML((await run([])).config);
  assert.match(yaml, /^apiVersion: kubeproxy.config.k8s.io\/v1alpha1$/m);
  assert.match(yaml, /^kind: KubeProxyConfiguration$/m);
  for (const line of [
    'mode: iptables',
    'configSyncPeriod: 15m0s',
    '  tcpEstablishedTimeout: 24h0m0s',
    '  masqueradeBit: 14',
    'oomScoreAdj: -999',
    'detectLocalMode: ClusterCIDR',
    'healthzBindAddress: 0.0.0.0:10256',
    '  syncPeriod: 30s',
  ]) {
    assert.ok(yaml.split('\n').includes(line), line);
  }
});

test('--handover-drain-period: 1m by default, any duration, never negative', async () => {
  assert.equal((await run([])).handoverDrainMs, 60_000);
  assert.equal((await run(['--handover-drain-period=2s'])).handoverDrainMs, 2000);
  assert.equal((await run(['--handover-drain-period=0'])).handoverDrainMs, 0);
  await rejects(['--handover-drain-period=-1s'], 'KPT_FLAG_INVALID', /--handover-drain-period: must not be negative/);
});

test('--datapath-canary-interval: 5s by default, at least 1s', async () => {
  assert.equal((await run([])).datapathCanaryMs, 5000);
  assert.equal((await run(['--datapath-canary-interval=2s'])).datapathCanaryMs, 2000);
  assert.equal((await run(['--datapath-canary-interval=1m'])).datapathCanaryMs, 60_000);
  await rejects(
    ['--datapath-canary-interval=500ms'],
    'KPT_FLAG_INVALID',
    /--datapath-canary-interval: must be at least 1s/,
  );
  await rejects(
    ['--datapath-canary-interval=-5s'],
    'KPT_FLAG_INVALID',
    /--datapath-canary-interval: must not be negative/,
  );
});

test('--ebpf-lb-algorithm takes the four algorithms and refuses anything else', async () => {
  for (const a of ['random', 'round-robin', 'maglev', 'source-hash'])
    assert.equal((await run([`--ebpf-lb-algorithm=${a}`])).ebpf.algorithm, a);
  await rejects(
    ['--ebpf-lb-algorithm=rr'],
    'KPT_FLAG_INVALID',
    /--ebpf-lb-algorithm: "rr": must be one of random, round-robin, maglev, source-hash/,
  );
});

test('--ebpf-lb-mode takes snat (the default) and dsr, and refuses anything else', async () => {
  assert.equal((await run([])).ebpf.lbMode, 'snat');
  assert.equal((await run(['--ebpf-lb-mode=dsr'])).ebpf.lbMode, 'dsr');
  await rejects(['--ebpf-lb-mode=DSR'], 'KPT_FLAG_INVALID', /--ebpf-lb-mode: "DSR": must be one of snat, dsr/);
});
