// What the real server checks of a list or watch request's options before
// serving it, for the streaming watch-list (KEP-3157), and the Status bodies
// it answers with. From apimachinery's internalversion validation
// (ValidateListOptions / validateWatchOptions) and the storage errors:
// - a server with the WatchList feature (beta, on by default since 1.34)
//   takes `sendInitialEvents` on a watch with resourceVersionMatch=NotOlderThan;
// - one with the gate off (1.27-1.31 and 1.33 by default) refuses
//   sendInitialEvents with 422 Invalid, cause field `sendInitialEvents`;
// - one older than 1.27 does not know the parameter, drops it unread, and
//   refuses the resourceVersionMatch beside it with 422 Invalid;
// - a list never takes sendInitialEvents.
// Every refusal is one 422 naming all the fields at fault, as the real one.

import { StoreError } from './store.js';

/** How a server treats `sendInitialEvents`: 'on' (1.34+), 'off' (gate off), 'unknown' (before 1.27). */
export type WatchListSupport = 'on' | 'off' | 'unknown';

/** The annotation of the BOOKMARK that ends a watch-list's initial events. */
export const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

interface FieldError {
  readonly reason: 'FieldValueForbidden' | 'FieldValueNotSupported';
  readonly field: string;
  /** As field.Error's ErrorBody: "Forbidden: ..." or `Unsupported value: "x": supported values: ...`. */
  readonly body: string;
}

const forbidden = (field: string, detail: string): FieldError => ({
  reason: 'FieldValueForbidden',
  field,
  body: `Forbidden: ${detail}`,
});

const notSupported = (field: string, value: string, valid: readonly string[]): FieldError => ({
  reason: 'FieldValueNotSupported',
  field,
  body: `Unsupported value: ${JSON.stringify(value)}: supported values: ${valid.map((v) => JSON.stringify(v)).join(', ')}`,
});

/** The Go bool of a query parameter (strconv.ParseBool's true spellings), or undefined when absent. */
function boolParam(q: URLSearchParams, name: string): boolean | undefined {
  const v = q.get(name);
  if (v === null) return undefined;
  return ['1', 't', 'T', 'TRUE', 'true', 'True'].includes(v);
}

/**
 * sendInitialEvents as the server reads it (undefined: not asked, or not
 * known to the server); throws the 422 the real server would answer.
 */
export function checkListOptions(q: URLSearchParams, watch: boolean, support: WatchListSupport): boolean | undefined {
  const send = support === 'unknown' ? undefined : boolParam(q, 'sendInitialEvents');
  const match = q.get('resourceVersionMatch') ?? '';
  const errs: FieldError[] = [];
  if (watch && support === 'unknown') {
    if (match) errs.push(forbidden('resourceVersionMatch', 'resourceVersionMatch is forbidden for watch'));
  } else if (watch) {
    if (send !== undefined) {
      if (match !== 'NotOlderThan')
        errs.push(
          forbidden('resourceVersionMatch', 'sendInitialEvents requires setting resourceVersionMatch to NotOlderThan'),
        );
      if (support === 'off')
        errs.push(
          forbidden(
            'sendInitialEvents',
            'sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled',
          ),
        );
    }
    if (match) {
      if (send === undefined)
        errs.push(
          forbidden(
            'resourceVersionMatch',
            'resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided',
          ),
        );
      if (match !== 'NotOlderThan') errs.push(notSupported('resourceVersionMatch', match, ['NotOlderThan']));
      if (q.get('continue'))
        errs.push(forbidden('resourceVersionMatch', 'resourceVersionMatch is forbidden when continue is provided'));
    }
  } else if (send !== undefined) {
    errs.push(forbidden('sendInitialEvents', 'sendInitialEvents is forbidden for list'));
  }
  if (errs.length > 0) throw invalidListOptions(errs);
  return send;
}

/** errors.NewInvalid(meta.k8s.io ListOptions, "", errs). */
function invalidListOptions(errs: readonly FieldError[]): StoreError {
  const texts = errs.map((e) => `${e.field}: ${e.body}`);
  const all = texts.length === 1 ? texts[0]! : `[${texts.join(', ')}]`;
  return new StoreError(422, 'Invalid', `ListOptions.meta.k8s.io "" is invalid: ${all}`, {
    name: '',
    group: 'meta.k8s.io',
    kind: 'ListOptions',
    causes: errs.map((e) => ({ reason: e.reason, message: e.body, field: e.field })),
  });
}

/**
 * storage.NewTooLargeResourceVersionError: the watch cache has not reached
 * the version asked for (a 504 Timeout with the cause
 * ResourceVersionTooLarge and a Retry-After of 1 s).
 */
export function tooLargeResourceVersion(asked: number, current: number): StoreError {
  return new StoreError(504, 'Timeout', `Timeout: Too large resource version: ${asked}, current: ${current}`, {
    causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
    retryAfterSeconds: 1,
  });
}
