import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileNames, hasFibLookupSrc, releaseHasFibLookupSrc } from './kernel.js';

describe('hasFibLookupSrc', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kpt-btf-'));
  const file = (name: string, body: string) => {
    const p = join(dir, name);
    writeFileSync(p, Buffer.from(body, 'latin1'));
    return p;
  };

  test('by release where there is no BTF: Linux 6.7 and later', () => {
    assert.deepEqual(
      ['6.1.0-57-amd64', '5.15.0-91-generic', '6.6.30', '6.7.0', '6.18.2', '7.0.1', 'weird'].map((r) =>
        releaseHasFibLookupSrc(r),
      ),
      [false, false, false, true, true, true, true],
    );
    assert.equal(hasFibLookupSrc(join(dir, 'absent'), '6.1.0-57-amd64'), false);
    assert.equal(hasFibLookupSrc(join(dir, 'absent'), '6.8.0'), true);
  });

  test("the kernel's BTF decides over the release (a backport on 6.1, a kernel built without it)", () => {
    const strings = (names: string[]) => `\x9f\xeb\x01\0junk\0${names.join('\0')}\0more\0`;
    const backport = file('backport', strings(['BPF_FIB_LOOKUP_OUTPUT', 'BPF_FIB_LOOKUP_SRC', 'BPF_FIB_LOOKUP_TBID']));
    const without = file('without', strings(['BPF_FIB_LOOKUP_OUTPUT', 'BPF_FIB_LOOKUP_SRCX', 'XBPF_FIB_LOOKUP_SRC']));
    assert.equal(hasFibLookupSrc(backport, '6.1.0-57-amd64'), true);
    assert.equal(hasFibLookupSrc(without, '6.9.0'), false, 'only the whole name counts');
  });

  test('a name across two pieces of the read is still found', () => {
    const name = 'BPF_FIB_LOOKUP_SRC';
    for (const pad of [0, 1, 5, 9, 15, 16, 17, 30]) {
      const p = file(`split${pad}`, `${'x'.repeat(pad)}\0${name}\0tail`);
      assert.equal(fileNames(p, name, 16), true, `padding ${pad}`);
    }
    assert.equal(fileNames(file('none', `${'x'.repeat(40)}\0BPF_FIB\0`), name, 16), false);
    assert.equal(fileNames(join(dir, 'absent'), name), null);
  });

  after(() => rmSync(dir, { recursive: true, force: true }));
});
