// The manifest source against a real folder: what the handlers see (adds,
// Synced, updates, deletes), upstream's informer selectors, a ConfigMap-style
// ..data symlink swap, and a folder that disappears (nothing is deleted).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '../logger.js';
import { ManifestSource, type ManifestHandlers } from './source.js';

const svc = (name: string, ip: string, labels: Record<string, string> = {}) =>
  `apiVersion: v1\nkind: Service\nmetadata: {name: ${name}, labels: ${JSON.stringify(labels)}}\nspec: {clusterIP: ${ip}, ports: [{port: 80}]}\n`;
const node = (name: string) =>
  `apiVersion: v1\nkind: Node\nmetadata: {name: ${name}}\nstatus: {addresses: [{type: InternalIP, address: 192.168.0.2}]}\n`;

function recorder() {
  const events: string[] = [];
  const name = (o: { metadata: { name?: string } }) => o.metadata.name;
  const h: ManifestHandlers = {
    service: {
      onServiceAdd: (s) => events.push(`+svc ${name(s)}`),
      onServiceUpdate: (_o, s) => events.push(`~svc ${name(s)}`),
      onServiceDelete: (s) => events.push(`-svc ${name(s)}`),
      onServiceSynced: () => events.push('svc synced'),
    },
    endpointSlice: {
      onEndpointSliceAdd: (s) => events.push(`+slice ${name(s)}`),
      onEndpointSliceUpdate: (_o, s) => events.push(`~slice ${name(s)}`),
      onEndpointSliceDelete: (s) => events.push(`-slice ${name(s)}`),
      onEndpointSliceSynced: () => events.push('slice synced'),
    },
    node: {
      onNodeAdd: (n) => events.push(`+node ${name(n)}`),
      onNodeUpdate: (_o, n) => events.push(`~node ${name(n)}`),
      onNodeDelete: (n) => events.push(`-node ${name(n)}`),
      onNodeSynced: () => events.push('node synced'),
    },
    serviceCIDR: { onServiceCIDRsChanged: (c) => events.push(`cidrs ${c.length}`) },
  };
  return { h, events };
}

async function until(what: string, check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const quietLog = () => createLogger({ destination: { write: () => {} } });

test('initial state, selectors, then edits and removals as handler calls', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kpt-manifest-src-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'nodes.yaml'), `${node('node1')}---\n${node('node2')}`);
  writeFileSync(
    join(dir, 'svcs.yaml'),
    [
      svc('web', '10.96.0.10'),
      svc('headless', 'None'),
      svc('claimed', '10.96.0.12', { 'service.kubernetes.io/service-proxy-name': 'other' }),
    ].join('---\n'),
  );
  writeFileSync(join(dir, '.hidden.yaml'), svc('hidden', '10.96.0.13'));
  writeFileSync(join(dir, 'notes.txt'), 'not a manifest');
  const src = await ManifestSource.open({ dir, nodeName: 'node1', log: quietLog(), pollMs: 50 });
  assert.equal(src.node()?.metadata.name, 'node1');
  const { h, events } = recorder();
  const abort = new AbortController();
  const running = src.run(h, abort.signal);
  t.after(() => abort.abort());
  assert.deepEqual(events, ['+node node1', '+svc web', 'cidrs 0', 'svc synced', 'slice synced', 'node synced']);

  events.length = 0;
  writeFileSync(join(dir, 'svcs.yaml'), svc('web', '10.96.0.11'));
  await until('update seen', () => events.includes('~svc web'));
  writeFileSync(
    join(dir, 'cidr.json'),
    JSON.stringify({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'ServiceCIDR',
      metadata: { name: 'k' },
      spec: { cidrs: ['10.96.0.0/16'] },
    }),
  );
  await until('cidrs seen', () => events.includes('cidrs 1'));
  rmSync(join(dir, 'svcs.yaml'));
  await until('delete seen', () => events.includes('-svc web'));
  assert.deepEqual(events, ['~svc web', 'cidrs 1', '-svc web']);
  abort.abort();
  await running;
});

test('a ConfigMap-style ..data swap is one change; a vanished folder deletes nothing', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'kpt-manifest-cm-'));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const dir = join(root, 'volume');
  mkdirSync(join(dir, '..v1'), { recursive: true });
  writeFileSync(join(dir, '..v1', 'svcs.yaml'), svc('web', '10.96.0.10'));
  symlinkSync('..v1', join(dir, '..data'));
  symlinkSync('..data/svcs.yaml', join(dir, 'svcs.yaml'));
  const lines: string[] = [];
  const log = createLogger({ destination: { write: (l: string) => void lines.push(l) } });
  const src = await ManifestSource.open({ dir, nodeName: 'node1', log, pollMs: 50 });
  const { h, events } = recorder();
  const abort = new AbortController();
  const running = src.run(h, abort.signal);
  t.after(() => abort.abort());
  assert.ok(events.includes('+svc web'));
  assert.ok(lines.some((l) => l.includes('No Node manifest for this node')));

  // Kubelet's update: write ..v2, point a new link at it, rename it over ..data.
  events.length = 0;
  mkdirSync(join(dir, '..v2'));
  writeFileSync(join(dir, '..v2', 'svcs.yaml'), svc('web', '10.96.0.20'));
  symlinkSync('..v2', join(dir, '..data_tmp'));
  renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  await until('swap seen', () => events.length > 0);
  assert.deepEqual(events, ['~svc web']);

  events.length = 0;
  rmSync(dir, { recursive: true, force: true });
  await until('missing folder logged', () => lines.some((l) => l.includes('cannot read the folder')));
  await new Promise((r) => setTimeout(r, 200));
  assert.deepEqual(events, [], 'an unmounted volume must not delete Services');
  abort.abort();
  await running;
});

test('an unreadable folder is a start-up error naming it', async () => {
  await assert.rejects(
    ManifestSource.open({ dir: '/nonexistent/kpt-manifests', nodeName: 'n', log: quietLog() }),
    /--manifests: cannot read directory \/nonexistent\/kpt-manifests: ENOENT/,
  );
});
