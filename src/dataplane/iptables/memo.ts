// Rendered service ports remembered across syncs by one IptablesDriver,
// keyed by the identity of the engine's immutable objects: an entry is reused
// only for the very same ServicePort object (WeakMap key), the very same
// CategorizedEndpoints object, and the same render context. The engine keeps
// those objects for services that did not change (src/core/snapshot.ts reuses
// `categorized` when the ServicePort and endpoint list are the same objects),
// so a partial sync takes unchanged services' lines from here instead of
// re-rendering them.
//
// Each entry carries a generation number, new for every render remembered:
// two renders with the same generation are the same render, so the driver
// (driver.ts) uses it as its chains' value for the reconciler. It says
// "these chains' rules may have changed" whenever they could have, and never
// misses a change: no digest, so no collision.
//
// Bounded by construction: an entry lives as long as its ServicePort object,
// which the engine drops when the Service is deleted or updated. Only the
// small parts are kept (top-level rules, filter rules, chain names, counts):
// the rules of a service's own chains are rebuilt by the renders that write
// them (full syncs, and ports whose chains the reconciler puts), so the memo
// stays small per port (bench/README.md, iptables-sync).

import { flat } from '../../core/flat.js';
import type { CategorizedEndpoints, ServicePort } from '../../core/types.js';
import type { RenderedServicePort } from './servicerules.js';

/** A remembered render and its generation. */
export interface RememberedServicePort extends RenderedServicePort {
  readonly gen: number;
}

/** A remembered render, with what it was rendered from: one object per port. */
interface Entry extends RememberedServicePort {
  readonly cat: CategorizedEndpoints;
  readonly ctxKey: string;
}

const NO_CHAINS: readonly string[] = Object.freeze([]);

export class ServicePortMemo {
  private readonly entries = new WeakMap<ServicePort, Entry>();
  private gens = 0;

  /** The remembered render of `svc` under `ctxKey` with categories `cat`, or null. */
  recall(svc: ServicePort, cat: CategorizedEndpoints, ctxKey: string): RememberedServicePort | null {
    const e = this.entries.get(svc);
    return e !== undefined && e.cat === cat && e.ctxKey === ctxKey ? e : null;
  }

  /** Remember a render (its own-chain rules are not kept) under a new generation; returns what is kept. */
  remember(svc: ServicePort, cat: CategorizedEndpoints, ctxKey: string, r: RenderedServicePort): RememberedServicePort {
    const gen = ++this.gens;
    // The kept text is flattened: a rope of a service's rule pieces costs several times its length.
    // A port without chains of its own (no endpoints) shares one empty list. Every field is spelled out:
    // `{ ...r, cat, ctxKey }` builds a slower-shaped object that also costs more memory a port.
    const e: Entry = {
      natTop: flat(r.natTop),
      natTopCount: r.natTopCount,
      filter: flat(r.filter),
      filterCount: r.filterCount,
      chains: r.chains.length === 0 ? NO_CHAINS : r.chains,
      own: null,
      ownCount: r.ownCount,
      noLocalInternal: r.noLocalInternal,
      noLocalExternal: r.noLocalExternal,
      gen,
      cat,
      ctxKey,
    };
    this.entries.set(svc, e);
    return e;
  }
}
