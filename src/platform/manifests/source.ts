// Standalone mode's source (--manifests DIR): Services, EndpointSlices, the
// Node and ServiceCIDRs from YAML/JSON files instead of the API server,
// feeding the same handlers as the Kubernetes informers, with upstream's
// informer selectors applied (service-proxy-name, headless, this Node only).
//
// The folder is followed: fs.watch for prompt updates, plus a poll of the
// files' size and mtime as a safety net (watch events can be missed, e.g. on
// network filesystems). Files are read through symlinks, so a ConfigMap
// volume works (its ..data swap is one atomic change); names starting with a
// dot are skipped. Only *.yaml, *.yml and *.json files are read, as `kubectl
// apply -f DIR` does (not recursive).
//
// Failure rules (see src/core/manifests/store.ts for the per-file ones): a
// missing or unreadable folder keeps everything as it was (an unmounted volume
// must not drop traffic); an empty folder deletes everything. Every problem
// is logged once, naming the file, the place in it, the object and the field.

import { watch, type FSWatcher } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { EndpointSlice, Node, Service, ServiceCIDR } from '../../core/api.js';
import { LABEL_HEADLESS, LABEL_SERVICE_PROXY_NAME } from '../../core/api.js';
import { ProxyError } from '../../core/errors.js';
import type { ManifestObject } from '../../core/manifests/parse.js';
import { ManifestSet } from '../../core/manifests/store.js';
import type { Clock, TimerHandle } from '../../core/clock.js';
import type { EndpointSliceHandler, NodeHandler, ServiceCIDRHandler, ServiceHandler } from '../../engine/handlers.js';
import { realClock } from '../clock.js';
import type { Logger } from '../logger.js';

export interface ManifestHandlers {
  readonly service: ServiceHandler;
  readonly endpointSlice: EndpointSliceHandler;
  readonly node: NodeHandler;
  readonly serviceCIDR: ServiceCIDRHandler;
}

export interface ManifestSourceOptions {
  readonly dir: string;
  readonly nodeName: string;
  /** As the informers: "" serves Services without the service-proxy-name label. */
  readonly serviceProxyName?: string;
  readonly log: Logger;
  readonly clock?: Clock;
  /** Safety-net rescan interval; default 2000 ms. */
  readonly pollMs?: number;
}

const MANIFEST_FILE = /^[^.].*\.(ya?ml|json)$/;
type Labelled = { metadata?: { labels?: Record<string, string> } };
const labelOf = (o: unknown, l: string) => (o as Labelled).metadata?.labels?.[l];

export class ManifestSource {
  private readonly set = new ManifestSet();
  private readonly seen = new Map<string, string>(); // file -> "size:mtime" of the last read
  private reported = new Set<string>();
  private delivered = new Map<string, ManifestObject>();
  /** The ServiceCIDR set last published (JSON); null before the first. */
  private cidrs: string | null = null;

  private constructor(private readonly opts: ManifestSourceOptions) {}

  /** Read the folder once; a folder that cannot be read is a start-up error (KPT_CONFIG_INVALID). */
  static async open(opts: ManifestSourceOptions): Promise<ManifestSource> {
    const src = new ManifestSource(opts);
    try {
      await readdir(opts.dir);
    } catch (err) {
      throw new ProxyError(
        'KPT_CONFIG_INVALID',
        `--manifests: cannot read directory ${opts.dir}: ${(err as Error).message}`,
      );
    }
    await src.rescan();
    return src;
  }

  /** This proxy's Node, when a manifest defines it. */
  node(): Node | null {
    return (this.set.objects().get(`Node//${this.opts.nodeName}`)?.obj as Node | undefined) ?? null;
  }

  /** Current problems, one message each (file, place, object, field). */
  problems(): string[] {
    return this.set.problems().map((p) => p.message);
  }

  /** Deliver the folder to `h` (adds, then Synced), then follow it until `signal` aborts. */
  async run(h: ManifestHandlers, signal: AbortSignal): Promise<void> {
    this.deliver(h);
    h.service.onServiceSynced();
    h.endpointSlice.onEndpointSliceSynced();
    h.node.onNodeSynced();
    if (!this.node())
      this.opts.log.warn(
        { dir: this.opts.dir, nodeName: this.opts.nodeName },
        'No Node manifest for this node: /healthz reports it not eligible, and node IPs, labels and podCIDRs are unknown',
      );
    const clock = this.opts.clock ?? realClock;
    const pollMs = this.opts.pollMs ?? 2000;
    let timer: TimerHandle | null = null;
    let scanning: Promise<void> | null = null;
    let again = false;
    // One scan at a time; a change noticed during a scan runs another right after it.
    const scan = async (): Promise<void> => {
      do {
        again = false;
        await this.rescan();
        this.deliver(h);
      } while (again && !signal.aborted);
    };
    const schedule = (ms: number): void => {
      timer?.cancel();
      timer = clock.setTimer(ms, () => {
        scanning = scan()
          .catch((e: Error) => this.opts.log.error({ err: e.message }, 'manifest rescan failed'))
          .finally(() => {
            scanning = null;
            if (!signal.aborted) schedule(pollMs);
          });
      });
    };
    const changed = (): void => {
      if (scanning) again = true;
      else schedule(100);
    };
    let watcher: FSWatcher | null = null;
    try {
      watcher = watch(this.opts.dir, changed);
      watcher.on('error', (e) =>
        this.opts.log.warn({ err: e.message, dir: this.opts.dir }, 'manifest folder watch failed; polling'),
      );
    } catch (e) {
      this.opts.log.warn(
        { err: (e as Error).message, dir: this.opts.dir },
        'cannot watch the manifest folder; polling',
      );
    }
    schedule(pollMs);
    await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    (timer as TimerHandle | null)?.cancel();
    watcher?.close();
    await scanning;
  }

