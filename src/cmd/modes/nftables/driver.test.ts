// The nftables layout is decided in one place: DEFAULT_ENDPOINT_LAYOUT, overridden only by
// KPT_NFTABLES_LAYOUT read here in src/cmd.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_ENDPOINT_LAYOUT, ENDPOINT_LAYOUTS } from '../../../dataplane/nftables/index.js';
import { nftablesLayout } from './driver.js';

test('nftablesLayout: the default unless KPT_NFTABLES_LAYOUT names a layout', () => {
  assert.equal(nftablesLayout({}), DEFAULT_ENDPOINT_LAYOUT);
  assert.equal(nftablesLayout({ KPT_NFTABLES_LAYOUT: '' }), DEFAULT_ENDPOINT_LAYOUT);
  for (const l of ENDPOINT_LAYOUTS) assert.equal(nftablesLayout({ KPT_NFTABLES_LAYOUT: l }), l);
});

test('nftablesLayout: an unknown value is reported and ignored', () => {
  const warnings: string[] = [];
  assert.equal(
    nftablesLayout({ KPT_NFTABLES_LAYOUT: 'fast' }, (m) => warnings.push(m)),
    DEFAULT_ENDPOINT_LAYOUT,
  );
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /KPT_NFTABLES_LAYOUT=fast is not one of lean, upstream, maps; using lean/);
});

test('the production layout is listed first', () => {
  assert.equal(ENDPOINT_LAYOUTS[0], DEFAULT_ENDPOINT_LAYOUT);
  assert.deepEqual([...ENDPOINT_LAYOUTS].sort(), ['lean', 'maps', 'upstream']);
});
