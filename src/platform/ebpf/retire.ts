// A handover away from the ebpf mode (src/cmd/handover.ts): the programs stay
// attached while their established connections drain, but take no new ones.
// Emptying the node's Service addresses (kpt_addrs) and ServiceCIDRs
// (kpt_svc_cidrs) does that: a packet to a Service address no longer finds a
// service, so it continues to netfilter, where the new mode has already
// programmed its rules; a packet of a connection in kpt_ct is still
// translated, both ways. The socket-level programs look up kpt_addrs too, so
// they stop balancing new connects the same moment.
import { MAPS } from '../../dataplane/ebpf/abi.js';
import { closeFd, libbpf, libbpfAvailable } from './libbpf.js';
import { BpfMap } from './map.js';
import { DEFAULT_PIN_ROOT, PinDir } from './pins.js';
import { PinnedMaps } from './pinned.js';

/** Returns how many entries went; null when no ebpf mode state is pinned under pinRoot. */
export function stopNewFlows(pinRoot: string = DEFAULT_PIN_ROOT): number | null {
  if (!libbpfAvailable() || !PinnedMaps.present(pinRoot)) return null;
  const pins = new PinDir(pinRoot);
  let removed = 0;
  for (const m of [MAPS.addrs, MAPS.svcCidrs]) {
    const fd = libbpf().bpf_obj_get(pins.map(m.name));
    if (fd < 0) continue;
    try {
      const map = BpfMap.ofFd(fd);
      const keys = map.dump().map(([k]) => k);
      map.deleteMany(keys);
      removed += keys.length;
    } finally {
      closeFd(fd);
    }
  }
  return removed;
}
