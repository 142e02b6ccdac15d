// The status document (src/engine/statusview.ts) as terminal tables: what
// `kube-proxy-ts status` prints. Same content as the /statusz page: a header
// line, the families' last syncs, then one block per service port with its
// addresses, what each kind of traffic does, the endpoints used and, for every
// endpoint not used, why. Cells may span several lines; columns are aligned.

import type { EndpointDoc, ServicePortDoc, StatusDoc } from '../engine/statusview.js';

/** Rows of multi-line cells -> aligned text; the last column is not padded. spaced: a blank line after each row. */
export function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>, spaced = false): string {
  const gap = '  ';
  const all = [header, ...rows].map((r) => r.map((c) => c.split('\n')));
  const widths = header.map((_, i) => Math.max(...all.map((r) => Math.max(...(r[i] ?? ['']).map((l) => l.length)))));
  const out: string[] = [];
  for (const r of all) {
    const height = Math.max(...r.map((c) => c.length));
    for (let line = 0; line < height; line++) {
      const cells = widths.map((w, i) => {
        const text = r[i]?.[line] ?? '';
        return i === widths.length - 1 ? text : text.padEnd(w);
      });
      out.push(cells.join(gap).trimEnd());
    }
    if (spaced && r !== all[0] && r !== all[all.length - 1]) out.push('');
  }
  return out.join('\n') + '\n';
}

function duration(seconds: number): string {
  return seconds < 1 ? `${(seconds * 1000).toFixed(1)} ms` : `${seconds.toFixed(2)} s`;
}

function upFor(seconds: number): string {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor(seconds / 60) % 60;
  const s = seconds % 60;
  return h > 0 ? `${h}h${m}m` : m > 0 ? `${m}m${s}s` : `${s}s`;
}

const short = (traffic: readonly string[]) => traffic.map((t) => (t === 'internal' ? 'int' : 'ext')).join(',');

function skippedLines(ep: EndpointDoc): string[] {
  const byReason = new Map<string, { text: string; detail: string; traffic: string[] }>();
  for (const s of ep.skipped) {
    const key = `${s.reason}\0${s.detail}`;
    const item = byReason.get(key) ?? { text: s.text, detail: s.detail, traffic: [] };
    item.traffic.push(s.traffic);
    byReason.set(key, item);
  }
  return [...byReason.values()].map(
    (s) => `${ep.endpoint} ${s.text} (${short(s.traffic)})${s.detail === s.text ? '' : `: ${s.detail}`}`,
  );
}

function portRow(r: ServicePortDoc): string[] {
  const used = r.endpoints.filter((e) => e.usedFor.length > 0);
  const extras = [
    r.sessionAffinitySeconds > 0 ? `affinity ${r.sessionAffinitySeconds}s` : '',
    r.topology ? r.topology : '',
  ].filter(Boolean);
  return [
    [`${r.servicePort}`, `${r.protocol} ${r.family}`, ...extras].join('\n'),
    r.addresses.map((a) => `${a.kind} ${a.address}`).join('\n'),
    r.traffic
      .map((t) => `${t.traffic} ${t.policy}: ${t.verdict}${t.verdict === 'forward' ? ` (${t.endpoints.length})` : ''}`)
      .join('\n'),
    used.length ? used.map((e) => `${e.endpoint} (${short(e.usedFor)})`).join('\n') : '-',
    r.endpoints.flatMap(skippedLines).join('\n') || '-',
  ];
}

/** `filter`: the words rows were filtered by, for the message when none is left. */
export function statusTable(doc: StatusDoc, filter: readonly string[] = []): string {
  const ips = Object.values(doc.node.ips).filter(Boolean).join(', ');
  const where = [ips, doc.node.zone ? `zone ${doc.node.zone}` : ''].filter(Boolean).join(', ');
  const head =
    `kube-proxy-ts ${doc.version} on node ${doc.node.name}${where ? ` (${where})` : ''}, ` +
    `mode ${doc.mode}, started ${doc.startTime}, up ${upFor(doc.uptimeSeconds)}\n\n`;
  const fams = table(
    ['FAMILY', 'LAST SYNC', 'DURATION', 'KIND', 'PORTS', 'LAST ERROR', 'REPAIRS'],
    doc.families.map((f) => [
      f.family,
      f.lastSync?.time ?? 'never',
      f.lastSync ? duration(f.lastSync.durationSeconds) : '-',
      f.lastSync ? (f.lastSync.full ? 'full' : 'partial') : '-',
      String(f.servicePorts),
      f.lastError
        ? `${f.lastError.time} ${f.lastError.message}` +
          (f.failuresSinceSuccess > 0 ? ` (${f.failuresSinceSuccess} failures since the last success)` : '')
        : 'none',
      // A server older than the repairs field sends none.
      f.lastRepair
        ? `${f.repairs} (last ${f.lastRepair.time}, ${f.lastRepair.reason}, ${duration(f.lastRepair.seconds)})`
        : String(f.repairs ?? 0),
    ]),
  );
  if (doc.servicePorts.length === 0) {
    const why = filter.length
      ? `No service port matches ${filter.map((w) => JSON.stringify(w)).join(' ')}.`
      : doc.initialized
        ? 'No service ports are programmed on this node.'
        : 'Waiting for the first complete list of Services and EndpointSlices; nothing is programmed yet.';
    return `${head}${fams}\n${why}\n`;
  }
  const ports = table(
    ['SERVICE PORT', 'ADDRESSES', 'TRAFFIC', 'ENDPOINTS USED', 'NOT USED, WHY'],
    doc.servicePorts.map(portRow),
    true,
  );
  return `${head}${fams}\n${ports}`;
}
