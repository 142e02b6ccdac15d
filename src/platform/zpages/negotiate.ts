// Content negotiation for /statusz and /flagz, following upstream's zpages:
// text/plain for anything that accepts it (no Accept header, */*, text/*,
// text/plain with at most charset=utf-8), the structured JSON only when asked
// for by its full media type (application/json;v=v1beta1;g=config.k8s.io;as=
// Statusz or Flagz), 406 for everything else. Our addition: a browser asking
// for text/html first gets the HTML page (/statusz only).

export type ZpageFormat = 'text' | 'structured' | 'html';

interface AcceptEntry {
  readonly type: string;
  readonly subtype: string;
  readonly params: ReadonlyMap<string, string>;
  readonly q: number;
}

/** The Accept header's media ranges, highest q first (stable for equal q); malformed ones dropped. */
export function parseAccept(header: string): AcceptEntry[] {
  const out: AcceptEntry[] = [];
  for (const part of header.split(',')) {
    const [range, ...rawParams] = part.split(';').map((x) => x.trim());
    const m = /^([a-z0-9!#$&^_.+*-]+)\/([a-z0-9!#$&^_.+*-]+)$/i.exec(range ?? '');
    if (!m) continue;
    const params = new Map<string, string>();
    let q = 1;
    for (const p of rawParams) {
      const eq = p.indexOf('=');
      if (eq <= 0) continue;
      const k = p.slice(0, eq).trim().toLowerCase();
      const v = p
        .slice(eq + 1)
        .trim()
        .replace(/^"(.*)"$/, '$1');
      if (k === 'q') q = Number.isFinite(Number(v)) ? Number(v) : 0;
      else params.set(k, v);
    }
    if (q > 0) out.push({ type: m[1]!.toLowerCase(), subtype: m[2]!.toLowerCase(), params, q });
  }
  return out
    .map((e, i) => ({ e, i }))
    .sort((a, b) => b.e.q - a.e.q || a.i - b.i)
    .map((x) => x.e);
}

function isPlainText(e: AcceptEntry): boolean {
  if (!((e.type === 'text' || e.type === '*') && (e.subtype === 'plain' || e.subtype === '*'))) return false;
  if (e.params.size === 0) return true;
  return e.params.size === 1 && (e.params.get('charset') ?? '').toLowerCase() === 'utf-8';
}

function isStructured(e: AcceptEntry, kind: 'Statusz' | 'Flagz'): boolean {
  return (
    e.type === 'application' &&
    e.subtype === 'json' &&
    e.params.get('g') === 'config.k8s.io' &&
    e.params.get('v') === 'v1beta1' &&
    e.params.get('as') === kind
  );
}

/** The format to answer with, or null for 406 Not Acceptable. */
export function negotiate(accept: string | undefined, kind: 'Statusz' | 'Flagz', html: boolean): ZpageFormat | null {
  if (accept === undefined || accept.trim() === '') return 'text';
  for (const e of parseAccept(accept)) {
    if (html && e.type === 'text' && e.subtype === 'html') return 'html';
    if (isStructured(e, kind)) return 'structured';
    if (isPlainText(e)) return 'text';
  }
  return null;
}

/** The structured responses' Content-Type. */
export function structuredContentType(kind: 'Statusz' | 'Flagz'): string {
  return `application/json;v=v1beta1;g=config.k8s.io;as=${kind}`;
}

export const NOT_ACCEPTABLE =
  'media type not acceptable, must be: text/plain, or application/json;v=v1beta1;g=config.k8s.io;as=<Statusz|Flagz>\n';
