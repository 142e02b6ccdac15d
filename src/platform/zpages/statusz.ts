// /statusz (upstream KEP-4827 component status page) on the metrics server:
//   text/plain      upstream's layout (header, warning, Started/Up/versions)
//                   plus the proxy's mode, node and each family's last sync
//   structured      upstream's config.k8s.io/v1beta1 Statusz object
//   ?format=json    the Statusz object plus "proxy": the whole status document
//                   (src/engine/statusview.ts), for tools and `kube-proxy-ts status`
//   text/html       the page for people (page.ts)
// Like upstream, the text separator is picked at random per response so that
// nobody mistakes the text for a stable format; tools use the JSON.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { StatusDoc } from '../../engine/statusview.js';
import { negotiate, NOT_ACCEPTABLE, structuredContentType } from './negotiate.js';
import { renderStatusPage, STATUS_PAGE_CSP } from './page.js';

export const COMPONENT = 'kube-proxy';
const WARNING =
  'Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees and is for debugging purposes only.';
const DELIMITERS = [':', ': ', '=', ' '];

/** The document's producer: called per request (it reads the proxier's current state). */
export type StatusSource = () => StatusDoc;

/** Go time.UnixDate in UTC: "Wed Oct 16 21:03:43 UTC 2024" (day of month space-padded). */
export function unixDate(ms: number): string {
  const d = new Date(ms);
  const days = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  const p2 = (n: number) => String(n).padStart(2, '0');
  const time = `${p2(d.getUTCHours())}:${p2(d.getUTCMinutes())}:${p2(d.getUTCSeconds())}`;
  const day = String(d.getUTCDate()).padStart(2, ' ');
  return `${days[d.getUTCDay()]} ${months[d.getUTCMonth()]} ${day} ${time} UTC ${d.getUTCFullYear()}`;
}

/** Upstream's "%d hr %02d min %02d sec". */
export function uptimeText(seconds: number): string {
  const p2 = (n: number) => String(n).padStart(2, '0');
  return `${Math.floor(seconds / 3600)} hr ${p2(Math.floor(seconds / 60) % 60)} min ${p2(seconds % 60)} sec`;
}

function familyLines(doc: StatusDoc, d: string): string[] {
  const lines: string[] = [];
  for (const f of doc.families) {
    const s = f.lastSync;
    lines.push(
      s
        ? `${f.family} last sync${d} ${s.time} (${s.full ? 'full' : 'partial'}, ${s.durationSeconds.toFixed(3)}s, ${f.servicePorts} service ports)`
        : `${f.family} last sync${d} never`,
    );
    if (f.lastError) lines.push(`${f.family} last error${d} ${f.lastError.time} ${f.lastError.message}`);
    const r = f.lastRepair;
    if (r)
      lines.push(
        `${f.family} repairs${d} ${f.repairs}, last ${r.time} after ${r.seconds.toFixed(3)}s (${r.reason}: ${r.detail})`,
      );
    const c = f.canary;
    if (c)
      lines.push(
        !c.healthy
          ? `${f.family} datapath canary${d} failing since ${c.since ?? ''}: ${c.reason}`
          : c.noRoute
            ? `${f.family} datapath canary${d} blind: no route from this node to ${c.service}, probes not counted`
            : `${f.family} datapath canary${d} healthy (${c.probes} probes, ${c.failures} failed)`,
      );
  }
  return lines;
}

export function statuszText(doc: StatusDoc, delim: string): string {
  const lines = [
    '',
    `${COMPONENT} statusz`,
    WARNING,
    '',
    `Started${delim} ${unixDate(Date.parse(doc.startTime))}`,
    `Up${delim} ${uptimeText(doc.uptimeSeconds)}`,
    `Node.js version${delim} ${process.version}`,
    `Binary version${delim} ${doc.version}`,
    `Proxy mode${delim} ${doc.mode}`,
    `Node${delim} ${doc.node.name}`,
    ...familyLines(doc, delim),
    '',
  ];
  return lines.join('\n');
}

/** Upstream's structured object (config.k8s.io/v1beta1 Statusz). */
export function statuszObject(doc: StatusDoc) {
  return {
    kind: 'Statusz',
    apiVersion: 'config.k8s.io/v1beta1',
    metadata: { name: COMPONENT },
    startTime: doc.startTime.replace(/\.\d+Z$/, 'Z'),
    uptimeSeconds: doc.uptimeSeconds,
    binaryVersion: doc.version,
  };
}

function send(res: ServerResponse, status: number, headers: Record<string, string>, body: string): void {
  res.writeHead(status, { 'X-Content-Type-Options': 'nosniff', ...headers });
  res.end(body);
}

export function serveStatusz(req: IncomingMessage, res: ServerResponse, source: StatusSource): void {
  const url = new URL(req.url ?? '/', 'http://x');
  if (url.searchParams.get('format') === 'json') {
    const doc = source();
    send(res, 200, { 'Content-Type': 'application/json' }, JSON.stringify({ ...statuszObject(doc), proxy: doc }));
    return;
  }
  const format = negotiate(req.headers.accept, 'Statusz', true);
  if (format === null) return send(res, 406, { 'Content-Type': 'text/plain; charset=utf-8' }, NOT_ACCEPTABLE);
  const doc = source();
  switch (format) {
    case 'structured':
      return send(res, 200, { 'Content-Type': structuredContentType('Statusz') }, JSON.stringify(statuszObject(doc)));
    case 'html':
      return send(
        res,
        200,
        { 'Content-Type': 'text/html; charset=utf-8', 'Content-Security-Policy': STATUS_PAGE_CSP },
        renderStatusPage(doc, url.searchParams.get('q') ?? ''),
      );
    case 'text': {
      const delim = DELIMITERS[Math.floor(Math.random() * DELIMITERS.length)]!;
      return send(res, 200, { 'Content-Type': 'text/plain; charset=utf-8' }, statuszText(doc, delim));
    }
  }
}