  /** Read files whose size or mtime changed; forget removed ones. A missing folder changes nothing. */
  private async rescan(): Promise<void> {
    let names: string[];
    try {
      names = (await readdir(this.opts.dir)).filter((n) => MANIFEST_FILE.test(n)).sort();
    } catch (err) {
      this.report([`${this.opts.dir}: cannot read the folder (${(err as Error).message}); keeping the last state`]);
      return;
    }
    for (const gone of [...this.seen.keys()].filter((f) => !names.includes(f))) {
      this.seen.delete(gone);
      this.set.update(gone, null);
    }
    const readErrors: string[] = [];
    for (const name of names) {
      const path = join(this.opts.dir, name);
      try {
        const st = await stat(path);
        if (!st.isFile()) continue;
        const sig = `${st.size}:${st.mtimeMs}:${st.ino}`;
        if (this.seen.get(name) === sig) continue;
        const text = await readFile(path, 'utf8');
        this.seen.set(name, sig);
        this.set.update(name, text);
        for (const i of this.set.ignored(name))
          this.opts.log.info({ file: name }, `${name}: ${i}: not read by the proxy, ignored`);
      } catch (err) {
        readErrors.push(`${name}: cannot read (${(err as Error).message}); its previous contents stay in effect`);
      }
    }
    this.report([...readErrors, ...this.problems()]);
  }

  /** Log each problem once while it lasts; say when all are gone. */
  private report(problems: readonly string[]): void {
    const now = new Set(problems);
    for (const p of now) if (!this.reported.has(p)) this.opts.log.error({ dir: this.opts.dir }, p);
    if (now.size === 0 && this.reported.size > 0)
      this.opts.log.info({ dir: this.opts.dir }, 'manifest problems resolved');
    this.reported = now;
  }

  /** Upstream's informer selectors: what the handlers would have seen from the API server. */
  private selected(o: ManifestObject): boolean {
    switch (o.kind) {
      case 'Service': {
        const claim = labelOf(o.obj, LABEL_SERVICE_PROXY_NAME);
        const want = this.opts.serviceProxyName ?? '';
        if (want === '' ? claim !== undefined : claim !== want) return false;
        return (o.obj['spec'] as { clusterIP?: string }).clusterIP !== 'None';
      }
      case 'EndpointSlice':
        return labelOf(o.obj, LABEL_HEADLESS) === undefined;
      case 'Node':
        return o.name === this.opts.nodeName;
      case 'ServiceCIDR':
        return true;
    }
  }

  /** Hand the handlers the difference between what they have and what the folder says now. */
  private deliver(h: ManifestHandlers): void {
    const next = new Map([...this.set.objects()].filter(([, o]) => this.selected(o)));
    for (const [k, o] of this.delivered) if (!next.has(k)) call(h, o, null);
    for (const [k, o] of next) {
      const before = this.delivered.get(k);
      if (!before) call(h, null, o);
      else if (JSON.stringify(before.obj) !== JSON.stringify(o.obj)) call(h, before, o);
    }
    this.delivered = next;
    const cidrs = [...next.values()]
      .filter((o) => o.kind === 'ServiceCIDR')
      .map((o) => o.obj as unknown as ServiceCIDR);
    const text = JSON.stringify(cidrs);
    if (text !== this.cidrs) h.serviceCIDR.onServiceCIDRsChanged(cidrs);
    this.cidrs = text;
  }
}

/** add (before null), delete (after null) or update, to the handler of the object's kind. */
function call(h: ManifestHandlers, before: ManifestObject | null, after: ManifestObject | null): void {
  const kind = (after ?? before)!.kind;
  const b = before?.obj as never;
  const a = after?.obj as never;
  switch (kind) {
    case 'Service':
      return after
        ? before
          ? h.service.onServiceUpdate(b as Service, a)
          : h.service.onServiceAdd(a)
        : h.service.onServiceDelete(b);
    case 'EndpointSlice':
      return after
        ? before
          ? h.endpointSlice.onEndpointSliceUpdate(b as EndpointSlice, a)
          : h.endpointSlice.onEndpointSliceAdd(a)
        : h.endpointSlice.onEndpointSliceDelete(b);
    case 'Node':
      return after ? (before ? h.node.onNodeUpdate(b as Node, a) : h.node.onNodeAdd(a)) : h.node.onNodeDelete(b);
    case 'ServiceCIDR':
      return; // delivered as the whole set in deliver()
  }
}
