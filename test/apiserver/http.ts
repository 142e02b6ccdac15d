// Small HTTP helpers for the test API server: Status bodies shaped like the
// real server's, JSON replies, body reading, and RFC 7386 merge patch.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ResourceDef } from './resources.js';
import type { Obj } from './store.js';

/** A metav1.Status failure body, as the real server sends with 4xx/5xx (and inside watch ERROR events). */
export function statusBody(
  code: number,
  reason: string,
  message: string,
  details?: Record<string, unknown>,
): Record<string, unknown> {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    ...(details ? { details } : {}),
    code,
  };
}

export function sendJSON(res: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/** A Status reply; details.retryAfterSeconds also sets Retry-After, as the real server's responsewriters. */
export function sendStatus(
  res: ServerResponse,
  code: number,
  reason: string,
  message: string,
  details?: Record<string, unknown>,
): void {
  const retry = details?.['retryAfterSeconds'];
  if (typeof retry === 'number' && retry > 0) res.setHeader('Retry-After', String(retry));
  sendJSON(res, code, statusBody(code, reason, message, details));
}

/** Objects carry kind/apiVersion in single-object replies and watch events (not in list items). */
export function withKind(def: ResourceDef, obj: Obj): Obj {
  return { kind: def.kind, apiVersion: def.apiVersion, ...obj };
}

const MAX_BODY = 3 * 1024 * 1024;

export class BadRequest extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

export async function readJSON(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_BODY) throw new BadRequest(413, 'RequestEntityTooLarge', 'request body too large');
    chunks.push(c as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new BadRequest(400, 'BadRequest', 'request body is not valid JSON');
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** RFC 7386 JSON merge patch: objects merge recursively, null deletes, anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return structuredClone(patch);
  const out: Record<string, unknown> = isPlainObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}
