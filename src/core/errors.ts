// Typed errors with stable codes (docs/architecture.md, the layers): callers branch on
// `code`, never on message text. BugError marks a broken invariant, apart
// from the expected failures below.

export type ErrorCode =
  | 'KPT_CONFIG_INVALID'
  | 'KPT_FLAG_INVALID'
  | 'KPT_CONFIG_FILE'
  | 'KPT_INPUT_INVALID'
  | 'KPT_SYNC_FAILED'
  | 'KPT_EXEC_FAILED'
  | 'KPT_NOT_FOUND'
  | 'KPT_BUSY'
  // The kernel's answer (a netlink reply, `nft -j` output) is not in a shape we read.
  | 'KPT_LIVE_STATE_UNREADABLE'
  // Outside what this build, this Node or an encoder supports; a fallback may exist.
  | 'KPT_UNSUPPORTED'
  // A packet trace could not follow the rules (a loop, a missing chain, an unknown option).
  | 'KPT_TRACE_FAILED'
  | 'KPT_BUG';

export class ProxyError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ProxyError';
  }
}

/** A broken invariant: a bug in this program, never bad input. */
export class BugError extends ProxyError {
  constructor(message: string) {
    super('KPT_BUG', message);
    this.name = 'BugError';
  }
}

export function hasCode(err: unknown, code: ErrorCode): boolean {
  return err instanceof ProxyError && err.code === code;
}
