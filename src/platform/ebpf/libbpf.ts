// The system libbpf (libbpf.so.1, Debian's libbpf1, which iproute2 already
// depends on) and a few libc calls, through koffi: no native addon of our
// own. libbpf 1.x returns -errno from its low-level calls and NULL plus
// errno from the object API; both become BpfError here.
//
// Option structs are built by hand as Buffers in the x86-64/aarch64 LP64
// layout of libbpf 1.1's headers; each starts with its own size (`sz`), which
// is how libbpf stays compatible with callers of other versions.
import koffi from 'koffi';
import { ProxyError } from '../../core/errors.js';

export class BpfError extends ProxyError {
  constructor(
    readonly op: string,
    readonly errno: number,
    detail = '',
  ) {
    super('KPT_EXEC_FAILED', `${op}: ${errnoName(errno)}${detail ? `: ${detail}` : ''}`);
    this.name = 'BpfError';
  }
}

const ERRNO: Record<number, string> = {
  1: 'EPERM',
  2: 'ENOENT',
  7: 'E2BIG',
  9: 'EBADF',
  12: 'ENOMEM',
  13: 'EACCES',
  16: 'EBUSY',
  17: 'EEXIST',
  19: 'ENODEV',
  22: 'EINVAL',
  28: 'ENOSPC',
  95: 'EOPNOTSUPP',
  524: 'ENOTSUPP',
};
export function errnoName(e: number): string {
  return `${ERRNO[e] ?? 'errno'} (${e})`;
}

type Ptr = unknown; // an opaque libbpf pointer (struct bpf_object *, ...)

interface Lib {
  bpf_object__open_file(path: string, opts: Buffer | null): Ptr;
  bpf_object__load(obj: Ptr): number;
  bpf_object__close(obj: Ptr): void;
  bpf_object__find_map_by_name(obj: Ptr, name: string): Ptr;
  bpf_object__find_program_by_name(obj: Ptr, name: string): Ptr;
  bpf_map__set_pin_path(map: Ptr, path: string | null): number;
  bpf_map__set_max_entries(map: Ptr, n: number): number;
  bpf_map__set_value_size(map: Ptr, n: number): number;
  bpf_map__set_initial_value(map: Ptr, data: Buffer, size: number): number;
  bpf_map__reuse_fd(map: Ptr, fd: number): number;
  bpf_map__fd(map: Ptr): number;
  bpf_map__type(map: Ptr): number;
  bpf_map__key_size(map: Ptr): number;
  bpf_map__value_size(map: Ptr): number;
  bpf_map__max_entries(map: Ptr): number;
  bpf_map__map_flags(map: Ptr): number;
  bpf_program__set_autoload(prog: Ptr, on: boolean): number;
  bpf_program__fd(prog: Ptr): number;
  bpf_link_create(progFd: number, targetFd: number, attachType: number, opts: Buffer | null): number;
  bpf_link_update(linkFd: number, progFd: number, opts: Buffer | null): number;
  bpf_link_detach(linkFd: number): number;
  bpf_obj_pin(fd: number, path: string): number;
  bpf_obj_get(path: string): number;
  bpf_obj_get_info_by_fd(fd: number, info: Buffer, len: Buffer): number;
  bpf_map_update_elem(fd: number, key: Buffer, value: Buffer, flags: bigint): number;
  bpf_map_lookup_elem(fd: number, key: Buffer, value: Buffer): number;
  bpf_map_delete_elem(fd: number, key: Buffer): number;
  bpf_map_get_next_key(fd: number, key: Buffer | null, next: Buffer): number;
  bpf_map_update_batch(fd: number, keys: Buffer, values: Buffer, count: Buffer, opts: Buffer | null): number;
  bpf_map_delete_batch(fd: number, keys: Buffer, count: Buffer, opts: Buffer | null): number;
  bpf_map_lookup_batch(
    fd: number,
    inBatch: Buffer | null,
    outBatch: Buffer,
    keys: Buffer,
    values: Buffer,
    count: Buffer,
    opts: Buffer | null,
  ): number;
  bpf_prog_get_fd_by_id(id: number): number;
  bpf_map_get_fd_by_id(id: number): number;
  bpf_link_get_fd_by_id(id: number): number;
  bpf_prog_test_run_opts(progFd: number, opts: Buffer): number;
  bpf_prog_query_opts(target: number, type: number, opts: Buffer): number;
  bpf_tc_hook_create(hook: Buffer): number;
  bpf_tc_attach(hook: Buffer, opts: Buffer): number;
  bpf_tc_detach(hook: Buffer, opts: Buffer): number;
  bpf_tc_query(hook: Buffer, opts: Buffer): number;
  libbpf_set_print(fn: null): unknown;
  libbpf_num_possible_cpus(): number;
}

