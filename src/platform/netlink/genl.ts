// Generic netlink (NETLINK_GENERIC): families such as IPVS register under a
// name and get a dynamic message type; the controller (GENL_ID_CTRL) maps
// names to ids. Messages carry a 4-byte genlmsghdr: command, version, reserved.
import { attr, Attrs, str } from './attr.js';
import { encodeMessage, ERRNO, NLM_F } from './message.js';
import { NetlinkError, type NetlinkSocket } from './socket.js';

const GENL_ID_CTRL = 0x10;
const CTRL_CMD_GETFAMILY = 3;
const CTRL_ATTR_FAMILY_ID = 1;
const CTRL_ATTR_FAMILY_NAME = 2;
export const GENL_HDRLEN = 4;

export function genlHeader(cmd: number, version: number): Buffer {
  return Buffer.from([cmd, version, 0, 0]);
}

/**
 * The family's message type, or null when the kernel does not know the
 * family (its module is not loaded and cannot be).
 */
export function resolveGenlFamily(sock: NetlinkSocket, name: string): number | null {
  const req = encodeMessage(GENL_ID_CTRL, NLM_F.REQUEST | NLM_F.ACK, 0, genlHeader(CTRL_CMD_GETFAMILY, 1), [
    attr(CTRL_ATTR_FAMILY_NAME, str(name)),
  ]);
  let id: number | null = null;
  const [res] = sock.ackAll([req], (_i, m) => {
    id = new Attrs(m.payload, GENL_HDRLEN).u16(CTRL_ATTR_FAMILY_ID) ?? null;
  });
  if (res!.errno === ERRNO.ENOENT) return null;
  if (res!.errno !== 0)
    throw new NetlinkError(res!.errno, 0, `generic netlink: resolving ${name} failed: errno ${res!.errno}`);
  return id;
}
