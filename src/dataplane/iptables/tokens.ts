// Tokenising iptables rule text the way iptables-restore does: words split on
// whitespace, double quotes group words (and are removed), `\"` escapes.

export function tokenize(line: string): string[] | null {
  const out: string[] = [];
  let cur = '';
  let inWord = false;
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (ch === '\\' && i + 1 < line.length && line[i + 1] === '"') {
      cur += '"';
      i++;
      inWord = true;
      continue;
    }
    if (ch === '"') {
      quoted = !quoted;
      inWord = true;
      continue;
    }
    if (!quoted && (ch === ' ' || ch === '\t')) {
      if (inWord) {
        out.push(cur);
        cur = '';
        inWord = false;
      }
      continue;
    }
    cur += ch;
    inWord = true;
  }
  if (quoted) return null;
  if (inWord) out.push(cur);
  return out;
}

/** Value following `flag` (first occurrence), or null. */
export function flagValue(tokens: readonly string[], flag: string): string | null {
  const i = tokens.indexOf(flag);
  return i >= 0 && i + 1 < tokens.length ? tokens[i + 1]! : null;
}

/** The -j/-g target of a rule, or null for a rule without one. */
export function ruleTarget(tokens: readonly string[]): string | null {
  return flagValue(tokens, '-j') ?? flagValue(tokens, '-g');
}
