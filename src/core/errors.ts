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
  // The API server answered with a failure Status (ApiStatusError: HTTP status, reason, Retry-After).
  | 'KPT_API_STATUS'
  // A watch stream from the API server broke: an event we cannot decode, or the connection closed mid-stream.
  | 'KPT_API_STREAM'
  // The caller's AbortSignal fired before the operation finished.
  | 'KPT_ABORTED'
  | 'KPT_BUG'
  | SystemErrorCode;

/**
 * Node's name for an OS error ('ETIMEDOUT', 'EADDRINUSE'), carried only by a
 * SystemError. The set is the OS's, so only the shape is checked here.
 */
export type SystemErrorCode = `E${string}`;

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

/**
 * A failure we detect ourselves that Node reports with an OS error code when
 * the kernel notices it first (our request timeout is the socket's
 * ETIMEDOUT), so it carries that code: code that reads Node's `err.code`
 * handles both alike.
 */
export class SystemError extends ProxyError {
  constructor(code: SystemErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'SystemError';
  }
}

export function hasCode(err: unknown, code: ErrorCode): boolean {
  return err instanceof ProxyError && err.code === code;
}
