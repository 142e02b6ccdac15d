// /flagz values: every flag, given ones as parsed, the rest with pflag's
// default text; and the zpages gates (on by default, off by name or AllBeta).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { featureGateEnabled } from '../core/config/features.js';
import { FLAGS } from './flags.js';
import { parseCommandLine, type RunCommand } from './options.js';

const deps = { readFile: () => Promise.reject(new Error('no file')) };

test('flagz lists every flag with the value pflag would print', async () => {
  const cmd = (await parseCommandLine(
    [
      '--proxy-mode=nftables',
      '--feature-gates',
      'ComponentStatusz=true,AllBeta=false',
      '--ipvs-exclude-cidrs',
      '10.0.0.0/8,10.1.0.0/16',
      '-v',
      '4',
      '--iptables-sync-period',
      '90s',
      '--masquerade-all',
    ],
    deps,
    '1.2.3',
  )) as RunCommand;
  assert.equal(cmd.version, '1.2.3');
  assert.deepEqual(
    Object.keys(cmd.flagz).sort(),
    FLAGS.map((f) => f.name)
      .filter((n) => n !== 'help')
      .sort(),
  );
  const f = cmd.flagz;
  assert.equal(f['proxy-mode'], 'nftables');
  assert.equal(f['feature-gates'], 'AllBeta=false,ComponentStatusz=true');
  assert.equal(f['ipvs-exclude-cidrs'], '[10.0.0.0/8,10.1.0.0/16]');
  assert.equal(f['v'], '4');
  assert.equal(f['iptables-sync-period'], '1m30s');
  assert.equal(f['masquerade-all'], 'true');
  // Defaults, including the zero values help texts leave out.
  assert.equal(f['metrics-bind-address'], '127.0.0.1:10249');
  assert.equal(f['cleanup'], 'false');
  assert.equal(f['conntrack-udp-timeout'], '0s');
  assert.equal(f['kubeconfig'], '');
  assert.equal(f['iptables-masquerade-bit'], '14');
});

test('zpages gates: on by default (beta), off when named or when AllBeta=false', () => {
  assert.equal(featureGateEnabled({}, 'ComponentStatusz'), true);
  assert.equal(featureGateEnabled({}, 'ComponentFlagz'), true);
  assert.equal(featureGateEnabled({ ComponentFlagz: false }, 'ComponentFlagz'), false);
  assert.equal(featureGateEnabled({ AllBeta: false }, 'ComponentStatusz'), false);
  assert.equal(featureGateEnabled({ AllBeta: false, ComponentStatusz: true }, 'ComponentStatusz'), true);
  assert.equal(featureGateEnabled({ AllAlpha: false }, 'ComponentStatusz'), true);
  assert.equal(featureGateEnabled({}, 'SomethingWeDoNotRead'), false);
});
