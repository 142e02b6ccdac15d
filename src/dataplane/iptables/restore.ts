// The restore-text model: upstream's proxyutil.LineBuffer. A line is a list
// of words joined by single spaces; words that must be one argument with
// spaces (comments) are passed already quoted, exactly as upstream writes them
// (`"<svc> cluster IP"`), while single-word comments stay bare (`ns/svc:p`).

export class LineBuffer {
  private readonly lines: string[] = [];
  private discarded = 0;

  /**
   * @param discard count lines without keeping them (upstream's skipped
   *   buffers of a partial sync exist only for the rule-count metrics).
   */
  constructor(private readonly discard = false) {}

  /** Append one line made of words and nested word lists. */
  write(...words: ReadonlyArray<string | readonly string[]>): void {
    if (this.discard) {
      this.discarded++;
      return;
    }
    const flat: string[] = [];
    for (const w of words) {
      if (typeof w === 'string') flat.push(w);
      else flat.push(...w);
    }
    this.lines.push(flat.join(' '));
  }

  writeLine(line: string): void {
    if (this.discard) this.discarded++;
    else this.lines.push(line);
  }

  get count(): number {
    return this.lines.length + this.discarded;
  }

  text(): string {
    return this.lines.length === 0 ? '' : this.lines.join('\n') + '\n';
  }
}

/** `:NAME - [0:0]` (upstream MakeChainLine). */
export function chainLine(name: string): string {
  return `:${name} - [0:0]`;
}

/** Quote a comment the way upstream does: only when it contains a space. */
export function comment(text: string): string {
  return text.includes(' ') ? `"${text}"` : text;
}

// Every service with k endpoints formats 1/k .. 1/2: remember the small ones.
const PROBABILITIES: string[] = [];

/** Upstream probability(n): fmt.Sprintf("%0.10f", 1.0/float64(n)). */
export function probability(n: number): string {
  if (n < 256) return (PROBABILITIES[n] ??= (1 / n).toFixed(10));
  return (1 / n).toFixed(10);
}
