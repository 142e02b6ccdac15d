// The /statusz page in a real browser, and `kube-proxy-ts status`, against a real proxy: a two-node
// namespace cluster, kube-proxy-ts on each node, Services whose endpoints are
// left out for every reason the page knows. Headless Chromium (Debian's
// package, playwright-core) runs inside node1's namespace and loads the page
// from the metrics address; the test reads rows and reasons from the DOM,
// uses the search box, and keeps a screenshot. Real packets check that what
// the page says node1 uses is what node1 does. Then `kube-proxy-ts status
// --netns` prints the same rows as a table and as JSON.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { launchInNamespace, type NsBrowser } from '../browser/chromium.js';
import { E2EEnv } from '../netns/e2e.js';
import { endpointSlice, nodeObject, service, webPorts, type EndpointSpec } from '../netns/fixtures.js';
import { E2E_MODES, proxyArgv } from '../netns/proxy.js';
import { REPO_ROOT } from '../netns/spawn.js';
import { run } from '../../src/platform/exec.js';
import type { StatusDoc } from '../../src/engine/statusview.js';

const ZONE = 'topology.kubernetes.io/zone';
const ARTIFACTS = `${REPO_ROOT}test-artifacts`;
const mode = E2E_MODES[0] ?? 'iptables';

/** Service port -> { used endpoints, "endpoint traffic:reason" per skip, verdicts } as the page shows them. */
async function readRows(page: Page) {
  return page.$$eval('tr.svc', (rows) =>
    Object.fromEntries(
      rows.map((row) => {
        const attr = (el: { getAttribute(n: string): string | null }, name: string) => el.getAttribute(name) ?? '';
        const used = [...row.querySelectorAll('li.ep.used')].map((li) => attr(li, 'data-endpoint'));
        const skipped = [...row.querySelectorAll('li.ep.skipped')].map(
          (li) => `${attr(li, 'data-endpoint')} ${attr(li, 'data-traffic')}:${attr(li, 'data-reason')}`,
        );
        const verdicts = [...row.querySelectorAll('li.verdict')].map((li) => attr(li, 'class').replace('verdict ', ''));
        return [attr(row, 'data-service-port'), { used: used.sort(), skipped: skipped.sort(), verdicts }];
      }),
    ),
  );
}

/** The service ports of the rows the search box leaves visible. */
const visibleRows = (page: Page) =>
  page.$$eval('tr.svc', (rows) =>
    rows.filter((r) => !r.hasAttribute('hidden')).map((r) => r.getAttribute('data-service-port') ?? ''),
  );

