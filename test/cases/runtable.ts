// runPacketFlowTable: runs the shared packet-flow table (packetflow.ts)
// against one mode's renderer -> Fake -> trace. Every mode's
// test/dataplane/<mode>-packetflow.test.ts is one call of it.
//
// A mode that cannot honour some cases says so in data: each skip names the
// cases it covers and why (in the manner of hono's shared router test suite,
// where each router lists what it skips with a reason). A skipped case
// registers no test at all (nothing is marked skipped or todo); instead one
// more test checks that every skip has a reason and still matches a case, so
// a skip outlives neither the limitation nor a renamed case.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ProxyMode } from '../../src/core/types.js';
import type { TracePacket } from '../../src/dataplane/trace.js';
import {
  expectedFor,
  PACKET_FLOW_SCENARIOS,
  sameOutput,
  type FlowExpect,
  type PacketFlow,
  type Scenario,
} from './packetflow.js';
import { scenarioLocalIPs } from './resolve.js';

/** What the table compares of a trace (every mode's TraceResult has these). */
export interface FlowResult {
  readonly output: string;
  readonly masq: boolean;
  /** Shown when a case fails. */
  readonly matched: readonly string[];
}

export interface PacketFlowSkip {
  /** Why the mode does not honour these cases; required and shown by the skip check. */
  readonly reason: string;
  /** Scenario names (exact); every scenario when absent. */
  readonly scenarios?: readonly string[];
  /** Flow names (exact) inside those scenarios; every flow when absent. */
  readonly flows?: readonly string[];
  /** A condition on the case, for skips that follow from semantics rather than names. */
  readonly when?: (s: Scenario, f: PacketFlow, want: FlowExpect) => boolean;
  /** 'case' (default): the case does not run. 'masq': it runs, but masquerade is not compared. */
  readonly part?: 'case' | 'masq';
}

export interface PacketFlowMode<F> {
  readonly mode: ProxyMode;
  /** Prefix of the suite names; default the mode. */
  readonly label?: string;
  /** Render the scenario and load the result into a fresh Fake. */
  load(s: Scenario): F;
  trace(fake: F, packet: TracePacket, localIPs: readonly string[]): FlowResult;
  readonly skip?: readonly PacketFlowSkip[];
}

function matches(k: PacketFlowSkip, s: Scenario, f: PacketFlow, want: FlowExpect): boolean {
  if (k.scenarios !== undefined && !k.scenarios.includes(s.name)) return false;
  if (k.flows !== undefined && !k.flows.includes(f.name)) return false;
  return k.when === undefined || k.when(s, f, want);
}

/** One case of the table as a mode runs it. */
export interface FlowCase {
  readonly flow: PacketFlow;
  readonly want: FlowExpect;
  /** Compare masquerade (false when a 'masq' skip covers the case). */
  readonly checkMasq: boolean;
}

/**
 * The cases of `s` that `mode` runs, with what it expects. Records in `used`
 * which skips matched (by index).
 */
export function casesFor(
  s: Scenario,
  mode: ProxyMode,
  skips: readonly PacketFlowSkip[] = [],
  used: Set<number> = new Set(),
): FlowCase[] {
  const out: FlowCase[] = [];
  for (const flow of s.flows) {
    const want = expectedFor(flow, mode);
    let run = true;
    let checkMasq = true;
    skips.forEach((k, i) => {
      if (!matches(k, s, flow, want)) return;
      used.add(i);
      if ((k.part ?? 'case') === 'case') run = false;
      else checkMasq = false;
    });
    if (run) out.push({ flow, want, checkMasq });
  }
  return out;
}

export function runPacketFlowTable<F>(m: PacketFlowMode<F>): void {
  const label = m.label ?? m.mode;
  const skips = m.skip ?? [];
  const used = new Set<number>();
  for (const s of PACKET_FLOW_SCENARIOS) {
    const cases = casesFor(s, m.mode, skips, used);
    if (cases.length === 0) continue;
    describe(`${label} packet flow: ${s.name} (#${s.refs.join(', #')})`, () => {
      const fake = m.load(s);
      for (const { flow: f, want, checkMasq } of cases) {
        test(`${f.name}: ${f.protocol} ${f.src} -> ${f.dst}:${f.port}`, () => {
          const got = m.trace(
            fake,
            { src: f.src, dst: f.dst, port: f.port, protocol: f.protocol },
            scenarioLocalIPs(s),
          );
          assert.ok(
            sameOutput(got.output, want.output),
            `output ${JSON.stringify(got.output)}, want ${JSON.stringify(want.output)}\n${got.matched.join('\n')}`,
          );
          if (checkMasq) assert.equal(got.masq, want.masq, `masq\n${got.matched.join('\n')}`);
        });
      }
    });
  }
  test(`${label} packet flow: every skip has a reason and matches a case`, () => {
    skips.forEach((k, i) => {
      assert.ok(k.reason.trim().length > 0, `skip #${i} has no reason`);
      assert.ok(used.has(i), `skip #${i} (${k.reason}) matches no case of the table`);
    });
  });
}
