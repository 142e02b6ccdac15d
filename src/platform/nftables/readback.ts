// Reading the kube-proxy table back from the kernel before a full sync
// (`nft -j list table <family> kube-proxy`), turned into the driver's
// KernelSnapshot: chain names, set/map names, and the elements of the sets
// and maps the renderer manages, in the same text form the renderer writes.
import { normalizeIP } from '../../core/ip.js';
import type { Element } from '../../dataplane/nftables/objects.js';
import type { KernelSnapshot } from '../../dataplane/nftables/driver.js';
import { MANAGED_SETS } from '../../dataplane/nftables/static.js';
import { ProxyError } from '../../core/errors.js';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function isObj(v: Json | undefined): v is { [k: string]: Json } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** One key field as the renderer writes it: normalised IPs, decimal ports, protocol names. */
function fieldText(v: Json): string {
  if (typeof v === 'number') return String(v);
  if (typeof v === 'string') return normalizeIP(v) ?? v;
  throw new ProxyError('KPT_LIVE_STATE_UNREADABLE', `unexpected key field ${JSON.stringify(v)}`);
}

function keyOf(v: Json): { key: string[]; comment?: string } {
  if (isObj(v) && isObj(v.elem)) {
    const inner = keyOf(v.elem.val ?? null);
    return typeof v.elem.comment === 'string' ? { ...inner, comment: v.elem.comment } : inner;
  }
  if (isObj(v) && Array.isArray(v.concat)) return { key: v.concat.map(fieldText) };
  return { key: [fieldText(v)] };
}

function verdictText(v: Json): string {
  if (isObj(v)) {
    const [k] = Object.keys(v);
    if (k === undefined) throw new ProxyError('KPT_LIVE_STATE_UNREADABLE', 'empty verdict');
    const body = v[k];
    if (isObj(body) && typeof body.target === 'string') return `${k} ${body.target}`;
    return k;
  }
  throw new ProxyError('KPT_LIVE_STATE_UNREADABLE', `unexpected verdict ${JSON.stringify(v)}`);
}

/**
 * Parse `nft -j list table` output. Throws on malformed input: a snapshot we
 * cannot read must fail the sync (which is retried), never be guessed.
 */
export function parseTableJSON(text: string, table: string): KernelSnapshot {
  const doc = JSON.parse(text) as Json;
  if (!isObj(doc) || !Array.isArray(doc.nftables))
    throw new ProxyError('KPT_LIVE_STATE_UNREADABLE', 'not nft JSON output');
  const chains: string[] = [];
  const sets: string[] = [];
  const elements = new Map<string, Element[]>();
  for (const item of doc.nftables) {
    if (!isObj(item)) continue;
    if (isObj(item.chain) && item.chain.table === table && typeof item.chain.name === 'string')
      chains.push(item.chain.name);
    const s = isObj(item.set) ? item.set : isObj(item.map) ? item.map : null;
    if (!s || s.table !== table || typeof s.name !== 'string') continue;
    const name = s.name;
    sets.push(name);
    if (!MANAGED_SETS.has(name)) continue;
    const els: Element[] = [];
    for (const e of Array.isArray(s.elem) ? s.elem : []) {
      if (isObj(item.map)) {
        if (!Array.isArray(e) || e.length !== 2)
          throw new ProxyError('KPT_LIVE_STATE_UNREADABLE', `unexpected map element in ${name}`);
        const { key, comment } = keyOf(e[0]!);
        els.push({
          kind: 'element',
          set: name,
          key,
          value: [verdictText(e[1]!)],
          ...(comment !== undefined ? { comment } : {}),
        });
      } else {
        const { key, comment } = keyOf(e);
        els.push({ kind: 'element', set: name, key, ...(comment !== undefined ? { comment } : {}) });
      }
    }
    elements.set(name, els);
  }
  return { chains, sets, elements };
}
