// Shared by the BPF_PROG_TEST_RUN comparisons of the programs with the
// tracer (ebpf-programs: tc alone; ebpf-xdp-programs: XDP, then tc): the
// maps emptied between scenarios, and the tc verdict held to what the
// tracer expects, so both hold the programs to one reading of the tracer.
import assert from 'node:assert/strict';
import * as L from '../../src/dataplane/ebpf/layout.js';
import type { TraceResult } from '../../src/dataplane/ebpf/trace.js';
import type { EbpfRuntime } from '../../src/platform/ebpf/runtime.js';
import { TC_ACT } from '../../src/platform/ebpf/testrun.js';
import type { Parsed } from './frames.js';
import type { ClientResult } from '../netns/agentclient.js';
import { podsOf } from '../netns/e2e.js';

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

/** Every entry of every map the planner writes or the programs fill (arrays zeroed): a scenario starts empty. */
export function clearMaps(rt: EbpfRuntime): void {
  for (const m of L.MAP_NAMES) {
    // The first check's bitmaps: kpt_hot follows kpt_addrs and kpt_svc_cidrs by itself, and a stale
    // kpt_seen mark only sends a packet to the full look.
    if (m === 'stats' || m === 'hot' || m === 'seen') continue;
    if (m === 'cfg') {
      for (const i of [0, 1]) rt.apply([{ map: 'cfg', op: 'update', key: L.encodeU32(i), value: new Uint8Array(16) }]);
      continue;
    }
    rt.apply(rt.dump(m).map(([k]) => ({ map: m, op: 'delete' as const, key: k })));
  }
}

/**
 * Connections from outside to node1's NodePort whose endpoints are node1-a and node2-a, masqueraded: all
 * answered, both endpoints used, and each saw node1's address towards it (the pod gateway for its own pod,
 * its IP for node2's) and a port of the programs' own range. For IPv6, pass node1's IPv6 addresses.
 */
export function assertMasqueradedByNode1(rs: readonly ClientResult[], n1: { ip: string; podGateway: string }): void {
  assert.ok(
    rs.every((r) => r.ok),
    JSON.stringify(rs),
  );
  assert.deepEqual(podsOf([...rs]), ['node1-a', 'node2-a']);
  for (const r of rs) {
    if (!r.ok) continue;
    const i = r.reply.src.lastIndexOf(':'); // IPv6 too
    const [seen, port] = [r.reply.src.slice(0, i), r.reply.src.slice(i + 1)];
    assert.equal(seen, r.reply.pod === 'node1-a' ? n1.podGateway : n1.ip, `source seen by ${r.reply.pod}`);
    assert.ok(Number(port) >= 1024 && Number(port) < 32768, `a port of the programs' own range: ${port}`);
  }
}
