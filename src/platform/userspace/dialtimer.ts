// Shared dial deadlines for one TCP listener: one timer for all dialling
// sockets instead of a socket.setTimeout() per dial (a Timeout object, a timer
// list insert and a clearTimeout per relayed connection).
//
// Contract: watch(ms, onTimeout) calls onTimeout once, about ms after the
// call. There is no cancel: onTimeout checks whether its dial is still
// pending (lazy deletion: a dial that connected costs nothing more). Deadlines with the same ms expire in the
// order they were added, so one FIFO per distinct ms keeps this O(1).
import { performance } from 'node:perf_hooks';

interface Entry {
  readonly at: number;
  readonly onTimeout: () => void;
}

/** A FIFO of entries with one timeout value: head index instead of shift(). */
interface Queue {
  items: Entry[];
  head: number;
}

export class DialTimer {
  private readonly queues = new Map<number, Queue>();
  private timer: NodeJS.Timeout | null = null;
  private armedAt = Infinity;

  watch(ms: number, onTimeout: () => void): void {
    let q = this.queues.get(ms);
    if (!q) this.queues.set(ms, (q = { items: [], head: 0 }));
    const at = performance.now() + ms;
    q.items.push({ at, onTimeout });
    if (at < this.armedAt) this.arm(at);
  }

  /** Drop every deadline (listener closed). */
  clear(): void {
    this.queues.clear();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.armedAt = Infinity;
  }

  private arm(at: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.armedAt = at;
    this.timer = setTimeout(() => this.fire(), Math.max(1, Math.ceil(at - performance.now())));
    // Like socket timeouts, deadlines never keep the process alive by themselves.
    this.timer.unref();
  }

  private fire(): void {
    this.timer = null;
    this.armedAt = Infinity;
    const now = performance.now();
    const due: Entry[] = [];
    let next = Infinity;
    for (const [ms, q] of this.queues) {
      while (q.head < q.items.length && q.items[q.head]!.at <= now) due.push(q.items[q.head++]!);
      if (q.head === q.items.length) this.queues.delete(ms);
      else {
        if (q.head > 1024 && q.head * 2 > q.items.length) {
          q.items = q.items.slice(q.head);
          q.head = 0;
        }
        next = Math.min(next, q.items[q.head]!.at);
      }
    }
    if (next < Infinity) this.arm(next);
    for (const e of due) e.onTimeout();
  }
}
