// The tc verdict a BPF_PROG_TEST_RUN gave, held to what the tracer expects
// for the same packet: shared by the tc-only and the XDP-then-tc comparisons
// (ebpf-programs and ebpf-xdp-programs), so both hold the programs to one
// reading of the tracer.
import assert from 'node:assert/strict';
import type { TraceResult } from '../../src/dataplane/ebpf/trace.js';
import { TC_ACT } from '../../src/platform/ebpf/testrun.js';
import type { Parsed } from './frames.js';

/** The packet as sent (destination and port) and how to name it in a failure. */
export interface Sent {
  readonly dst: string;
  readonly port: number;
  readonly what: string;
}

/**
 * tc's return value and the frame it left (out) against the tracer's output:
 * '' untouched, DROP, REJECT (an ICMP port unreachable about the packet), or
 * one of the tracer's candidate endpoints with valid checksums.
 */
export function assertTcVerdict(want: TraceResult, retval: number, out: Parsed, sent: Sent): void {
  const { dst, port, what } = sent;
  const v6 = dst.includes(':');
  switch (want.output) {
    case '':
      assert.equal(retval, TC_ACT.unspec, what);
      assert.equal(`${out.dst}:${out.dport}`, `${dst}:${port}`, what);
      return;
    case 'DROP':
      assert.equal(retval, TC_ACT.shot, what);
      return;
    case 'REJECT':
      assert.equal(retval, TC_ACT.redirect, what);
      assert.ok(out.icmp, `${what}: an ICMP error`);
      assert.deepEqual(
        [out.icmp.type, out.icmp.code, out.icmp.inner.dst, out.icmp.inner.dport, out.l4ok],
        [v6 ? 1 : 3, v6 ? 4 : 3, dst, port, true],
        what,
      );
      return;
    default: {
      const chosen = v6 ? `[${out.dst}]:${out.dport}` : `${out.dst}:${out.dport}`;
      assert.ok(
        want.candidates.some((c) => c.endpoint === chosen),
        `${what}: the program chose ${chosen}`,
      );
      assert.ok(out.l4ok && out.l3ok, `${what}: checksums`);
    }
  }
}
