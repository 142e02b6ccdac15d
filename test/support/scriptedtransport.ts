// A Kubernetes list/watch transport for the reflector's unit tests: lists are
// scripted, watches are opened by the reflector and driven by the test.
import type { ListResult, ListWatchTransport, Query } from '../../src/platform/k8s/transport.js';

export interface OpenWatch {
  query: Query;
  open(): void;
  send(type: string, obj: unknown): void;
  end(): void;
  fail(err: Error): void;
  aborted(): boolean;
}

/** A transport whose lists are scripted and whose watches the test drives. */
export class ScriptedTransport implements ListWatchTransport {
  lists: Array<ListResult | Error> = [];
  listCalls = 0;
  listQueries: Query[] = [];
  watches: OpenWatch[] = [];

  untilReachable?: (signal: AbortSignal) => Promise<void>;

  async list(_path: string, query: Query): Promise<ListResult> {
    this.listCalls++;
    this.listQueries.push(query);
    const next = this.lists.shift() ?? new Error('no scripted list');
    if (next instanceof Error) throw next;
    return next;
  }

  watch(
    _path: string,
    query: Query,
    onOpen: () => void,
    onEvent: (t: string, o: unknown) => void,
    signal: AbortSignal,
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      signal.addEventListener('abort', () => resolve());
      this.watches.push({
        query,
        open: onOpen,
        send: onEvent,
        end: () => resolve(),
        fail: reject,
        aborted: () => signal.aborted,
      });
    });
  }
}