interface Libc {
  close(fd: number): number;
  open(path: string, flags: number): number;
  __errno_location(): Ptr;
  pthread_sigmask(how: number, set: Buffer | null, old: Buffer | null): number;
}

let lib: Lib | null = null;
let libc: Libc | null = null;

/** libbpf and libc, loaded on first use; throws BpfError when libbpf.so.1 is missing. */
export function libbpf(): Lib {
  if (lib) return lib;
  let l: ReturnType<typeof koffi.load>;
  try {
    l = koffi.load('libbpf.so.1');
  } catch (err) {
    throw new ProxyError('KPT_EXEC_FAILED', `ebpf mode needs libbpf.so.1 (Debian package libbpf1): ${String(err)}`);
  }
  const f = (decl: string) => l.func(decl);
  lib = {
    bpf_object__open_file: f('void *bpf_object__open_file(const char *path, void *opts)'),
    bpf_object__load: f('int bpf_object__load(void *obj)'),
    bpf_object__close: f('void bpf_object__close(void *obj)'),
    bpf_object__find_map_by_name: f('void *bpf_object__find_map_by_name(void *obj, const char *name)'),
    bpf_object__find_program_by_name: f('void *bpf_object__find_program_by_name(void *obj, const char *name)'),
    bpf_map__set_pin_path: f('int bpf_map__set_pin_path(void *map, const char *path)'),
    bpf_map__set_max_entries: f('int bpf_map__set_max_entries(void *map, uint32_t n)'),
    bpf_map__set_value_size: f('int bpf_map__set_value_size(void *map, uint32_t n)'),
    bpf_map__set_initial_value: f('int bpf_map__set_initial_value(void *map, void *data, size_t size)'),
    bpf_map__reuse_fd: f('int bpf_map__reuse_fd(void *map, int fd)'),
    bpf_map__fd: f('int bpf_map__fd(void *map)'),
    bpf_map__type: f('int bpf_map__type(void *map)'),
    bpf_map__key_size: f('uint32_t bpf_map__key_size(void *map)'),
    bpf_map__value_size: f('uint32_t bpf_map__value_size(void *map)'),
    bpf_map__max_entries: f('uint32_t bpf_map__max_entries(void *map)'),
    bpf_map__map_flags: f('uint32_t bpf_map__map_flags(void *map)'),
    bpf_program__set_autoload: f('int bpf_program__set_autoload(void *prog, bool on)'),
    bpf_program__fd: f('int bpf_program__fd(void *prog)'),
    bpf_link_create: f('int bpf_link_create(int prog_fd, int target_fd, int type, void *opts)'),
    bpf_link_update: f('int bpf_link_update(int link_fd, int new_prog_fd, void *opts)'),
    bpf_link_detach: f('int bpf_link_detach(int link_fd)'),
    bpf_obj_pin: f('int bpf_obj_pin(int fd, const char *path)'),
    bpf_obj_get: f('int bpf_obj_get(const char *path)'),
    bpf_obj_get_info_by_fd: f('int bpf_obj_get_info_by_fd(int fd, void *info, void *len)'),
    bpf_map_update_elem: f('int bpf_map_update_elem(int fd, void *key, void *value, uint64_t flags)'),
    bpf_map_lookup_elem: f('int bpf_map_lookup_elem(int fd, void *key, void *value)'),
    bpf_map_delete_elem: f('int bpf_map_delete_elem(int fd, void *key)'),
    bpf_map_get_next_key: f('int bpf_map_get_next_key(int fd, void *key, void *next)'),
    bpf_map_update_batch: f('int bpf_map_update_batch(int fd, void *keys, void *values, void *count, void *opts)'),
    bpf_map_delete_batch: f('int bpf_map_delete_batch(int fd, void *keys, void *count, void *opts)'),
    bpf_map_lookup_batch: f(
      'int bpf_map_lookup_batch(int fd, void *in_batch, void *out_batch, void *keys, void *values, void *count, void *opts)',
    ),
    bpf_prog_get_fd_by_id: f('int bpf_prog_get_fd_by_id(uint32_t id)'),
    bpf_map_get_fd_by_id: f('int bpf_map_get_fd_by_id(uint32_t id)'),
    bpf_link_get_fd_by_id: f('int bpf_link_get_fd_by_id(uint32_t id)'),
    bpf_prog_test_run_opts: f('int bpf_prog_test_run_opts(int prog_fd, void *opts)'),
    bpf_prog_query_opts: f('int bpf_prog_query_opts(int target, int type, void *opts)'),
    bpf_tc_hook_create: f('int bpf_tc_hook_create(void *hook)'),
    bpf_tc_attach: f('int bpf_tc_attach(void *hook, void *opts)'),
    bpf_tc_detach: f('int bpf_tc_detach(void *hook, void *opts)'),
    bpf_tc_query: f('int bpf_tc_query(void *hook, void *opts)'),
    libbpf_set_print: f('void *libbpf_set_print(void *fn)'),
    libbpf_num_possible_cpus: f('int libbpf_num_possible_cpus(void)'),
  } as unknown as Lib;
  // libbpf's own chatter would go to our stderr; what we need (the verifier
  // log) is collected through the open options instead.
  lib.libbpf_set_print(null);
  return lib;
}

