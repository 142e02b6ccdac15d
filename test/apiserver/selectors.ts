// Label and field selectors as the real API server parses them
// (apimachinery pkg/labels/selector.go and pkg/fields/selector.go), reduced to
// the grammar kube-proxy and kubectl send:
//   labels: `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, comma-joined (AND).
//   fields: `path=v`, `path==v`, `path!=v`, comma-joined (AND), over a per-resource set of paths.
// A malformed selector is a SelectorError, which the server answers with 400.

export class SelectorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SelectorError';
  }
}

type LabelReq =
  { op: 'exists' | 'notexists'; key: string } | { op: 'in' | 'notin'; key: string; values: readonly string[] };

export type Labels = Readonly<Record<string, string>> | undefined;
export type LabelSelector = (labels: Labels) => boolean;

const KEY_RE = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const VALUE_RE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/** Split on commas that are not inside parentheses. */
function splitTerms(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (depth < 0) throw new SelectorError(`unbalanced parentheses in ${JSON.stringify(s)}`);
    if (ch === ',' && depth === 0) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  if (depth !== 0) throw new SelectorError(`unbalanced parentheses in ${JSON.stringify(s)}`);
  out.push(cur);
  return out.map((t) => t.trim());
}

function checkKey(key: string): string {
  if (!KEY_RE.test(key)) throw new SelectorError(`invalid label key ${JSON.stringify(key)}`);
  return key;
}

function checkValue(v: string): string {
  if (v.length > 63 || !VALUE_RE.test(v)) throw new SelectorError(`invalid label value ${JSON.stringify(v)}`);
  return v;
}

function parseLabelTerm(term: string): LabelReq {
  const set = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(term);
  if (set) {
    const values = set[3]!.split(',').map((v) => checkValue(v.trim()));
    return { op: set[2] as 'in' | 'notin', key: checkKey(set[1]!), values };
  }
  const cmp = /^([^=!\s]+)\s*(==|=|!=)\s*(.*)$/.exec(term);
  if (cmp) {
    const op = cmp[2] === '!=' ? 'notin' : 'in';
    return { op, key: checkKey(cmp[1]!), values: [checkValue(cmp[3]!.trim())] };
  }
  if (term.startsWith('!')) return { op: 'notexists', key: checkKey(term.slice(1).trim()) };
  return { op: 'exists', key: checkKey(term) };
}

function matchLabelReq(req: LabelReq, labels: Labels): boolean {
  const has = labels !== undefined && Object.prototype.hasOwnProperty.call(labels, req.key);
  switch (req.op) {
    case 'exists':
      return has;
    case 'notexists':
      return !has;
    case 'in':
      return has && req.values.includes(labels![req.key]!);
    // As upstream: `notin` and `!=` match objects that lack the key.
    case 'notin':
      return !has || !req.values.includes(labels![req.key]!);
  }
}

/** Parse a labelSelector query value; empty or absent matches everything. */
export function parseLabelSelector(s: string | null | undefined): LabelSelector {
  if (s === null || s === undefined || s.trim() === '') return () => true;
  const reqs = splitTerms(s).map((t) => {
    if (t === '') throw new SelectorError(`empty term in label selector ${JSON.stringify(s)}`);
    return parseLabelTerm(t);
  });
  return (labels) => reqs.every((r) => matchLabelReq(r, labels));
}

export type FieldGetter = (obj: unknown) => string;
export type FieldSelector = (obj: unknown) => boolean;

/** Read a dotted path from a JSON object; missing values read as "" (as upstream field sets do). */
export function fieldPath(path: string): FieldGetter {
  const parts = path.split('.');
  return (obj) => {
    let cur: unknown = obj;
    for (const p of parts) {
      if (cur === null || typeof cur !== 'object') return '';
      cur = (cur as Record<string, unknown>)[p];
    }
    return typeof cur === 'string' ? cur : cur === undefined || cur === null ? '' : String(cur);
  };
}

/**
 * Parse a fieldSelector against the fields a resource supports (each resource
 * has its own list upstream; an unknown field is a 400 "field label not supported").
 */
export function parseFieldSelector(s: string | null | undefined, supported: readonly string[]): FieldSelector {
  if (s === null || s === undefined || s.trim() === '') return () => true;
  const reqs = s.split(',').map((term) => {
    const m = /^([^=!\s]+)\s*(==|=|!=)\s*(.*)$/.exec(term.trim());
    if (!m) throw new SelectorError(`invalid field selector term ${JSON.stringify(term)}`);
    const [, path, op, value] = m;
    if (!supported.includes(path!)) throw new SelectorError(`field label not supported: ${path}`);
    const get = fieldPath(path!);
    const want = value!.trim();
    return op === '!=' ? (o: unknown) => get(o) !== want : (o: unknown) => get(o) === want;
  });
  return (obj) => reqs.every((r) => r(obj));
}
