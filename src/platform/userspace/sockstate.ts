// Whether a listening socket still listens. A TCP listener can die without
// Node hearing of it: `ss -K` (SOCK_DESTROY) on a listening socket closes it
// in the kernel, and libuv reports nothing (no accept error, no close), so
// new connections are refused while the listener looks fine. The kernel
// says it through SO_ACCEPTCONN, one getsockopt per listener: about 2 us
// each through koffi, so 20 ms a check at 10k listeners.
//
// koffi is an optional dependency (imported lazily, as netlink does):
// without it there is no check, and such a listener is replaced only when
// something else makes the next sync reopen it.
type Koffi = typeof import('koffi');

const SOL_SOCKET = 1;
const SO_ACCEPTCONN = 30;

interface Libc {
  getsockopt(fd: number, level: number, name: number, val: Buffer, len: Buffer): number;
}

export interface SocketState {
  /** True when fd is a socket in LISTEN state, false when it no longer is, null when it cannot be told. */
  listening(fd: number): boolean | null;
}

let opened: Promise<SocketState | null> | null = null;

/** The checker, or null where koffi or libc is unavailable. */
export function openSocketState(): Promise<SocketState | null> {
  opened ??= (async () => {
    try {
      const koffi = ((await import('koffi' as string)) as { default: Koffi }).default;
      const l = koffi.load('libc.so.6');
      const c = {
        getsockopt: l.func('int getsockopt(int, int, int, _Out_ void *, _Inout_ void *)'),
      } as unknown as Libc;
      const val = Buffer.alloc(4);
      const len = Buffer.alloc(4);
      return {
        listening(fd: number): boolean | null {
          if (fd < 0) return null;
          len.writeUInt32LE(4);
          if (c.getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, val, len) !== 0) return null;
          return val.readInt32LE(0) !== 0;
        },
      };
    } catch {
      return null;
    }
  })();
  return opened;
}
