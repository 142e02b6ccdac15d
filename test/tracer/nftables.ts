// Packet tracer over the nftables Fake for the tests: a thin wrapper of the
// pure tracer in src/dataplane/nftables/trace.ts (which see for the hook path
// and the upstream nftablesTracer rules it follows), always strict: unknown
// syntax throws, the tracer must understand every rule the renderer writes,
// and a 'maps' layout interval map must partition its slots exactly.
import type { Fake } from '../../src/dataplane/nftables/fake.js';
import { traceNftPacket, type TracePacket } from '../../src/dataplane/nftables/trace.js';

export type { TracePacket };

/** What the tests compare (the full result also has steps, verdict and candidates). */
export interface TraceResult {
  /** "" | "ip:port, ip:port" | "REJECT" | "DROP" | "ACCEPT" (joined in order). */
  readonly output: string;
  readonly masq: boolean;
  /** Rules that matched, as "chain: rule". */
  readonly matched: readonly string[];
}

/**
 * Trace one new connection's first packet. `localIPs` are the node's
 * addresses (loopback is always local).
 */
export function tracePacket(fake: Fake, packet: TracePacket, localIPs: readonly string[]): TraceResult {
  const r = traceNftPacket(fake, packet, localIPs, { strict: true });
  return { output: r.output, masq: r.masq, matched: r.matched };
}
