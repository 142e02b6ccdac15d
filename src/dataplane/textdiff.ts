// textdiff: the line diff behind `kube-proxy-ts diff`, shared by the modes
// whose state is lists of text lines (iptables chains in iptables/diff.ts,
// nftables chains and sets in nftables/tablediff.ts): aligning two lists,
// and printing the changes with a few unchanged lines around each. What a
// line is, and how two spellings of it compare, stays with the mode. Pure.

export type DiffOp = ' ' | '+' | '-';

export interface DiffLine {
  readonly op: DiffOp;
  /** The line's text: the old spelling for ' ' and '-', the new one for '+'. */
  readonly rule: string;
}

/** Above this many cells the middle part of a list is not aligned (shown as removed + added). */
const MAX_LCS_CELLS = 4_000_000;

/**
 * Line diff of two lists: common prefix/suffix, then an LCS of the middle.
 * Lines are equal when their `canon` forms are (default: their text).
 */
export function diffLines(
  before: readonly string[],
  after: readonly string[],
  canon: (line: string) => string = (line) => line,
): DiffLine[] {
  const a = before.map(canon);
  const b = after.map(canon);
  let pre = 0;
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
  let suf = 0;
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
  const out: DiffLine[] = before.slice(0, pre).map((rule) => ({ op: ' ', rule }));
  const am = a.slice(pre, a.length - suf);
  const bm = b.slice(pre, b.length - suf);
  out.push(...middle(am, bm, before.slice(pre, before.length - suf), after.slice(pre, after.length - suf)));
  out.push(...before.slice(before.length - suf).map((rule): DiffLine => ({ op: ' ', rule })));
  return out;
}

function middle(a: string[], b: string[], aText: readonly string[], bText: readonly string[]): DiffLine[] {
  const n = a.length,
    m = b.length;
  if (n * m > MAX_LCS_CELLS) {
    return [
      ...aText.map((rule): DiffLine => ({ op: '-', rule })),
      ...bText.map((rule): DiffLine => ({ op: '+', rule })),
    ];
  }
  // lcs[i][j] = LCS length of a[i..] and b[j..], one row per i.
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
    }
  }
  const out: DiffLine[] = [];
  let i = 0,
    j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      out.push({ op: ' ', rule: aText[i]! });
      i++;
      j++;
    } else if (j < m && (i === n || lcs[i]![j + 1]! >= lcs[i + 1]![j]!)) {
      out.push({ op: '+', rule: bText[j]! });
      j++;
    } else {
      out.push({ op: '-', rule: aText[i]! });
      i++;
    }
  }
  return out;
}

/**
 * The changed lines of one diff with `context` unchanged lines around each,
 * one output line per kept line (`show` spells it, after its op), and one
 * " ..." line wherever unchanged lines were left out. Each line ends in "\n".
 */
export function contextText(lines: readonly DiffLine[], context: number, show: (text: string) => string): string {
  const keep = lines.map(
    (l, i) => l.op !== ' ' || lines.slice(Math.max(0, i - context), i + context + 1).some((x) => x.op !== ' '),
  );
  let out = '';
  let skipped = false;
  lines.forEach((l, i) => {
    if (!keep[i]) {
      if (!skipped) out += ' ...\n';
      skipped = true;
      return;
    }
    skipped = false;
    out += `${l.op}${show(l.rule)}\n`;
  });
  return out;
}
