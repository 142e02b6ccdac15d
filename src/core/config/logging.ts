// Where log lines go, from the logging configuration (component-base
// logs/api/v1 OutputRoutingOptions, alpha behind LoggingAlphaOptions). Pure:
// the platform logger (src/platform/logger.ts) applies it.
//
// Upstream's rules, per format (only the options of the format in use count):
// * not split (the default): every line goes to stderr, unbuffered;
// * text, splitStream: lines klog marks "I" go to stdout, the rest (warnings,
//   errors) to stderr (logs/api/v1/text.go klogMsgRouter);
// * json, splitStream: lines below error level go to stdout, errors to stderr
//   (logs/json/json.go; klog's warnings are info-level there);
// * infoBufferSize > 0 (split only): stdout is buffered up to that many bytes,
//   flushed when a line would not fit, every log-flush-frequency, and at exit.
//   A line longer than the buffer is written at once. Capped at 2 GiB.

import { quantityValue } from './quantity.js';
import type { LoggingConfiguration } from './types.js';

const MAX_BUFFER = 2 * 1024 * 1024 * 1024;

export interface LogOutput {
  /** Info lines to stdout, the rest to stderr; false: everything to stderr. */
  readonly splitStream: boolean;
  /** With splitStream, the lowest level that goes to stderr. */
  readonly errorsFrom: 'warn' | 'error';
  /** Bytes of stdout buffered; 0 = unbuffered. */
  readonly infoBufferBytes: number;
  /** How often a buffered stdout is flushed at the latest. */
  readonly flushFrequencyMs: number;
}

/** The routing for a validated configuration (infoBufferSize parses; format is text or json). */
export function logOutput(logging: LoggingConfiguration, flushFrequencyMs: number): LogOutput {
  const json = logging.format === 'json';
  const o = (json ? logging.options?.json : logging.options?.text) ?? {};
  const splitStream = o.splitStream === true;
  const size = splitStream ? quantityValue(o.infoBufferSize ?? '0') : 0;
  return {
    splitStream,
    errorsFrom: json ? 'error' : 'warn',
    infoBufferBytes: Math.min(Math.max(size, 0), MAX_BUFFER),
    flushFrequencyMs,
  };
}
