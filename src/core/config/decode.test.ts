import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hasCode } from '../errors.js';
import { decodeConfigFile } from './decode.js';

const HEAD = 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n';

test('decodes YAML and applies defaults to unset fields', () => {
  const { config, warnings } = decodeConfigFile(
    `${HEAD}mode: nftables\nclusterCIDR: 10.0.0.0/8\niptables:\n  masqueradeBit: 12\nnftables:\n  syncPeriod: 90s\n`,
  );
  assert.deepEqual(warnings, []);
  assert.equal(config.mode, 'nftables');
  assert.equal(config.clusterCIDR, '10.0.0.0/8');
  assert.equal(config.iptables.masqueradeBit, 12);
  assert.equal(config.iptables.syncPeriod, '30s');
  assert.equal(config.nftables.syncPeriod, '1m30s', 'durations are canonicalised');
  assert.equal(config.nftables.minSyncPeriod, '1s');
  assert.equal(config.conntrack.min, 131072);
});

test('decodes JSON', () => {
  const { config } = decodeConfigFile(
    JSON.stringify({
      apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
      kind: 'KubeProxyConfiguration',
      nodePortAddresses: ['primary', '10.0.0.0/8'],
      conntrack: { maxPerCore: 0 },
      featureGates: { Foo: true },
    }),
  );
  assert.deepEqual(config.nodePortAddresses, ['primary', '10.0.0.0/8']);
  assert.equal(config.conntrack.maxPerCore, 0);
  assert.deepEqual(config.featureGates, { Foo: true });
});

test('unknown fields fail strict decoding; lenient decoding continues with a warning naming them', () => {
  const { config, warnings } = decodeConfigFile(
    `${HEAD}mode: ipvs\nudpIdleTimeout: 250ms\niptables:\n  bogus: 1\n`,
    '/etc/kp.yaml',
  );
  assert.equal(config.mode, 'ipvs');
  assert.equal(warnings.length, 1);
  assert.match(
    warnings[0]!,
    /^Using lenient decoding as strict decoding failed: \/etc\/kp.yaml: strict decoding error:/,
  );
  assert.match(warnings[0]!, /unknown field "udpIdleTimeout"/);
  assert.match(warnings[0]!, /unknown field "iptables.bogus"/);
});

test('duplicate fields fail strict decoding; lenient keeps the last value', () => {
  const { config, warnings } = decodeConfigFile(`${HEAD}mode: ipvs\nmode: nftables\n`);
  assert.equal(config.mode, 'nftables');
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /duplicate field/);
});

test('wrong or missing apiVersion/kind is a clear KPT_CONFIG_FILE error', () => {
  const cases: Array<[string, RegExp]> = [
    ['kind: KubeProxyConfiguration\n', /'apiVersion' is missing/],
    ['apiVersion: kubeproxy.config.k8s.io/v1alpha1\n', /'Kind' is missing/],
    [
      'apiVersion: componentconfig/v1alpha1\nkind: KubeProxyConfiguration\n',
      /apiVersion "componentconfig\/v1alpha1" is not supported/,
    ],
    [
      'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n',
      /no kind "KubeletConfiguration" is registered/,
    ],
  ];
  for (const [text, re] of cases) {
    assert.throws(
      () => decodeConfigFile(text),
      (err) => hasCode(err, 'KPT_CONFIG_FILE') && re.test((err as Error).message),
      text,
    );
  }
});

test('values of the wrong type are errors naming the field', () => {
  const cases: Array<[string, RegExp]> = [
    ['hostnameOverride: 123\n', /field "hostnameOverride": cannot use number 123 as string/],
    ['iptables:\n  masqueradeBit: "14"\n', /field "iptables.masqueradeBit": cannot use string "14" as int32/],
    ['iptables:\n  masqueradeBit: 1.5\n', /field "iptables.masqueradeBit"/],
    ['oomScoreAdj: 3000000000\n', /field "oomScoreAdj"/],
    ['iptables:\n  syncPeriod: 30\n', /field "iptables.syncPeriod": cannot use number 30 as duration string/],
    ['iptables:\n  syncPeriod: 30x\n', /field "iptables.syncPeriod": time: unknown unit "x"/],
    ['nodePortAddresses: 10.0.0.0/8\n', /field "nodePortAddresses": cannot use string/],
    ['masqueradeAll: true\niptables: []\n', /field "iptables": cannot use array as object/],
    ['featureGates:\n  A: maybe\n', /field "featureGates.A"/],
    ['enableProfiling: "true"\n', /field "enableProfiling"/],
  ];
  for (const [body, re] of cases) {
    assert.throws(
      () => decodeConfigFile(HEAD + body),
      (err) => hasCode(err, 'KPT_CONFIG_FILE') && re.test((err as Error).message),
      body,
    );
  }
});

test('YAML 1.1 scalars are read as go-yaml v2 reads them', () => {
  // "yes" is a boolean in YAML 1.1, so it cannot be a string field.
  assert.throws(() => decodeConfigFile(`${HEAD}hostnameOverride: yes\n`), /cannot use boolean as string/);
  const { config } = decodeConfigFile(
    `${HEAD}enableProfiling: on\nhostnameOverride: 2001-12-14\nportRange: 1:20\noomScoreAdj: 0x10\n`,
  );
  assert.equal(config.enableProfiling, true);
  assert.equal(config.hostnameOverride, '2001-12-14', 'timestamps stay strings');
  assert.equal(config.portRange, '1:20', 'no base-60 numbers');
  assert.equal(config.oomScoreAdj, 16);
});

test('null keeps the default; malformed YAML and empty files are errors', () => {
  const { config } = decodeConfigFile(`${HEAD}oomScoreAdj: null\nconntrack: null\n`);
  assert.equal(config.oomScoreAdj, -999);
  assert.equal(config.conntrack.min, 131072);
  assert.throws(
    () => decodeConfigFile(`${HEAD}mode: [\n`),
    (e) => hasCode(e, 'KPT_CONFIG_FILE'),
  );
  assert.throws(
    () => decodeConfigFile(''),
    (e) => hasCode(e, 'KPT_CONFIG_FILE'),
  );
});

test('logging section: vmodule list, flushFrequency as string or nanoseconds', () => {
  const { config } = decodeConfigFile(
    `${HEAD}logging:\n  format: json\n  flushFrequency: 2000000000\n  verbosity: 3\n  vmodule:\n  - filePattern: proxier*\n    verbosity: 5\n`,
  );
  assert.equal(config.logging.format, 'json');
  assert.equal(config.logging.flushFrequency, '2s');
  assert.equal(config.logging.verbosity, 3);
  assert.deepEqual(config.logging.vmodule, [{ filePattern: 'proxier*', verbosity: 5 }]);
});