describe(`/statusz in headless Chromium and \`status\` against kube-proxy-ts (${mode})`, { concurrency: false }, () => {
  let env: E2EEnv;
  let browser: NsBrowser;
  before(async () => {
    env = await E2EEnv.start(mode);
    browser = await launchInNamespace(env.cluster.node('node1').ns);
  });
  after(async () => {
    await browser?.close();
    await env?.dispose();
  });

  it('shows every endpoint node1 leaves out with its reason, matches real traffic, and filters with the search box', async () => {
    const pod = (n: string) => env.cluster.pod(n);
    const ip = (n: string) => `${pod(n).ip}:8080`;
    const node1 = env.cluster.node('node1');
    await env.apply(
      nodeObject(node1, { [ZONE]: 'zone-a' }),
      nodeObject(env.cluster.node('node2'), { [ZONE]: 'zone-b' }),
    );
    const webEps: EndpointSpec[] = [
      { pod: pod('node1-a') },
      { pod: pod('node2-a') },
      { pod: pod('node1-b'), ready: false, serving: false },
      { pod: pod('node2-b'), ready: false, serving: false, terminating: true },
    ];
    await env.apply(
      service({
        name: 'web',
        clusterIP: '10.96.5.10',
        type: 'NodePort',
        externalTrafficPolicy: 'Local',
        ports: webPorts(30580),
      }),
      endpointSlice('web', webEps, webPorts()),
      service({ name: 'zones', clusterIP: '10.96.5.11', ports: webPorts() }),
      endpointSlice(
        'zones',
        [
          { pod: pod('node1-a'), zone: 'zone-a', forZones: ['zone-a'] },
          { pod: pod('node2-a'), zone: 'zone-b', forZones: ['zone-b'] },
        ],
        webPorts(),
      ),
      service({ name: 'pinned', clusterIP: '10.96.5.12', ports: webPorts(), trafficDistribution: 'PreferSameNode' }),
      endpointSlice(
        'pinned',
        [
          { pod: pod('node1-b'), forNodes: ['node1'], forZones: ['zone-a'] },
          { pod: pod('node2-b'), forNodes: ['node2'], forZones: ['zone-b'] },
        ],
        webPorts(),
      ),
      service({ name: 'empty', clusterIP: '10.96.5.13', ports: webPorts() }),
    );
    // Real packets: what node1 does.
    await env.waitServedBy('ext', 'tcp', node1.ip, 30580, ['node1-a']);
    await env.waitServedBy('node1-a', 'tcp', '10.96.5.11', 80, ['node1-a']);
    await env.waitServedBy('node1-a', 'tcp', '10.96.5.12', 80, ['node1-b']);

    const page = await browser.context.newPage();
    const url = 'http://127.0.0.1:10249/statusz';
    // The page reflects the last sync; wait until it has all four Services.
    let rows: Awaited<ReturnType<typeof readRows>> = {};
    await env.waitFor('statusz shows the four Services', async () => {
      await page.goto(url);
      rows = await readRows(page);
      return rows['default/empty:tcp'] && rows['default/pinned:tcp'] ? true : undefined;
    });
    assert.equal(await page.textContent('#mode'), mode);
    assert.match((await page.textContent('#families tr[data-family="IPv4"] td.time')) ?? '', /^\d{4}-\d\d-\d\dT/);
    assert.equal(await page.textContent('#families tr[data-family="IPv4"] td.error'), 'none');

    assert.deepEqual(rows['default/web:tcp'], {
      used: [ip('node1-a'), ip('node2-a')].sort(),
      skipped: [
        `${ip('node1-b')} internal external:not-ready`,
        `${ip('node2-a')} external:local-policy`,
        `${ip('node2-b')} internal external:terminating`,
      ].sort(),
      verdicts: ['forward', 'forward'],
    });
    assert.deepEqual(rows['default/zones:tcp'], {
      used: [ip('node1-a')],
      skipped: [`${ip('node2-a')} internal:other-zone-hint`],
      verdicts: ['forward'],
    });
    assert.deepEqual(rows['default/pinned:tcp'], {
      used: [`${pod('node1-b').ip}:8080`],
      skipped: [`${pod('node2-b').ip}:8080 internal:other-node-hint`],
      verdicts: ['forward'],
    });
    assert.deepEqual(rows['default/empty:tcp'], { used: [], skipped: [], verdicts: ['reject'] });
    assert.match(
      (await page.textContent('tr[data-service-port="default/empty:tcp"] li.verdict')) ?? '',
      /no serving endpoints/,
    );

    // The search box: reason codes, words and names narrow the rows; clearing shows all again.
    const all = (await visibleRows(page)).length;
    await page.fill('#search', 'other-zone-hint');
    assert.deepEqual(await visibleRows(page), ['default/zones:tcp', 'default/zones:udp']);
    await page.fill('#search', 'local policy 30581');
    assert.deepEqual(await visibleRows(page), ['default/web:udp']);
    assert.match((await page.textContent('#shown')) ?? '', /^1 of \d+ service ports$/);
    await page.fill('#search', '');
    assert.equal((await visibleRows(page)).length, all);
    // ?q= pre-fills the box and filters on load.
    await page.goto(`${url}?q=pinned`);
    assert.deepEqual(await visibleRows(page), ['default/pinned:tcp', 'default/pinned:udp']);

    await page.goto(url);
    mkdirSync(ARTIFACTS, { recursive: true });
    const shot = `${ARTIFACTS}/statusz-${mode}.png`;
    await page.screenshot({ path: shot, fullPage: true });
    console.log(`statusz screenshot: ${shot}`);
  });
  it('`kube-proxy-ts status --netns` prints the same rows as a table, filtered by words, and as JSON', async () => {
    const ns = env.cluster.node('node1').ns;
    const ip = (n: string) => `${env.cluster.pod(n).ip}:8080`;
    const status = (...args: string[]) =>
      run(proxyArgv()[0]!, [...proxyArgv().slice(1), 'status', '--netns', ns, ...args]);
    const tableOut = (await status('default/web:tcp')).stdout;
    console.log(tableOut);
    assert.match(
      tableOut,
      new RegExp(`^kube-proxy-ts \\S+ on node node1 \\(192\\.168\\.77\\.11, zone zone-a\\), mode ${mode},`),
    );
    assert.match(tableOut, /^IPv4 +\d{4}-\d\d-\d\dT\S+ +[\d.]+ m?s +(full|partial) +\d+ +none +\d+$/m);
    assert.match(tableOut, /^default\/web:tcp +ClusterIP 10\.96\.5\.10:80 +internal Cluster: forward \(2\)/m);
    assert.ok(tableOut.includes(`${ip('node2-a')} Local policy (ext): runs on node node2`), tableOut);
    assert.ok(tableOut.includes(`${ip('node2-b')} terminating (int,ext)`), tableOut);
    assert.ok(!tableOut.includes('default/zones'), 'the word filter keeps only matching rows');

    const doc = JSON.parse((await status('-o', 'json')).stdout) as StatusDoc;
    assert.equal(doc.node.name, 'node1');
    const zones = doc.servicePorts.find((r) => r.servicePort === 'default/zones:tcp');
    assert.deepEqual(
      zones?.endpoints.map((e) => [e.endpoint, e.usedFor, e.skipped.map((x) => x.reason)]),
      [
        [ip('node1-a'), ['internal'], []],
        [ip('node2-a'), [], ['other-zone-hint']],
      ],
    );
  });
});
