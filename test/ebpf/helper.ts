// Runs inside a node's network and mount namespaces (see bpfnode.ts) and
// drives the ebpf platform layer directly, with map contents written by the
// test: load (adopting pins), attach to every interface, apply map ops,
// dump a map, read the programs' counters, clean up. One JSON command in
// argv[2]; one JSON line out.
import { MAPS, type MapName, STAT_MAX, unhex, hex } from '../../src/dataplane/ebpf/layout.js';
import { cleanupEbpf } from '../../src/platform/ebpf/cleanup.js';
import { progInfo, progNameById, tcxProgramIds } from '../../src/platform/ebpf/attach.js';
import { listIfaces, openIfaceSource } from '../../src/platform/ebpf/ifaces.js';
import { closeFd, isNull, libbpf } from '../../src/platform/ebpf/libbpf.js';
import { BpfMap } from '../../src/platform/ebpf/map.js';
import { PinDir } from '../../src/platform/ebpf/pins.js';
import { EbpfRuntime } from '../../src/platform/ebpf/runtime.js';
import { HotFilter } from '../../src/platform/ebpf/hotfilter.js';
import { pickUplinks, type XdpMode } from '../../src/platform/ebpf/xdpattach.js';
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';

interface Op {
  map: MapName;
  op: 'update' | 'delete';
  key: string;
  value?: string;
}
type Cmd =
  | {
      cmd: 'load';
      pinRoot: string;
      attach?: 'auto' | 'tc' | 'tcx';
      ops?: Op[];
      maglevM?: number;
      socketLB?: string;
      /** The XDP program on the uplinks holding nodeIPs (xdpattach.ts). */
      xdp?: XdpMode;
      nodeIPs?: string[];
    }
  | { cmd: 'apply'; pinRoot: string; ops: Op[] }
  | { cmd: 'dump'; pinRoot: string; map: MapName }
  | { cmd: 'stats'; pinRoot: string }
  | { cmd: 'cleanup'; pinRoot: string }
  | { cmd: 'foreign'; object: string; ifname: string; pin: string }
  | { cmd: 'programs'; ifname: string };

function pinnedMap(pinRoot: string, name: MapName): BpfMap {
  const fd = libbpf().bpf_obj_get(new PinDir(pinRoot).map(MAPS[name].name));
  if (fd < 0) throw new Error(`no pinned map ${name}: ${-fd}`);
  return BpfMap.ofFd(fd);
}

function ifindexOf(name: string): number {
  const i = listIfaces().find((x) => x.name === name);
  if (!i) throw new Error(`no interface ${name}`);
  return i.index;
}

async function main(c: Cmd): Promise<unknown> {
  switch (c.cmd) {
    case 'load': {
      const rt = await EbpfRuntime.open({
        pinRoot: c.pinRoot,
        attachMode: c.attach ?? 'auto',
        ...(c.maglevM ? { maglevM: c.maglevM } : {}),
        ...(c.socketLB ? { socketLBCgroup: c.socketLB } : {}),
        ...(c.xdp ? { xdp: c.xdp } : {}),
      });
      const att = rt.attachInterfaces();
      const xdp = c.xdp ? rt.attachXdp(pickUplinks(listIfaces(), networkInterfaces(), c.nodeIPs ?? [])) : null;
      rt.apply(
        (c.ops ?? []).map((o) => ({
          map: o.map,
          op: o.op,
          key: unhex(o.key),
          ...(o.value ? { value: unhex(o.value) } : {}),
        })),
      );
      const out = { adoption: rt.report.adoption, mode: rt.attachMode, ...att, xdp };
      rt.close();
      return out;
    }
    case 'apply': {
      // One descriptor per map for the whole list: a test may write tens of thousands of entries.
      const maps = new Map<MapName, BpfMap>();
      for (const o of c.ops) {
        let m = maps.get(o.map);
        if (!m) maps.set(o.map, (m = pinnedMap(c.pinRoot, o.map)));
        if (o.op === 'update') m.update(unhex(o.key), unhex(o.value!));
        else m.delete(unhex(o.key));
      }
      for (const m of maps.values()) closeFd(m.fd);
      // Written past the runtime: bring the first check's bitmap in step as the runtime would.
      if (c.ops.some((o) => o.map === 'addrs' || o.map === 'svcCidrs'))
        new HotFilter({
          hot: pinnedMap(c.pinRoot, 'hot'),
          addrs: pinnedMap(c.pinRoot, 'addrs'),
          svcCidrs: pinnedMap(c.pinRoot, 'svcCidrs'),
        });
      return { applied: c.ops.length };
    }
    case 'dump':
      return {
        entries: pinnedMap(c.pinRoot, c.map)
          .dump()
          .map(([k, v]) => [hex(k), hex(v)]),
      };
    case 'stats': {
      // kpt_stats summed over the CPUs, by index (enum stat_index).
      const m = pinnedMap(c.pinRoot, 'stats');
      return { stats: Array.from({ length: STAT_MAX }, (_, i) => String(m.lookupPercpuSum(i))) };
    }
    case 'cleanup': {
      // Hold every pinned link open, as a stuck old proxy or another tool could: unpinning alone
      // then leaves the programs attached for as long as the holder lives.
      const links = new PinDir(c.pinRoot).links();
      const held = links.map((n) => libbpf().bpf_obj_get(`${new PinDir(c.pinRoot).linksDir}/${n}`));
      const r = await cleanupEbpf(c.pinRoot);
      // What runs on every hook the moment cleanup returns.
      const attachedRightAfter = listIfaces().flatMap((i) =>
        (['ingress', 'egress'] as const).flatMap((d) =>
          tcxProgramIds(i.index, d).map((id) => `${i.name}/${d}:${progNameById(id)}`),
        ),
      );
      for (const fd of held) closeFd(fd);
      return { ...r, attachedRightAfter, held: held.filter((fd) => fd >= 0).length };
    }
    case 'foreign': {
      // Another tool's program attached with tcx and pinned outside our root.
      const lib = libbpf();
      const obj = lib.bpf_object__open_file(c.object, null);
      if (isNull(obj) || lib.bpf_object__load(obj) < 0) throw new Error(`load ${c.object}`);
      const prog = lib.bpf_program__fd(lib.bpf_object__find_program_by_name(obj, 'foreign_tc'));
      const link = lib.bpf_link_create(prog, ifindexOf(c.ifname), 46, null);
      if (link < 0 || lib.bpf_obj_pin(link, c.pin) < 0) throw new Error(`attach foreign: ${link}`);
      return { id: progInfo(prog).id };
    }
    case 'programs':
      return {
        ingress: tcxProgramIds(ifindexOf(c.ifname), 'ingress').map((id) => progNameById(id)),
        egress: tcxProgramIds(ifindexOf(c.ifname), 'egress').map((id) => progNameById(id)),
      };
  }
}

try {
  await openIfaceSource();
  const arg = process.argv[2]!;
  const result = await main(JSON.parse(arg === '-' ? readFileSync(0, 'utf8') : arg) as Cmd);
  process.stdout.write(JSON.stringify({ ok: true, result }) + '\n');
} catch (err) {
  process.stdout.write(JSON.stringify({ ok: false, error: String(err) }) + '\n');
  process.exitCode = 1;
}
