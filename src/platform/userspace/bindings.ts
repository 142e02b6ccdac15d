// Typed access to Node's libuv stream bindings for the TCP relay (tcp.ts):
// the allow-listed process.binding('tcp_wrap') / ('stream_wrap') that
// lib/net.js is built on. Only what the relay uses is typed. binding() checks
// the shape once and throws a clear error when a Node release changed it; the
// relay's users call it when they are built, so such a Node fails at start.

import { ProxyError } from '../../core/errors.js';

/** A uv_tcp_t wrapper (TCPWrap). Methods return 0 or a negative uv error. */
export interface TcpHandle {
  /** The socket's file descriptor (-1 once closed). */
  readonly fd?: number;
  onconnection?: (status: number, client?: TcpHandle) => void;
  onread?: (this: TcpHandle, ab: ArrayBuffer | undefined) => void;
  bind(host: string, port: number): number;
  bind6(host: string, port: number, flags: number): number;
  listen(backlog: number): number;
  connect(req: ConnectReq, host: string, port: number): number;
  connect6(req: ConnectReq, host: string, port: number): number;
  getsockname(out: object): number;
  getpeername(out: object): number;
  setNoDelay(on: boolean): number;
  readStart(): number;
  readStop(): number;
  /** Read into this buffer from now on; onread then gets no ArrayBuffer (bytes at the buffer's start). */
  useUserBuffer(buf: Uint8Array): void;
  writeBuffer(req: WriteReq, data: Uint8Array): number;
  shutdown(req: WriteReq): number;
  /** SO_LINGER 0 and close: the peer sees RST. */
  reset(cb: () => void): number;
  close(cb?: () => void): void;
}

export interface ConnectReq {
  oncomplete: (status: number) => void;
  address: string;
  port: number;
}

/** WriteWrap / ShutdownWrap; `side` and `buffer` are ours (buffer keeps the chunk alive while libuv writes it). */
export interface WriteReq {
  handle: TcpHandle;
  oncomplete: (this: WriteReq, status: number) => void;
  async?: boolean;
  buffer?: Uint8Array;
  bytes?: number;
  side?: unknown;
}

interface Bindings {
  TCP: new (type: number) => TcpHandle;
  TCPConnectWrap: new () => object;
  constants: { SOCKET: number; SERVER: number };
  WriteWrap: new () => object;
  ShutdownWrap: new () => object;
  streamBaseState: Int32Array;
  kReadBytesOrError: number;
  kArrayBufferOffset: number;
  kLastWriteWasAsync: number;
}

/** libuv's UV_EOF (the same on every platform libuv supports). */
export const UV_EOF = -4095;

let cached: Bindings | null = null;

export function binding(): Bindings {
  if (cached) return cached;
  let b: Bindings;
  try {
    const bind = (process as unknown as { binding(name: string): Record<string, unknown> }).binding;
    b = { ...bind('tcp_wrap'), ...bind('stream_wrap') } as unknown as Bindings;
  } catch {
    // A Node without process.binding, or one that no longer allow-lists these names.
    b = {} as Bindings;
  }
  const ok =
    typeof b.TCP === 'function' &&
    typeof b.TCPConnectWrap === 'function' &&
    typeof b.WriteWrap === 'function' &&
    typeof b.ShutdownWrap === 'function' &&
    b.streamBaseState instanceof Int32Array &&
    typeof b.TCP.prototype.reset === 'function' &&
    typeof b.kReadBytesOrError === 'number' &&
    typeof b.kArrayBufferOffset === 'number' &&
    typeof b.kLastWriteWasAsync === 'number';
  if (!ok)
    throw new ProxyError(
      'KPT_UNSUPPORTED',
      `this Node (${process.version}) has no usable tcp_wrap/stream_wrap binding, which the userspace TCP relay is built on`,
    );
  cached = b;
  return b;
}
