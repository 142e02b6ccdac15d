// Loading the compiled programs (dist/bpf/kpt.o) with libbpf, adopting the
// maps a previous proxy pinned. A pinned map is reused when its type, key
// and value sizes, capacity and flags still match what this proxy would
// create; otherwise it is replaced (its state, e.g. connection entries, is
// lost, and the caller logs why).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MAPS, MAP_NAMES, type MapName, maglevValueSize } from '../../dataplane/ebpf/layout.js';
import { BpfMap, mapInfo, type MapInfo } from './map.js';
import { addressOf, BpfError, closeFd, isNull, lastErrno, libbpf, withoutProfilerSignal } from './libbpf.js';
import type { PinDir } from './pins.js';

export const TC_PROGRAMS = ['kpt_ingress', 'kpt_egress'] as const;
export const SOCK_PROGRAMS = [
  'kpt_connect4',
  'kpt_connect6',
  'kpt_sendmsg4',
  'kpt_sendmsg6',
  'kpt_recvmsg4',
  'kpt_recvmsg6',
  'kpt_getpeername4',
  'kpt_getpeername6',
] as const;
/** The XDP fast path for traffic from outside (src/bpf/xdp.h), loaded unless --ebpf-xdp=off. */
export const XDP_PROGRAM = 'kpt_xdp' as const;
export type ProgramName = (typeof TC_PROGRAMS)[number] | (typeof SOCK_PROGRAMS)[number] | typeof XDP_PROGRAM;

/** dist/bpf/kpt.o next to this build (KPT_BPF_OBJECT overrides it). */
export function defaultObjectPath(): string {
  const env = process.env['KPT_BPF_OBJECT'];
  if (env) return env;
  const rel = import.meta.url.includes('/dist/') ? '../../../bpf/kpt.o' : '../../../dist/bpf/kpt.o';
  return fileURLToPath(new URL(rel, import.meta.url));
}

export interface LoadOptions {
  readonly objectPath?: string;
  /** Pin maps here (and adopt what is pinned); null loads private maps (tests). */
  readonly pins: PinDir | null;
  /** Maglev table size, a prime (default 16381). */
  readonly maglevM?: number;
  /** Capacity of the connection map (entries; two per connection). */
  readonly ctEntries?: number;
  /** Load the socket-level programs too. */
  readonly socketLB?: boolean;
  /** Load the XDP program too (default true: the tests' private loads run it with BPF_PROG_TEST_RUN). */
  readonly xdp?: boolean;
}

export interface MapAdoption {
  readonly map: MapName;
  readonly outcome: 'adopted' | 'created' | 'replaced';
  readonly reason?: string;
}

export class LoadedObject {
  constructor(
    private readonly obj: unknown,
    readonly maps: ReadonlyMap<MapName, BpfMap>,
    readonly programs: ReadonlyMap<ProgramName, number>,
    readonly adoption: readonly MapAdoption[],
  ) {}

  map(name: MapName): BpfMap {
    const m = this.maps.get(name);
    if (!m) throw new BpfError(`map ${name}`, 2);
    return m;
  }

  program(name: ProgramName): number {
    const fd = this.programs.get(name);
    if (fd === undefined) throw new BpfError(`program ${name}`, 2, 'not loaded');
    return fd;
  }

  /** Close every fd. Pinned objects and attached links stay. */
  close(): void {
    libbpf().bpf_object__close(this.obj);
  }
}

const OPEN_OPTS_SIZE = 80;

