import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseFieldSelector, parseLabelSelector, SelectorError } from './selectors.js';

describe('label selectors', () => {
  const cases: Array<[string, Record<string, string> | undefined, boolean]> = [
    ['', undefined, true],
    ['app', { app: 'x' }, true],
    ['app', {}, false],
    ['!service.kubernetes.io/service-proxy-name', { app: 'x' }, true],
    ['!service.kubernetes.io/service-proxy-name', { 'service.kubernetes.io/service-proxy-name': '' }, false],
    ['!service.kubernetes.io/service-proxy-name', undefined, true],
    ['app=web', { app: 'web' }, true],
    ['app==web', { app: 'web' }, true],
    ['app=web', { app: 'db' }, false],
    ['app!=web', { app: 'db' }, true],
    ['app!=web', {}, true],
    ['app!=web', { app: 'web' }, false],
    ['tier in (a, b)', { tier: 'b' }, true],
    ['tier in (a,b)', { tier: 'c' }, false],
    ['tier in (a,b)', {}, false],
    ['tier notin (a,b)', { tier: 'c' }, true],
    ['tier notin (a,b)', {}, true],
    ['tier notin (a,b)', { tier: 'a' }, false],
    ['app=web,tier in (a,b),!canary', { app: 'web', tier: 'a' }, true],
    ['app=web,tier in (a,b),!canary', { app: 'web', tier: 'a', canary: '1' }, false],
    ['app=', { app: '' }, true],
  ];
  for (const [sel, labels, want] of cases) {
    it(`${JSON.stringify(sel)} on ${JSON.stringify(labels)} -> ${want}`, () => {
      assert.equal(parseLabelSelector(sel)(labels), want);
    });
  }
  for (const bad of ['a in (b', 'a,,b', '!', 'a=b c', 'bad key=1', 'x in (a b)']) {
    it(`rejects ${JSON.stringify(bad)}`, () => {
      assert.throws(() => parseLabelSelector(bad), SelectorError);
    });
  }
});

describe('field selectors', () => {
  const fields = ['metadata.name', 'metadata.namespace', 'spec.clusterIP'];
  const headless = { metadata: { name: 'h', namespace: 'ns' }, spec: { clusterIP: 'None' } };
  const normal = { metadata: { name: 'n', namespace: 'ns' }, spec: { clusterIP: '172.30.0.1' } };
  const noSpec = { metadata: { name: 'x', namespace: 'other' } };
  it('spec.clusterIP!=None drops headless services only', () => {
    const f = parseFieldSelector('spec.clusterIP!=None', fields);
    assert.deepEqual([headless, normal, noSpec].map(f), [false, true, true]);
  });
  it('metadata.name= and metadata.namespace== combine with AND', () => {
    const f = parseFieldSelector('metadata.name=n,metadata.namespace==ns', fields);
    assert.deepEqual([headless, normal, noSpec].map(f), [false, true, false]);
  });
  it('rejects fields the resource does not support, and malformed terms', () => {
    assert.throws(() => parseFieldSelector('spec.type=ClusterIP', fields), /not supported/);
    assert.throws(() => parseFieldSelector('metadata.name', fields), SelectorError);
  });
});
