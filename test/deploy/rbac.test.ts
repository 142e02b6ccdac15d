// The request -> permission mapping the in-cluster test relies on.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { grantedPermissions, requestPermission } from './rbac.js';

const req = (method: string, path: string, query: Record<string, string> = {}) =>
  requestPermission({ method, path, query });

describe('deploy rbac: request -> permission', () => {
  it('collections are list, ?watch=true is watch, named objects are get', () => {
    assert.equal(req('GET', '/api/v1/services'), '/services:list');
    assert.equal(req('GET', '/api/v1/services', { watch: 'true' }), '/services:watch');
    assert.equal(req('GET', '/api/v1/nodes', { watch: '1', fieldSelector: 'metadata.name=a' }), '/nodes:watch');
    assert.equal(req('GET', '/api/v1/nodes/node-a'), '/nodes:get');
    assert.equal(req('GET', '/api/v1/namespaces/ns/services'), '/services:list');
    assert.equal(req('GET', '/api/v1/namespaces/ns/services/web'), '/services:get');
    assert.equal(req('GET', '/api/v1/namespaces/ns'), '/namespaces:get');
  });

  it('groups, subresources and writes', () => {
    assert.equal(req('GET', '/apis/discovery.k8s.io/v1/endpointslices'), 'discovery.k8s.io/endpointslices:list');
    assert.equal(req('POST', '/apis/events.k8s.io/v1/namespaces/default/events'), 'events.k8s.io/events:create');
    assert.equal(req('PATCH', '/api/v1/nodes/node-a/status'), '/nodes/status:patch');
    assert.equal(req('PUT', '/api/v1/namespaces/ns/services/web'), '/services:update');
    assert.equal(req('DELETE', '/api/v1/namespaces/ns/services'), '/services:deletecollection');
  });

  it('discovery and /version need no role', () => {
    assert.equal(req('GET', '/version'), null);
    assert.equal(req('GET', '/apis'), null);
    assert.equal(req('GET', '/apis/discovery.k8s.io/v1'), null);
  });

  it('a role expands to its cross product and refuses wildcards', () => {
    assert.deepEqual(
      [...grantedPermissions([{ apiGroups: [''], resources: ['a', 'b'], verbs: ['list', 'watch'] }])].sort(),
      ['/a:list', '/a:watch', '/b:list', '/b:watch'],
    );
    assert.throws(() => grantedPermissions([{ apiGroups: ['*'], resources: ['a'], verbs: ['get'] }]), /wildcard/);
  });
});
