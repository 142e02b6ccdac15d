// The pure nftables tracer (src/dataplane/nftables/trace.ts, used by
// `explain`) against the test tracer (test/tracer/nftables.ts) on every flow
// of the shared packet-flow table, both endpoint layouts: same output, same
// masquerade decision, same matched rules. On top, the path it records:
// DNAT candidates' probabilities add up to 1, each equal for a Service's
// endpoints, and the steps are the matched rules in order.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { PACKET_FLOW_SCENARIOS } from '../cases/packetflow.js';
import { scenarioConfig, scenarioLocalIPs, scenarioSyncState } from '../cases/resolve.js';
import { Fake } from '../../src/dataplane/nftables/fake.js';
import { nftFamily } from '../../src/dataplane/nftables/names.js';
import { NftablesRenderer } from '../../src/dataplane/nftables/renderer.js';
import type { EndpointLayout } from '../../src/dataplane/nftables/static.js';
import { traceNftPacket } from '../../src/dataplane/nftables/trace.js';
import { tracePacket } from '../tracer/nftables.js';

function loadScenario(s: (typeof PACKET_FLOW_SCENARIOS)[number], layout: EndpointLayout): Fake {
  const fake = new Fake(nftFamily(s.family));
  fake.run(new NftablesRenderer(scenarioConfig(s, 'nftables'), layout).render(scenarioSyncState(s), 0, null).tx);
  return fake;
}

for (const layout of ['upstream', 'lean', 'maps'] as const) {
  describe(`nftables trace.ts agrees with the test tracer (${layout})`, () => {
    for (const s of PACKET_FLOW_SCENARIOS) {
      if (s.only && !s.only.includes('nftables')) continue;
      test(s.name, () => {
        const fake = loadScenario(s, layout);
        for (const f of s.flows) {
          if (f.only && !f.only.includes('nftables')) continue;
          const pkt = { src: f.src, dst: f.dst, port: f.port, protocol: f.protocol };
          const want = tracePacket(fake, pkt, scenarioLocalIPs(s));
          const got = traceNftPacket(fake, pkt, scenarioLocalIPs(s));
          const what = `${f.name}: ${f.src} -> ${f.dst}:${f.port}`;
          assert.equal(got.output, want.output, what);
          assert.equal(got.masq, want.masq, what);
          assert.deepEqual(got.matched, want.matched, what);
          // Steps: the matched rules, a rule matched twice in a row (update + dnat) once.
          assert.deepEqual(got.steps.map((x) => `${x.chain}: ${x.rule}`), want.matched.filter((m, i) => m !== want.matched[i - 1]), what);
          if (got.verdict === 'DNAT') {
            const sum = got.candidates.reduce((n, c) => n + c.probability, 0);
            assert.ok(Math.abs(sum - 1) < 1e-9, `${what}: probabilities add up to ${sum}`);
            for (const c of got.candidates) assert.ok(Math.abs(c.probability - 1 / got.candidates.length) < 1e-9, `${what}: ${c.endpoint} ${c.probability}`);
          }
        }
      });
    }
  });
}
