// ebpf side of `explain`: the maps the proxy pinned are looked up live, in
// the order the programs look them up (src/dataplane/ebpf/trace.ts), with
// the service-port names from kpt_names. Nothing is written.
import type { IPFamily } from '../core/types.js';
import * as L from '../dataplane/ebpf/layout.js';
import { trace } from '../dataplane/ebpf/trace.js';
import { listIfaces, openIfaceSource } from '../platform/ebpf/ifaces.js';
import { PinnedMaps } from '../platform/ebpf/pinned.js';
import { PinDir } from '../platform/ebpf/pins.js';
import type { ExplainRequest } from './explain.js';
import { summarize, type Explanation } from './explainview.js';

export async function explainEbpf(
  req: ExplainRequest,
  _family: IPFamily,
  localIPs: readonly string[],
  pinRoot: string,
): Promise<Explanation> {
  const maps = new PinnedMaps(new PinDir(pinRoot));
  try {
    await openIfaceSource();
    const ifaces = listIfaces();
    const r = trace(
      maps,
      { src: req.src, dst: req.dst, port: req.port, protocol: req.protocol, ...(req.iif ? { iif: req.iif } : {}) },
      localIPs,
      {
        strict: false,
        ...(req.sport !== null ? { sport: req.sport } : {}),
        ifindexOf: (name) => ifaces.find((i) => i.name === name)?.index,
      },
    );
    const svcStep = r.steps.find((s) => s.map === L.MAPS.svc.name && s.entry !== 'no entry');
    const svcId = svcStep ? Number(/ => svc (\d+) /.exec(svcStep.entry)?.[1]) : NaN;
    const nameRaw = Number.isNaN(svcId) ? null : maps.lookup('names', L.encodeU32(svcId));
    const service = nameRaw ? L.decodeName(nameRaw) : null;
    const candidates = r.candidates.map((c) => ({ endpoint: c.endpoint, probability: c.probability }));
    return {
      mode: 'ebpf',
      packet: { src: req.src, dst: req.dst, port: req.port, protocol: req.protocol },
      service,
      verdict: r.verdict,
      candidates,
      masquerade: r.masq && r.verdict === 'DNAT',
      steps: r.steps.map((s) => ({ where: s.map, rule: s.entry, comment: null, depth: 0, probability: 1 })),
      notUnderstood: r.notUnderstood,
      summary: summarize(service, r.verdict, candidates, r.masq),
    };
  } finally {
    maps.close();
  }
}
