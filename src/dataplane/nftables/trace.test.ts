// The path the pure nftables tracer (src/dataplane/nftables/trace.ts, used by
// `explain` and the packet-flow tests) records, on every flow of the
// shared packet-flow table, all endpoint layouts (the outputs themselves are
// checked against the expectations by test/dataplane/nftables-packetflow.test.ts):
//   - DNAT candidates are the output's endpoints, their probabilities add up
//     to 1 and are equal for a Service's endpoints;
//   - the steps are the matched rules (a rule matched twice in a row, update
//     then dnat, once), each with a probability in (0, 1];
//   - the verdict agrees with the output.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { PACKET_FLOW_SCENARIOS } from '../../../test/cases/packetflow.js';
import { casesFor } from '../../../test/cases/runtable.js';
import { NFTABLES_FLOW_SKIPS } from '../../../test/dataplane/nftables-fixtures.js';
import { scenarioConfig, scenarioLocalIPs, scenarioSyncState } from '../../../test/cases/resolve.js';
import { Fake } from './fake.js';
import { nftFamily } from './names.js';
import { NftablesPlanner } from '../../platform/nftables/planner.js';
import { ENDPOINT_LAYOUTS, type EndpointLayout } from './static.js';
import { trace } from './trace.js';

function loadScenario(s: (typeof PACKET_FLOW_SCENARIOS)[number], layout: EndpointLayout): Fake {
  const fake = new Fake(nftFamily(s.family));
  fake.run(new NftablesPlanner(scenarioConfig(s, 'nftables'), layout).plan(scenarioSyncState(s), 0, null).tx);
  return fake;
}

for (const layout of ENDPOINT_LAYOUTS) {
  describe(`nftables trace.ts path recording (${layout})`, () => {
    for (const s of PACKET_FLOW_SCENARIOS) {
      const cases = casesFor(s, 'nftables', NFTABLES_FLOW_SKIPS);
      if (cases.length === 0) continue;
      test(s.name, () => {
        const fake = loadScenario(s, layout);
        for (const { flow: f } of cases) {
          const got = trace(fake, { src: f.src, dst: f.dst, port: f.port, protocol: f.protocol }, scenarioLocalIPs(s));
          const what = `${f.name}: ${f.src} -> ${f.dst}:${f.port}`;
          assert.deepEqual(
            got.steps.map((x) => `${x.chain}: ${x.rule}`),
            got.matched.filter((m, i) => m !== got.matched[i - 1]),
            what,
          );
          for (const st of got.steps)
            assert.ok(st.probability > 0 && st.probability <= 1 + 1e-12, `${what}: ${st.chain} p=${st.probability}`);
          const words = got.output === '' ? [] : got.output.split(', ');
          const terminal = words.find((w) => ['DROP', 'REJECT'].includes(w));
          assert.equal(
            got.verdict,
            terminal ?? (got.candidates.length > 0 ? 'DNAT' : words.includes('ACCEPT') ? 'ACCEPT' : 'NONE'),
            what,
          );
          assert.deepEqual(
            got.candidates.map((c) => c.endpoint),
            words.filter((w) => !['DROP', 'REJECT', 'ACCEPT'].includes(w)),
            what,
          );
          if (got.candidates.length > 0) {
            const sum = got.candidates.reduce((n, c) => n + c.probability, 0);
            assert.ok(Math.abs(sum - 1) < 1e-9, `${what}: probabilities add up to ${sum}`);
            for (const c of got.candidates)
              assert.ok(
                Math.abs(c.probability - 1 / got.candidates.length) < 1e-9,
                `${what}: ${c.endpoint} ${c.probability}`,
              );
          }
        }
      });
    }
  });
}