/** Open, size, adopt pins, load (the verifier runs here), pin new maps. */
export function loadObject(opts: LoadOptions): LoadedObject {
  const lib = libbpf();
  const path = opts.objectPath ?? defaultObjectPath();
  if (!existsSync(path))
    throw new BpfError(`open ${path}`, 2, 'the BPF object is built by scripts/setup (clang, libbpf-dev)');
  const logBuf = Buffer.alloc(1 << 20);
  const openOpts = Buffer.alloc(OPEN_OPTS_SIZE);
  openOpts.writeBigUInt64LE(BigInt(OPEN_OPTS_SIZE), 0);
  openOpts.writeBigUInt64LE(addressOf(logBuf), 56);
  openOpts.writeBigUInt64LE(BigInt(logBuf.length), 64);
  const obj = lib.bpf_object__open_file(path, openOpts);
  if (isNull(obj)) throw new BpfError(`open ${path}`, lastErrno());
  try {
    const m = opts.maglevM ?? 16381;
    setRodataU32(obj, m);
    const wanted = new Map<MapName, { maxEntries?: number; valueSize?: number }>();
    wanted.set('maglev', { valueSize: maglevValueSize(m) });
    if (opts.ctEntries) wanted.set('ct', { maxEntries: opts.ctEntries });
    const handles = new Map<MapName, unknown>();
    for (const name of MAP_NAMES) {
      const h = lib.bpf_object__find_map_by_name(obj, MAPS[name].name);
      if (isNull(h)) throw new BpfError(`map ${MAPS[name].name}`, 2, 'not in the object: rebuild it');
      const w = wanted.get(name);
      if (w?.maxEntries) lib.bpf_map__set_max_entries(h, w.maxEntries);
      if (w?.valueSize) lib.bpf_map__set_value_size(h, w.valueSize);
      handles.set(name, h);
    }
    for (const p of SOCK_PROGRAMS) {
      const h = lib.bpf_object__find_program_by_name(obj, p);
      if (!isNull(h)) lib.bpf_program__set_autoload(h, opts.socketLB ?? false);
    }
    const xdp = opts.xdp ?? true;
    const xdpHandle = lib.bpf_object__find_program_by_name(obj, XDP_PROGRAM);
    if (!isNull(xdpHandle)) lib.bpf_program__set_autoload(xdpHandle, xdp);
    const adoption = opts.pins ? adoptPins(handles, opts.pins) : [];
    const rc = withoutProfilerSignal(() => lib.bpf_object__load(obj));
    if (rc < 0) {
      const log = logBuf.toString('utf8', 0, Math.max(0, logBuf.indexOf(0)));
      throw new BpfError('load BPF programs', -rc, log.slice(-4000));
    }
    const maps = new Map<MapName, BpfMap>();
    for (const [name, h] of handles) {
      const fd = lib.bpf_map__fd(h);
      const info = mapInfo(fd);
      maps.set(name, new BpfMap(MAPS[name].name, fd, info.keySize, info.valueSize, info.type));
      const a = adoption.find((x) => x.map === name);
      if (opts.pins && a?.outcome !== 'adopted') {
        const rcPin = lib.bpf_obj_pin(fd, opts.pins.map(MAPS[name].name));
        if (rcPin < 0) throw new BpfError(`pin ${MAPS[name].name}`, -rcPin);
      }
    }
    const programs = new Map<ProgramName, number>();
    for (const p of [...TC_PROGRAMS, ...(opts.socketLB ? SOCK_PROGRAMS : []), ...(xdp ? [XDP_PROGRAM] : [])]) {
      const h = lib.bpf_object__find_program_by_name(obj, p);
      if (isNull(h)) throw new BpfError(`program ${p}`, 2, 'not in the object: rebuild it');
      programs.set(p, lib.bpf_program__fd(h));
    }
    return new LoadedObject(obj, maps, programs, adoption);
  } catch (err) {
    lib.bpf_object__close(obj);
    throw err;
  }
}

function setRodataU32(obj: unknown, maglevM: number): void {
  const lib = libbpf();
  const h = lib.bpf_object__find_map_by_name(obj, '.rodata');
  if (isNull(h)) throw new BpfError('map .rodata', 2, 'not in the object: rebuild it');
  const v = Buffer.alloc(4);
  v.writeUInt32LE(maglevM);
  const rc = lib.bpf_map__set_initial_value(h, v, 4);
  if (rc < 0) throw new BpfError('set .rodata', -rc);
}

/** Reuse each compatible pinned map; unpin the incompatible ones. */
function adoptPins(handles: Map<MapName, unknown>, pins: PinDir): MapAdoption[] {
  const lib = libbpf();
  pins.ensure();
  const out: MapAdoption[] = [];
  for (const [name, h] of handles) {
    const path = pins.map(MAPS[name].name);
    if (!existsSync(path)) {
      out.push({ map: name, outcome: 'created' });
      continue;
    }
    const fd = lib.bpf_obj_get(path);
    if (fd < 0) {
      pins.unpin(path);
      out.push({ map: name, outcome: 'replaced', reason: `cannot open the pin (errno ${-fd})` });
      continue;
    }
    const have = mapInfo(fd);
    const why = incompatibility(have, h);
    if (why) {
      closeFd(fd);
      pins.unpin(path);
      out.push({ map: name, outcome: 'replaced', reason: why });
      continue;
    }
    const rc = lib.bpf_map__reuse_fd(h, fd);
    closeFd(fd); // reuse_fd dups it
    if (rc < 0) throw new BpfError(`reuse ${MAPS[name].name}`, -rc);
    out.push({ map: name, outcome: 'adopted' });
  }
  return out;
}

function incompatibility(have: MapInfo, h: unknown): string | null {
  const lib = libbpf();
  const want = {
    type: lib.bpf_map__type(h),
    keySize: lib.bpf_map__key_size(h),
    valueSize: lib.bpf_map__value_size(h),
    maxEntries: lib.bpf_map__max_entries(h),
    flags: lib.bpf_map__map_flags(h),
  };
  for (const k of ['type', 'keySize', 'valueSize', 'maxEntries', 'flags'] as const) {
    if (have[k] !== want[k]) return `${k} changed from ${have[k]} to ${want[k]}`;
  }
  return null;
}
