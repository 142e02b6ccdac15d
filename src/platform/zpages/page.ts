// The /statusz page for people: a self-contained HTML document (no external
// resources; its one style and one script are allowed by hash in the CSP).
// Header: mode, version, start time, node, each family's last sync. Then one
// row per service port and family: its addresses, what each kind of traffic
// does, the endpoints used and, for every endpoint not used, why.
// A search box filters the rows by every word of a row (names, addresses,
// endpoints, nodes, reason codes and words); ?q= pre-fills it.
//
// Stable hooks for tests and scripts: tr.svc[data-service-port][data-family],
// li.ep.used[data-endpoint], li.ep.skipped[data-endpoint][data-reason][data-traffic (space-separated)],
// #search, #shown, #families tr[data-family].

import { createHash } from 'node:crypto';
import type { EndpointDoc, ServicePortDoc, StatusDoc } from '../../engine/statusview.js';

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:1.2em;color:#1b1f24}
h1{font-size:1.3em;margin:0 0 .4em}
dl{display:grid;grid-template-columns:max-content auto;gap:.1em 1em;margin:0 0 1em}
dt{font-weight:600}dd{margin:0}
table{border-collapse:collapse;width:100%;margin-bottom:1em}
th,td{border:1px solid #d0d7de;padding:.3em .5em;vertical-align:top;text-align:left}
th{background:#f3f5f7}
ul{margin:0;padding-left:1em}
small{color:#57606a}
.forward{color:#116329}.drop{color:#9a6700}.reject,.err{color:#b42318}
.reason{font-weight:600;color:#9a6700}
#search{width:30em;max-width:90%;padding:.3em;font-size:1em;margin-bottom:.5em}
tr[hidden]{display:none}
`;

const SCRIPT = `
(() => {
  const box = document.getElementById('search');
  const shown = document.getElementById('shown');
  const rows = Array.from(document.querySelectorAll('tr.svc'));
  function apply() {
    const words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
    let n = 0;
    for (const r of rows) {
      const hit = words.every((w) => r.dataset.search.includes(w));
      r.hidden = !hit;
      if (hit) n++;
    }
    shown.textContent = n + ' of ' + rows.length + ' service ports';
  }
  box.addEventListener('input', apply);
  apply();
})();
`;

const sha256 = (s: string) => `'sha256-${createHash('sha256').update(s).digest('base64')}'`;

/** Allows exactly the page's own style and script; nothing is loaded from anywhere. */
export const STATUS_PAGE_CSP = `default-src 'none'; style-src ${sha256(STYLE)}; script-src ${sha256(SCRIPT)}`;

const ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export function escapeHTML(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESC[c]!);
}
const e = escapeHTML;

function familiesTable(doc: StatusDoc): string {
  const rows = doc.families.map((f) => {
    const s = f.lastSync;
    const err = f.lastError
      ? `<span class="err">${e(f.lastError.time)}: ${e(f.lastError.message)}</span>` +
        (f.failuresSinceSuccess > 0 ? ` <small>(${f.failuresSinceSuccess} failed since the last success)</small>` : '')
      : 'none';
    const r = f.lastRepair;
    const repairs = r
      ? `${f.repairs}, last ${e(r.time)} after ${(r.seconds * 1000).toFixed(0)} ms: ${e(r.reason)} (${e(r.detail)})`
      : String(f.repairs);
    const c = f.canary;
    const canary = !c
      ? 'off'
      : !c.healthy
        ? `<span class="err">failing since ${e(c.since ?? '')}: ${e(c.reason)}</span>`
        : c.noRoute
          ? `<span class="err">blind: no route from this node to ${e(c.service)}, probes not counted</span>`
          : `healthy (${c.probes} probes, ${c.failures} failed, ${c.discarded} not counted)`;
    return (
      `<tr data-family="${e(f.family)}"><td>${e(f.family)}</td>` +
      `<td class="time">${s ? e(s.time) : 'never'}</td>` +
      `<td class="duration">${s ? `${(s.durationSeconds * 1000).toFixed(1)} ms` : ''}</td>` +
      `<td class="kind">${s ? (s.full ? 'full' : 'partial') : ''}</td>` +
      `<td class="ports">${f.servicePorts}</td><td class="error">${err}</td>` +
      `<td class="repairs">${repairs}</td><td class="canary">${canary}</td></tr>`
    );
  });
  return (
    '<table id="families"><thead><tr><th>IP family</th><th>Last sync</th><th>Duration</th><th>Full or partial</th>' +
    `<th>Service ports</th><th>Last error</th><th>Repairs</th><th>Datapath canary</th></tr></thead><tbody>${rows.join('')}</tbody></table>`
  );
}

function epNote(ep: EndpointDoc): string {
  const where = [ep.node || 'no node', ep.local ? 'this node' : '', ep.zone ? `zone ${ep.zone}` : ''].filter(Boolean);
  return where.join(' · ');
}

/** One item per endpoint and reason; the kinds of traffic sharing a reason share the item. */
function skippedItems(ep: EndpointDoc): string[] {
  const byReason = new Map<string, { text: string; detail: string; traffic: string[] }>();
  for (const s of ep.skipped) {
    const key = `${s.reason}\0${s.detail}`;
    const item = byReason.get(key) ?? { text: s.text, detail: s.detail, traffic: [] };
    item.traffic.push(s.traffic);
    byReason.set(key, item);
  }
  return [...byReason.entries()].map(([key, s]) => {
    const detail = s.detail === s.text ? '' : ` ${e(s.detail)}`;
    return (
      `<li class="ep skipped" data-endpoint="${e(ep.endpoint)}" data-reason="${e(key.split('\0')[0]!)}" data-traffic="${e(s.traffic.join(' '))}">` +
      `<span class="reason">${e(s.text)}</span> ${e(ep.endpoint)} <small>(${e(s.traffic.join(' and '))} traffic)${detail}</small></li>`
    );
  });
}

function serviceRow(r: ServicePortDoc): string {
  const addrs = r.addresses.map((a) => `<li>${e(a.kind)} ${e(a.address)}</li>`).join('');
  const traffic = r.traffic
    .map(
      (t) =>
        `<li class="verdict ${e(t.verdict)}" data-traffic="${e(t.traffic)}">${e(t.traffic)} (${e(t.policy)} policy): ${e(t.detail)}</li>`,
    )
    .join('');
  const used = r.endpoints
    .filter((ep) => ep.usedFor.length > 0)
    .map(
      (ep) =>
        `<li class="ep used" data-endpoint="${e(ep.endpoint)}">${e(ep.endpoint)} <small>${e(epNote(ep))}; ${e(ep.usedFor.join(', '))}</small></li>`,
    )
    .join('');
  const skipped = r.endpoints.flatMap(skippedItems).join('');
  const extra = [
    r.sessionAffinitySeconds > 0 ? `ClientIP affinity ${r.sessionAffinitySeconds}s` : '',
    r.topology ? `topology ${r.topology}` : '',
    r.loadBalancerSourceRanges.length ? `source ranges ${r.loadBalancerSourceRanges.join(', ')}` : '',
  ].filter(Boolean);
  const search = [
    r.servicePort,
    r.family,
    r.protocol,
    ...r.addresses.map((a) => `${a.kind} ${a.address}`),
    ...r.traffic.map((t) => `${t.verdict} ${t.detail}`),
    ...r.endpoints.flatMap((ep) => [ep.endpoint, ep.node, ep.zone, ...ep.skipped.flatMap((s) => [s.reason, s.text])]),
    ...extra,
  ]
    .join(' ')
    .toLowerCase();
  return (
    `<tr class="svc" data-service-port="${e(r.servicePort)}" data-family="${e(r.family)}" data-search="${e(search)}">` +
    `<td><b>${e(r.servicePort)}</b><br><small>${e(r.protocol)} ${e(r.family)}${extra.length ? ` · ${e(extra.join(' · '))}` : ''}</small></td>` +
    `<td><ul>${addrs}</ul></td><td><ul>${traffic}</ul></td>` +
    `<td>${used ? `<ul>${used}</ul>` : '<small>none</small>'}</td>` +
    `<td>${skipped ? `<ul>${skipped}</ul>` : '<small>none</small>'}</td></tr>`
  );
}

export function renderStatusPage(doc: StatusDoc, query: string): string {
  const ips = Object.values(doc.node.ips).filter(Boolean).join(', ');
  const rows = doc.servicePorts.map(serviceRow).join('');
  const empty = doc.initialized
    ? 'No service ports are programmed on this node.'
    : 'Waiting for the first complete list of Services and EndpointSlices; nothing is programmed yet.';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>kube-proxy status: ${e(doc.node.name)}</title><style>${STYLE}</style></head>
<body>
<h1>kube-proxy-ts on node ${e(doc.node.name)}</h1>
<dl id="summary">
<dt>Mode</dt><dd id="mode">${e(doc.mode)}</dd>
<dt>Version</dt><dd id="version">${e(doc.version)}</dd>
<dt>Started</dt><dd id="started">${e(doc.startTime)} <small>(up ${doc.uptimeSeconds} s)</small></dd>
<dt>Node</dt><dd id="node">${e(doc.node.name)} <small>${e(ips)}${doc.node.zone ? ` · zone ${e(doc.node.zone)}` : ''}</small></dd>
</dl>
${familiesTable(doc)}
<input id="search" type="search" placeholder="Filter by service, address, endpoint, node or reason" value="${e(query)}" autofocus>
<span id="shown"></span>
<table id="services"><thead><tr><th>Service port</th><th>Addresses</th><th>Traffic</th><th>Endpoints used</th><th>Endpoints not used, and why</th></tr></thead>
<tbody>${rows || `<tr><td colspan="5">${empty}</td></tr>`}</tbody></table>
<script>${SCRIPT}</script>
</body></html>
`;
}
