// /flagz (upstream KEP-4828) on the metrics server: every flag with its value
// in this process, sorted by name, as text/plain with upstream's header (and a
// separator picked at random per process, as upstream, so the text is not
// scraped), or as upstream's structured config.k8s.io/v1beta1 Flagz object
// when asked for by its media type or with ?format=json.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { negotiate, NOT_ACCEPTABLE, structuredContentType } from './negotiate.js';
import { COMPONENT } from './statusz.js';

const WARNING =
  'Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees and is for debugging purposes only.';
const DELIMITERS = [':', ': ', '=', ' '];

export function flagzText(flags: Readonly<Record<string, string>>, delim: string): string {
  const keys = Object.keys(flags).sort();
  return `\n${COMPONENT} flags\n${WARNING}\n\n${keys.map((k) => `${k}${delim}${flags[k]}\n`).join('')}`;
}

export function flagzObject(flags: Readonly<Record<string, string>>) {
  return { kind: 'Flagz', apiVersion: 'config.k8s.io/v1beta1', metadata: { name: COMPONENT }, flags };
}

/** A request handler serving `flags`; the text is rendered once (the flags never change). */
export function flagzHandler(
  flags: Readonly<Record<string, string>>,
): (req: IncomingMessage, res: ServerResponse) => void {
  const text = flagzText(flags, DELIMITERS[Math.floor(Math.random() * DELIMITERS.length)]!);
  const json = JSON.stringify(flagzObject(flags));
  return (req, res) => {
    const asJSON = new URL(req.url ?? '/', 'http://x').searchParams.get('format') === 'json';
    const format = asJSON ? 'structured' : negotiate(req.headers.accept, 'Flagz', false);
    const [status, type, body] =
      format === null
        ? [406, 'text/plain; charset=utf-8', NOT_ACCEPTABLE]
        : format === 'structured'
          ? [200, asJSON ? 'application/json' : structuredContentType('Flagz'), json]
          : [200, 'text/plain; charset=utf-8', text];
    res.writeHead(status, { 'Content-Type': type, 'X-Content-Type-Options': 'nosniff' });
    res.end(body);
  };
}
