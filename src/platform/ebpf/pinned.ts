// The maps a running (or stopped) proxy pinned, opened read-only by the
// tools: explain traces over them and diff compares with them. Lookups go
// to the kernel, so an LPM trie answers longest-prefix as the programs see it.
import { existsSync } from 'node:fs';
import { ProxyError } from '../../core/errors.js';
import { MAPS, type MapName } from '../../dataplane/ebpf/layout.js';
import type { MapReader } from '../../dataplane/ebpf/store.js';
import { closeFd, libbpf } from './libbpf.js';
import { BpfMap } from './map.js';
import { PinDir } from './pins.js';

export class PinnedMaps implements MapReader {
  private readonly open = new Map<MapName, BpfMap>();

  constructor(readonly pins: PinDir) {}

  /** True when a proxy pinned its maps under this root. */
  static present(pinRoot: string): boolean {
    return existsSync(new PinDir(pinRoot).map(MAPS.svc.name));
  }

  private map(name: MapName): BpfMap {
    let m = this.open.get(name);
    if (!m) {
      const fd = libbpf().bpf_obj_get(this.pins.map(MAPS[name].name));
      if (fd < 0)
        throw new ProxyError(
          'KPT_NOT_FOUND',
          `no pinned map ${MAPS[name].name} under ${this.pins.root} (errno ${-fd})`,
        );
      m = BpfMap.ofFd(fd);
      this.open.set(name, m);
    }
    return m;
  }

  lookup(map: MapName, key: Uint8Array): Uint8Array | null {
    return this.map(map).lookup(key);
  }

  dump(map: MapName): Array<[Uint8Array, Uint8Array]> {
    return this.map(map).dump();
  }

  close(): void {
    for (const m of this.open.values()) closeFd(m.fd);
    this.open.clear();
  }
}
