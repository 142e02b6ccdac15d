// IpvsKernel: the IPVS table over generic netlink, in our network namespace
// or a named one. Changes go as one batch of acked requests per call (the
// kernel applies them in order and answers each), so a sync of thousands of
// virtual servers is a few sendmsg/recvmsg pairs, not a process per change.
import { ProxyError } from '../../core/errors.js';
import type { IpvsOp, RealServerStatus, VirtualServer } from '../../dataplane/ipvs/objects.js';
import { resolveGenlFamily } from '../netlink/genl.js';
import { errnoName } from '../netlink/message.js';
import { NETLINK_PROTOCOL, netlinkAvailable, NetlinkSocket } from '../netlink/socket.js';
import {
  decodeDest,
  decodeService,
  decodeTimeouts,
  decodeVersion,
  encodeGetConfig,
  encodeGetInfo,
  encodeListDests,
  encodeListServices,
  encodeOp,
  encodeSetTimeouts,
  IPVS_GENL_NAME,
  type IpvsTimeouts,
} from './genl.js';

/** One request the kernel refused. */
export interface IpvsOpFailure {
  readonly op: IpvsOp;
  readonly errno: number;
  readonly message: string;
}

export class IpvsKernel {
  private constructor(
    private readonly sock: NetlinkSocket,
    private readonly familyId: number,
  ) {}

  /**
   * Open the IPVS interface. Resolving the family makes the kernel load
   * ip_vs when it can; a kernel without IPVS is a clear error.
   */
  static async open(netns?: string): Promise<IpvsKernel> {
    if (!(await netlinkAvailable()))
      throw new ProxyError('KPT_EXEC_FAILED', 'IPVS: netlink sockets are unavailable (the koffi package is missing)');
    const sock = new NetlinkSocket(NETLINK_PROTOCOL.GENERIC, netns === undefined ? {} : { netns });
    try {
      const id = resolveGenlFamily(sock, IPVS_GENL_NAME);
      if (id === null)
        throw new ProxyError(
          'KPT_EXEC_FAILED',
          'IPVS is not available in this kernel: the ip_vs module is not loaded and cannot be (modprobe ip_vs)',
        );
      return new IpvsKernel(sock, id);
    } catch (err) {
      sock.close();
      throw err;
    }
  }

  /** Every virtual server of the namespace (firewall-mark services are left out). */
  listServices(): VirtualServer[] {
    const out: VirtualServer[] = [];
    for (const m of this.sock.dump(encodeListServices(this.familyId))) {
      const vs = decodeService(m);
      if (vs) out.push(vs);
    }
    return out;
  }

  /** The real servers of one virtual server, with their connection counters. */
  listDests(vs: VirtualServer): RealServerStatus[] {
    const out: RealServerStatus[] = [];
    for (const m of this.sock.dump(encodeListDests(this.familyId, vs))) {
      const rs = decodeDest(m, vs.family);
      if (rs) out.push(rs);
    }
    return out;
  }

  /** Send every operation in order; returns the ones the kernel refused (it carries on after each). */
  apply(ops: readonly IpvsOp[]): IpvsOpFailure[] {
    if (ops.length === 0) return [];
    const results = this.sock.ackAll(ops.map((o) => encodeOp(this.familyId, o)));
    const failures: IpvsOpFailure[] = [];
    results.forEach((r, i) => {
      if (r.errno !== 0)
        failures.push({
          op: ops[i]!,
          errno: r.errno,
          message: `${errnoName(r.errno)}${r.reason ? `: ${r.reason}` : ''}`,
        });
    });
    return failures;
  }

  /** `ipvsadm --set`: 0 leaves a timeout as it is. */
  setTimeouts(t: IpvsTimeouts): void {
    const [r] = this.sock.ackAll([encodeSetTimeouts(this.familyId, t)]);
    if (r!.errno !== 0)
      throw new ProxyError('KPT_SYNC_FAILED', `IPVS: setting timeouts failed: ${errnoName(r!.errno)}`);
  }

  timeouts(): IpvsTimeouts {
    let t: IpvsTimeouts = { tcp: 0, tcpFin: 0, udp: 0 };
    const [r] = this.sock.ackAll([encodeGetConfig(this.familyId)], (_i, m) => {
      t = decodeTimeouts(m);
    });
    if (r!.errno !== 0)
      throw new ProxyError('KPT_SYNC_FAILED', `IPVS: reading timeouts failed: ${errnoName(r!.errno)}`);
    return t;
  }

  /** The kernel's IPVS version, e.g. "1.2.1". */
  version(): string {
    let v = '';
    this.sock.ackAll([encodeGetInfo(this.familyId)], (_i, m) => {
      v = decodeVersion(m);
    });
    return v;
  }

  close(): void {
    this.sock.close();
  }
}
