// Recording handlers for the Kubernetes sources: every handler call becomes
// one line ("service add ns/name rv=N"), every SourceEvent is kept, and
// until() waits (event-driven, with a deadline) for a condition on them.

import type { EndpointSlice, Node, Service, ServiceCIDR } from '../../src/core/api.js';
import type { SourceEvent } from '../../src/platform/k8s/events.js';
import type { SourceHandlers } from '../../src/platform/k8s/sources.js';

type Obj = { metadata: { namespace?: string; name?: string; resourceVersion?: string } };

function id(o: Obj): string {
  const m = o.metadata;
  return `${m.namespace ? `${m.namespace}/` : ''}${m.name} rv=${m.resourceVersion}`;
}

export class Recorder {
  readonly calls: string[] = [];
  readonly events: SourceEvent[] = [];
  cidrs: readonly ServiceCIDR[] | undefined;
  private waiters: Array<() => void> = [];

  private push(line: string): void {
    this.calls.push(line);
    this.wake();
  }
  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  readonly onEvent = (ev: SourceEvent): void => {
    this.events.push(ev);
    this.wake();
  };

  readonly handlers: SourceHandlers = {
    service: {
      onServiceAdd: (s: Service) => this.push(`service add ${id(s)}`),
      onServiceUpdate: (o: Service, s: Service) =>
        this.push(`service update ${id(o)} -> ${s.metadata.resourceVersion}`),
      onServiceDelete: (s: Service) => this.push(`service delete ${id(s)}`),
      onServiceSynced: () => this.push('service synced'),
    },
    endpointSlice: {
      onEndpointSliceAdd: (s: EndpointSlice) => this.push(`slice add ${id(s)}`),
      onEndpointSliceUpdate: (o: EndpointSlice, s: EndpointSlice) =>
        this.push(`slice update ${id(o)} -> ${s.metadata.resourceVersion}`),
      onEndpointSliceDelete: (s: EndpointSlice) => this.push(`slice delete ${id(s)}`),
      onEndpointSliceSynced: () => this.push('slice synced'),
    },
    node: {
      onNodeAdd: (n: Node) => this.push(`node add ${id(n)}`),
      onNodeUpdate: (o: Node, n: Node) => this.push(`node update ${id(o)} -> ${n.metadata.resourceVersion}`),
      onNodeDelete: (n: Node) => this.push(`node delete ${id(n)}`),
      onNodeSynced: () => this.push('node synced'),
    },
    serviceCIDR: {
      onServiceCIDRsChanged: (c: readonly ServiceCIDR[]) => {
        this.cidrs = c;
        this.push(`cidrs ${c.map((x) => x.metadata.name).join(',')}`);
      },
    },
  };

  /** Calls whose line starts with prefix. */
  only(prefix: string): string[] {
    return this.calls.filter((c) => c.startsWith(prefix));
  }

  /** Resolve once cond() holds; reject after timeoutMs with what was recorded. */
  until(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
    if (cond()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (!cond()) return;
        cleanup();
        resolve();
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(
          new Error(
            `timed out waiting for ${what}; calls=${JSON.stringify(this.calls)} events=${JSON.stringify(this.events.slice(-10))}`,
          ),
        );
      }, timeoutMs);
      const cleanup = (): void => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== check);
      };
      this.waiters.push(check);
    });
  }
}
