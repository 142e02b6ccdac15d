import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nftablesUnsupportedReason, parseVersion } from './nftcheck.js';

const ok = { kernelRelease: '6.1.0-27-amd64', nftVersion: 'nftables v1.0.6 (Lester Gooch #5)' };

test('parseVersion takes the leading a.b[.c]', () => {
  assert.deepEqual(parseVersion('5.13.0-1031-azure'), [5, 13, 0]);
  assert.deepEqual(parseVersion('4.18'), [4, 18, 0]);
  assert.equal(parseVersion('none'), null);
});

test('a new kernel and nft pass', () => {
  assert.equal(nftablesUnsupportedReason(ok), null);
  assert.equal(
    nftablesUnsupportedReason({ kernelRelease: '5.13.0', nftVersion: 'nftables v1.0.1 (Fearless Fosdick #3)' }),
    null,
  );
  assert.equal(nftablesUnsupportedReason({ ...ok, nftVersion: 'nftables v1.1.1 (Commodore Bullmoose #2)' }), null);
});

test('kernels before 5.13 are refused with a message naming both versions and the way out', () => {
  for (const k of ['5.12.19', '4.18.0-553.el8_10.x86_64', '5.4.0-150-generic']) {
    const r = nftablesUnsupportedReason({ ...ok, kernelRelease: k });
    assert.ok(r, k);
    assert.match(r, /needs kernel 5\.13\.0 or later/);
    assert.ok(r.includes(k));
    assert.match(r, /KUBE_PROXY_NFTABLES_SKIP_KERNEL_VERSION_CHECK/);
  }
});

test('KUBE_PROXY_NFTABLES_SKIP_KERNEL_VERSION_CHECK non-empty skips the kernel check only', () => {
  const old = { ...ok, kernelRelease: '4.18.0' };
  assert.equal(nftablesUnsupportedReason({ ...old, skipKernelCheck: '1' }), null);
  assert.ok(nftablesUnsupportedReason({ ...old, skipKernelCheck: '' }), 'empty does not skip');
  const r = nftablesUnsupportedReason({ ...old, nftVersion: 'nftables v0.9.8 (E.D.S.)', skipKernelCheck: 'yes' });
  assert.match(r ?? '', /needs nft 1\.0\.1 or later, this one is 0\.9\.8/);
});

test('nft before 1.0.1, missing or unreadable is refused', () => {
  assert.match(
    nftablesUnsupportedReason({ ...ok, nftVersion: 'nftables v1.0.0 (Fearless Fosdick)' }) ?? '',
    /1\.0\.1 or later, this one is 1\.0\.0/,
  );
  assert.match(nftablesUnsupportedReason({ ...ok, nftVersion: null }) ?? '', /could not be run/);
  assert.match(nftablesUnsupportedReason({ ...ok, nftVersion: 'garbage' }) ?? '', /cannot tell the nft version/);
  assert.match(nftablesUnsupportedReason({ ...ok, kernelRelease: '???' }) ?? '', /cannot tell the kernel version/);
});
