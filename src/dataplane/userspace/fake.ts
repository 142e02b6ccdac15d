// Fake: the userspace mode's kernel interface in memory. It holds the two
// things a sync changes:
//   - the `kube-proxy-userspace` nftables table of one family, in the
//     nftables mode's Fake (../nftables/fake.ts), which applies the
//     renderer's Transactions all-or-nothing and refuses what the kernel
//     refuses;
//   - the listener table: which port each listener is bound to and which
//     endpoints its relay chooses from (listen(spec), close(key)), as the
//     platform's UserspaceDataplane keeps it. A listener keeps its port for
//     as long as it is open, as the real ones do across endpoint changes.
// trace.ts walks a packet through both. Pure.
import { Fake as NftFake } from '../nftables/fake.js';
import type { NftFamily } from '../nftables/names.js';
import type { Transaction } from '../nftables/transaction.js';
import type { ListenerSpec } from './plan.js';
import { TABLE_NAME } from './rules.js';

export interface FakeListener {
  readonly key: string;
  readonly protocol: 'TCP' | 'UDP';
  readonly port: number;
  /** "ip:port" of each endpoint the relay may choose. */
  readonly endpoints: readonly string[];
}

/** First port handed out by listen(); the real listeners get ephemeral ports. */
export const FIRST_FAKE_PORT = 40000;

export class Fake {
  /** The redirect table. */
  readonly nft: NftFake;
  private readonly open = new Map<string, FakeListener>();
  private nextPort = FIRST_FAKE_PORT;

  constructor(readonly family: NftFamily) {
    this.nft = new NftFake(family, TABLE_NAME);
  }

  get listeners(): ReadonlyMap<string, FakeListener> {
    return this.open;
  }

  /** The listener bound to this protocol and port, if any. */
  listenerOn(protocol: string, port: number): FakeListener | undefined {
    for (const l of this.open.values()) if (l.protocol === protocol && l.port === port) return l;
    return undefined;
  }

  /** Open the listener of `spec`, or hand new endpoints to the open one (same port). Returns its port. */
  listen(spec: ListenerSpec): number {
    const port = this.open.get(spec.key)?.port ?? this.nextPort++;
    this.open.set(spec.key, {
      key: spec.key,
      protocol: spec.protocol,
      port,
      endpoints: spec.endpoints.map((e) => e.key),
    });
    return port;
  }

  close(key: string): void {
    this.open.delete(key);
  }

  /** Apply one of the renderer's transactions to the table, all-or-nothing (FakeError, nothing changed). */
  run(tx: Transaction): void {
    this.nft.run(tx);
  }

  /** The table (nft -f lines) and the listener table as text (sorted), for tests and debugging. */
  dump(): string {
    const out = [...this.open.values()]
      .sort((a, b) => a.port - b.port)
      .map((l) => `listener ${l.protocol.toLowerCase()} :${l.port} ${l.key} -> ${l.endpoints.join(', ') || '(none)'}`);
    return this.nft.dump() + out.map((l) => `${l}\n`).join('');
  }
}
