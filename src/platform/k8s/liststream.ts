// A list reply parsed as it arrives, one item at a time. A first list is
// served from the API server's watch cache in one reply (limit is ignored
// there), so at 10k EndpointSlices the reply is tens of MB of JSON: read
// whole, it sat in memory three times at once (the chunks, their
// concatenation and the decoded text) beside the parsed objects, and that
// was the proxy's peak. Here each element of the reply's top-level "items"
// array is cut out of the byte stream and parsed on its own as soon as it is
// complete, so the raw text held at any time is one item's; everything
// outside the items (kind, metadata with resourceVersion and continue) is
// parsed at the end as before.
//
// Only JSON's structure is tracked (depth, strings, escapes): the bytes
// that matter are ASCII, and UTF-8's multi-byte sequences never contain an
// ASCII byte, so the text is cut on byte boundaries that are character
// boundaries. For any reply with at most one top-level "items" key the
// result is what JSON.parse of the whole text would give, and a malformed
// one throws a SyntaxError as JSON.parse would.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
/** Space, tab, line feed, carriage return. */
const isSpace = (b: number): boolean => b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;
/** `"items"` with its quotes: the key whose array is streamed. */
const ITEMS_KEY = Buffer.from('"items"');

export class ListBodyParser {
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** Inside the top-level "items" array (at depth 2 and below). */
  private inItems = false;
  /** The last string at depth 1 (a key when a colon follows), up to ITEMS_KEY's length + 1 bytes. */
  private key: number[] = [];
  private keyIsItems = false;
  /** The last item ended with a comma (another must follow). */
  private afterComma = false;
  /** Bytes of the item being read (chunks of it), or null between items. */
  private item: Buffer[] | null = null;
  /** Everything but the items, to parse at the end. */
  private readonly skeleton: Buffer[] = [];
  private readonly items: unknown[] = [];

  /** Feed the next chunk of the reply. Throws SyntaxError on an item that is not JSON. */
  push(chunk: Buffer): void {
    let from = 0; // start of the bytes not yet handed to the skeleton or the item
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i]!;
      if (this.inString) {
        if (this.depth === 1 && this.key.length <= ITEMS_KEY.length) this.key.push(b);
        if (this.escaped) this.escaped = false;
        else if (b === BACKSLASH) this.escaped = true;
        else if (b === QUOTE) this.inString = false;
        continue;
      }
      if (this.inItems && this.depth === 2) {
        if (this.item === null && !isSpace(b) && b !== COMMA && b !== CLOSE_BRACKET) {
          // An item starts: what came before it belongs to the skeleton.
          this.keep(chunk.subarray(from, i));
          from = i;
          this.item = [];
          this.afterComma = false;
        } else if (this.item !== null && (b === COMMA || b === CLOSE_BRACKET)) {
          // The item ends before this byte; the comma after it is not kept.
          this.item.push(chunk.subarray(from, i));
          this.finishItem();
          from = b === COMMA ? i + 1 : i;
          this.afterComma = b === COMMA;
        } else if (b === CLOSE_BRACKET && this.afterComma) {
          // "[1,]": keep a comma so that the skeleton fails to parse, as the whole text would.
          this.keep(chunk.subarray(from, i));
          this.keep(Buffer.from(','));
          from = i;
        }
      }
      switch (b) {
        case QUOTE:
          this.inString = true;
          if (this.depth === 1) this.key = [b];
          break;
        case COLON:
          if (this.depth === 1) this.keyIsItems = ITEMS_KEY.equals(Buffer.from(this.key));
          break;
        case COMMA:
          if (this.depth === 1) this.keyIsItems = false;
          break;
        case OPEN_BRACE:
          this.depth++;
          break;
        case OPEN_BRACKET:
          this.depth++;
          if (this.depth === 2 && this.keyIsItems) this.inItems = true;
          break;
        case CLOSE_BRACE:
        case CLOSE_BRACKET:
          this.depth--;
          if (this.depth === 1) this.inItems = false;
          break;
      }
    }
    if (this.item !== null) this.item.push(chunk.subarray(from));
    else this.keep(chunk.subarray(from));
  }

  /** The whole reply, as JSON.parse of its text would give it; undefined for an empty reply. */
  end(): unknown {
    if (this.item !== null) this.finishItem(); // a truncated reply: its parse fails below or here
    const text = Buffer.concat(this.skeleton).toString('utf8');
    if (text === '' && this.items.length === 0) return undefined;
    const body = JSON.parse(text) as unknown;
    if (this.items.length > 0 || this.sawItems(body)) (body as { items: unknown[] }).items = this.items;
    return body;
  }

  /** Copied: a view would keep the whole chunk, and with it the items' text, until the end. */
  private keep(bytes: Buffer): void {
    if (bytes.length > 0) this.skeleton.push(Buffer.from(bytes));
  }

  private sawItems(body: unknown): boolean {
    return typeof body === 'object' && body !== null && Array.isArray((body as { items?: unknown }).items);
  }

  private finishItem(): void {
    const parts = this.item!;
    this.item = null;
    const text = (parts.length === 1 ? parts[0]! : Buffer.concat(parts)).toString('utf8');
    this.items.push(JSON.parse(text));
  }
}
