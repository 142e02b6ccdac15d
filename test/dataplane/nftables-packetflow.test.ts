// Every flow of the shared packet-flow table (test/cases/packetflow.ts)
// through NftablesRenderer -> nft Fake -> nft tracer, with the nftables
// expectations (REJECT for wrong ports, DROP for unallocated ServiceCIDR IPs,
// NodePorts on the primary node IP by default).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { expectedFor, PACKET_FLOW_SCENARIOS, sameOutput, type Scenario } from '../cases/packetflow.js';
import { scenarioConfig, scenarioLocalIPs, scenarioSyncState } from '../cases/resolve.js';
import { Fake } from '../../src/dataplane/nftables/fake.js';
import { nftFamily } from '../../src/dataplane/nftables/names.js';
import { NftablesRenderer } from '../../src/dataplane/nftables/renderer.js';
import type { EndpointLayout } from '../../src/dataplane/nftables/static.js';
import { tracePacket } from '../tracer/nftables.js';

export function loadScenario(s: Scenario, layout: EndpointLayout = 'upstream'): Fake {
  const fake = new Fake(nftFamily(s.family));
  fake.run(new NftablesRenderer(scenarioConfig(s, 'nftables'), layout).render(scenarioSyncState(s), 0, null).tx);
  return fake;
}

// Both endpoint layouts must behave identically (see static.ts EndpointLayout).
for (const layout of ['upstream', 'lean', 'maps'] as const)
  for (const s of PACKET_FLOW_SCENARIOS) {
    if (s.only && !s.only.includes('nftables')) continue;
    describe(`nftables (${layout}) packet flow: ${s.name} (#${s.refs.join(', #')})`, () => {
      const fake = loadScenario(s, layout);
      for (const f of s.flows) {
        if (f.only && !f.only.includes('nftables')) continue;
        test(`${f.name}: ${f.protocol} ${f.src} -> ${f.dst}:${f.port}`, () => {
          const want = expectedFor(f, 'nftables');
          const got = tracePacket(
            fake,
            { src: f.src, dst: f.dst, port: f.port, protocol: f.protocol },
            scenarioLocalIPs(s),
          );
          assert.ok(
            sameOutput(got.output, want.output),
            `output ${JSON.stringify(got.output)}, want ${JSON.stringify(want.output)}\n${got.matched.join('\n')}`,
          );
          assert.equal(got.masq, want.masq, `masq\n${got.matched.join('\n')}`);
        });
      }
    });
  }