/** True when libbpf.so.1 loads here. */
export function libbpfAvailable(): boolean {
  try {
    libbpf();
    return true;
  } catch {
    return false;
  }
}

export function libcOf(): Libc {
  if (libc) return libc;
  const l = koffi.load('libc.so.6');
  libc = {
    close: l.func('int close(int fd)'),
    open: l.func('int open(const char *path, int flags)'),
    __errno_location: l.func('int *__errno_location(void)'),
    pthread_sigmask: l.func('int pthread_sigmask(int how, void *set, void *old)'),
  } as unknown as Libc;
  return libc;
}

const SIG_BLOCK = 0;
const SIG_SETMASK = 2;
const SIGPROF = 27;
/** glibc's sigset_t: 1024 bits, signal n at bit n-1. */
const SIGSET_BYTES = 128;

/**
 * Run fn with SIGPROF held back on this thread. V8's CPU profiler (our
 * /debug/pprof/profile, `node --cpu-prof`) samples by sending SIGPROF every
 * interval, and the verifier abandons a program load with EAGAIN whenever a
 * signal is pending; libbpf's retries verify the whole object again and fail
 * the same way, so a profiled proxy could load no program at all. A held
 * signal stays pending and is taken (one late sample) when fn returns.
 */
export function withoutProfilerSignal<T>(fn: () => T): T {
  const c = libcOf();
  const set = Buffer.alloc(SIGSET_BYTES);
  set[(SIGPROF - 1) >> 3] = 1 << ((SIGPROF - 1) & 7);
  const old = Buffer.alloc(SIGSET_BYTES);
  if (c.pthread_sigmask(SIG_BLOCK, set, old) !== 0) return fn();
  try {
    return fn();
  } finally {
    c.pthread_sigmask(SIG_SETMASK, old, null);
  }
}

/** errno of the last failed libc/libbpf call on this thread. */
export function lastErrno(): number {
  return koffi.errno();
}

/** Throw BpfError for a negative return (libbpf 1.x returns -errno). */
export function check(op: string, rc: number, detail?: string): number {
  if (rc < 0) throw new BpfError(op, -rc, detail);
  return rc;
}

export function closeFd(fd: number): void {
  if (fd >= 0) libcOf().close(fd);
}

/** bpf_obj_get_info_by_fd into a buffer of `size` bytes (struct bpf_map_info, bpf_prog_info, bpf_link_info). */
export function objInfo(fd: number, size: number, what: string): Buffer {
  const info = Buffer.alloc(size);
  const len = Buffer.alloc(4);
  len.writeUInt32LE(info.length);
  check(`${what} info`, libbpf().bpf_obj_get_info_by_fd(fd, info, len));
  return info;
}

/** The address of a Buffer's bytes, for pointers inside option structs. */
export function addressOf(b: Buffer): bigint {
  return BigInt(koffi.address(b) as unknown as bigint);
}

/** True when the pointer libbpf returned is NULL. */
export function isNull(p: Ptr): boolean {
  return p === null || p === undefined || addressOfPtr(p) === 0n;
}

function addressOfPtr(p: Ptr): bigint {
  return BigInt(koffi.address(p as never) as unknown as bigint);
}
