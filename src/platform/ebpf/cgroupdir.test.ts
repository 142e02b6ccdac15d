import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CGROUP2_SUPER_MAGIC, cgroup2Dir } from './cgroupdir.js';

const TMPFS = 0x01021994;

describe('cgroup2Dir', () => {
  it('a cgroup v2 root is used as given', () => {
    const fs: Record<string, number> = { '/host/cgroup': CGROUP2_SUPER_MAGIC };
    assert.equal(
      cgroup2Dir('/host/cgroup', (p) => fs[p] ?? null),
      '/host/cgroup',
    );
  });

  it('a hybrid host: the v2 hierarchy under unified', () => {
    const fs: Record<string, number> = { '/host/cgroup': TMPFS, '/host/cgroup/unified': CGROUP2_SUPER_MAGIC };
    assert.equal(
      cgroup2Dir('/host/cgroup/', (p) => fs[p] ?? null),
      '/host/cgroup/unified',
    );
  });

  it('no cgroup v2 (v1 only, a stand-in directory, a missing path): null', () => {
    assert.equal(
      cgroup2Dir('/host/cgroup', (p) => (p === '/host/cgroup' ? TMPFS : null)),
      null,
    );
    assert.equal(
      cgroup2Dir('/nowhere', () => null),
      null,
    );
  });

  it('reads the real filesystem: a missing path is null, not an exception', () => {
    assert.equal(cgroup2Dir('/nonexistent-kpt-cgroup-dir'), null);
  });
});
