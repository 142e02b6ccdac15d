// The real bin/kube-proxy-ts process refuses bad flags and config files with
// a message naming the flag or field, and --write-config-to round-trips.
// Every run happens inside a throwaway network namespace: if a bad input were
// ever accepted, the proxy would start there, never in the root namespace.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../netns/cleanup.js';
import { newPrefix } from '../netns/names.js';

const BIN = resolve(import.meta.dirname, '../../../bin/kube-proxy-ts');
const ns = `${newPrefix()}cli`;
let dir = '';

function proxy(...args: string[]): { code: number; stdout: string; stderr: string } {
  const r = spawnSync('ip', ['netns', 'exec', ns, BIN, ...args], { encoding: 'utf8', timeout: 20_000 });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

before(() => {
  trackNamespace(ns);
  execFileSync('ip', ['netns', 'add', ns]);
  dir = mkdtempSync(join(tmpdir(), 'kpt-cli-'));
});
after(() => {
  deleteNamespaceSync(ns);
  untrackNamespace(ns);
  rmSync(dir, { recursive: true, force: true });
});

describe('kube-proxy-ts command line', () => {
  test('--version and --help', () => {
    const v = proxy('--version');
    assert.equal(v.code, 0);
    assert.match(v.stdout, /^kube-proxy-ts v\d+\.\d+\.\d+/);
    const h = proxy('--help');
    assert.equal(h.code, 0);
    for (const flag of [
      '--config',
      '--proxy-mode',
      '--iptables-masquerade-bit',
      '--nodeport-addresses',
      '--detect-local-mode',
      '--cleanup',
    ]) {
      assert.ok(h.stdout.includes(flag), `help mentions ${flag}`);
    }
  });

  const badFlags: Array<[string[], RegExp]> = [
    [['--no-such-flag'], /no-such-flag/],
    [['--iptables-masquerade-bit', '40'], /masqueradeBit.*40|masquerade-bit.*40/i],
    [['--iptables-sync-period', 'soon'], /iptables-sync-period/],
    [['--bind-address', '300.1.1.1'], /bind-address|bindAddress/],
    [['--proxy-mode', 'carrier-pigeon'], /mode/i],
    [['--detect-local-mode', 'BridgeInterface'], /bridge/i],
    [['--hostname-override', '   '], /hostname-override|hostnameOverride/],
  ];
  for (const [args, why] of badFlags) {
    test(`refuses ${args.join(' ')}`, () => {
      const r = proxy(...args);
      assert.equal(r.code, 1, `exit code for ${args.join(' ')}; stderr: ${r.stderr}`);
      assert.match(r.stderr, why);
    });
  }

  test('refuses a config file with an invalid value, naming the field', () => {
    const f = join(dir, 'bad.yaml');
    writeFileSync(
      f,
      'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\niptables:\n  masqueradeBit: 99\n',
    );
    const r = proxy('--config', f);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /iptables\.masqueradeBit/);
  });

  test('refuses a config file that is not YAML, or of the wrong kind', () => {
    const broken = join(dir, 'broken.yaml');
    writeFileSync(broken, 'apiVersion: [unclosed\n');
    assert.equal(proxy('--config', broken).code, 1);
    const wrong = join(dir, 'wrong.yaml');
    writeFileSync(wrong, 'apiVersion: v1\nkind: ConfigMap\n');
    const r = proxy('--config', wrong);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /kind|apiVersion/);
  });

  test('--write-config-to writes the effective config, which --config reads back unchanged', () => {
    const first = join(dir, 'first.yaml');
    const second = join(dir, 'second.yaml');
    assert.equal(
      proxy(
        '--write-config-to',
        first,
        '--proxy-mode',
        'nftables',
        '--iptables-masquerade-bit',
        '12',
        '--cluster-cidr',
        '10.244.0.0/16',
      ).code,
      0,
    );
    const text = readFileSync(first, 'utf8');
    assert.match(text, /kind: KubeProxyConfiguration/);
    assert.match(text, /mode: nftables/);
    assert.match(text, /masqueradeBit: 12/);
    assert.equal(proxy('--config', first, '--write-config-to', second).code, 0);
    assert.equal(readFileSync(second, 'utf8'), text);
  });

  test('nftables mode is refused when nft is older than 1.0.1, with a message saying so', () => {
    const bin = join(dir, 'oldnft');
    execFileSync('mkdir', ['-p', bin]);
    writeFileSync(join(bin, 'nft'), '#!/bin/sh\necho "nftables v0.9.8 (E.D.S.)"\n', { mode: 0o755 });
    const r = spawnSync(
      'ip',
      [
        'netns',
        'exec',
        ns,
        'env',
        `PATH=${bin}:${process.env['PATH']}`,
        BIN,
        '--proxy-mode',
        'nftables',
        '--master',
        'https://127.0.0.1:1',
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stdout + r.stderr, /nftables mode needs nft 1\.0\.1 or later, this one is 0\.9\.8/);
  });
  // Alpha logging options (component-base): a run that fails on a missing --manifests folder logs info lines
  // (a conntrack timeout it sets; each run asks for a new value so the line is always there), a warning (an
  // unknown gate) and an error, then exits 1.
  const loggingRun = (timeoutSeconds: number, ...args: string[]) =>
    proxy(
      '--feature-gates=LoggingAlphaOptions=true,NoSuchGate=true',
      '--proxy-mode=iptables',
      '--conntrack-max-per-core=0',
      `--conntrack-tcp-timeout-close-wait=${timeoutSeconds}s`,
      '--hostname-override=n1',
      '--manifests=/nonexistent/kpt-manifests',
      ...args,
    );
  const levelsOf = (text: string) =>
    text
      .split('\n')
      .filter(Boolean)
      .map((l) => (JSON.parse(l) as { level: string; msg: string }).level);

  test('--log-json-split-stream: info and warnings on stdout, errors on stderr; a buffered stdout is flushed at exit', () => {
    const r = loggingRun(3601, '--logging-format=json', '--log-json-split-stream', '--log-json-info-buffer-size=64Ki');
    assert.equal(r.code, 1, r.stderr);
    assert.ok(levelsOf(r.stdout).includes('info'), r.stdout);
    assert.ok(levelsOf(r.stdout).includes('warn'), 'json routes warnings with info');
    assert.match(r.stdout, /"msg":"Set sysctl"/);
    assert.deepEqual(levelsOf(r.stderr), ['error']);
    assert.match(r.stderr, /Cannot read the manifest folder/);
  });

  test('--log-text-split-stream: info on stdout, warnings and errors on stderr', () => {
    const r = loggingRun(3602, '--log-text-split-stream');
    assert.equal(r.code, 1, r.stderr);
    assert.deepEqual([...new Set(levelsOf(r.stdout))], ['info']);
    assert.deepEqual(levelsOf(r.stderr), ['warn', 'error']);
  });

  test('the logging options need LoggingAlphaOptions, and sizes are resource quantities', () => {
    const off = proxy('--log-json-split-stream', '--write-config-to', join(dir, 'never.yaml'));
    assert.equal(off.code, 1);
    assert.match(off.stderr, /logging\.options\.json\.splitStream: Forbidden: Feature LoggingAlphaOptions is disabled/);
    const bad = proxy('--log-text-info-buffer-size=lots');
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /invalid argument "lots" for "--log-text-info-buffer-size" flag/);
  });
});
