// The iptables mode's driver for the one reconciler (src/engine/reconciler.ts;
// src/platform/iptables/planner.ts puts the two together): which service
// chains each Service wants, and the `iptables-restore` input that carries
// out the reconciler's operations on them.
//
// Objects: one kind, 'chain', a service port's own nat chain (KUBE-SVC-,
// KUBE-SVL-, KUBE-EXT-, KUBE-FW-, KUBE-SEP-), keyed by its name. Owner: the
// Service (its namespaced name, the unit of state.changedServices), so a
// partial sync that lists a changed Service also withdraws the chains of a
// port or endpoint it no longer has. Value: the generation of the port's
// render in the memo (memo.ts). A new generation is taken whenever the port
// is rendered from objects the memo has not seen with it, so the value
// changes whenever the rules may have changed and a rewrite is never missed
// (no digest, so no collision). It is a small integer, shared by the port's
// chains: keeping the rule text instead would double what the memo saves,
// and a digest would cost hashing every chain on every full sync to skip
// only the rewrites of renders that come out the same.
//
// A put declares the chain (which, under --noflush, flushes it) and writes
// its rules; a delete declares it and removes it with `-X`. A port's rules
// are one chunk in upstream's order, so a port with any chain put is written
// whole; its chains share one value, so they are put together anyway.
//
// The top-level chains (KUBE-SERVICES, KUBE-NODEPORTS, KUBE-POSTROUTING,
// KUBE-MARK-MASQ, and the whole filter table) are no object: every sync
// writes them whole, as upstream does, with one exception. In large-cluster
// mode a partial sync leaves nat KUBE-SERVICES and KUBE-NODEPORTS alone when
// their rules are exactly those the last restore wrote (TopLevelMemory,
// below): rewriting them means flushing and re-adding one rule per service
// port, which iptables-nft and the kernel pay for in proportion to the
// cluster (seconds at 30k Services) for a change that touches one Service's
// own chains (bench/README.md, scale). Any other change to them (a port
// added, removed, or losing its last endpoint) writes them whole, and so does
// every full sync. Changes others make to them are found as before (the drift
// watch, and natDrift's rule count on the saved table), and make the next
// sync full.
//
// A full sync lists every Service and renders every port afresh, so every
// chain's value is new and every chain is rewritten (the planner adopts the
// live chain list first when it differs from what the reconciler knows, so
// leftovers are deleted). A partial sync lists only state.changedServices and
// takes the others' top-level rules from the memo; a changed Service's port
// whose objects are the ones the memo has seen keeps its generation and is
// not rewritten.
import { BugError } from '../../core/errors.js';
import type { Keyed, ObjectDriver, ObjectOp, ObjectSpec } from '../../core/objects.js';
import { noEndpointCategories } from '../../core/topology.js';
import type { CategorizedEndpoints, ServicePort } from '../../core/types.js';
import { ServicePortMemo } from './memo.js';
import { ChainNamer, isServiceChainName } from './names.js';
import {
  invalidServicePort,
  localhostNodePortsOn,
  nodePortsJumpText,
  renderContext,
  renderRestoreSteps,
  sortedKeys,
  type IptablesRender,
  type IptablesRenderInput,
  type RestoreFrame,
  type SkippedServicePort,
} from './renderer.js';
import { renderServicePort, type RenderedServicePort, type ServiceRenderContext } from './servicerules.js';
import { finish, type Steps } from '../../core/steps.js';

export type IptablesKind = 'chain';
/** A chain's value: the generation of its port's render (see above). */
export type ChainGeneration = number;
export type ChainObject = Keyed<IptablesKind, ChainGeneration>;
export type ChainOp = ObjectOp<IptablesKind, ChainGeneration>;
/** A service chain the nat table holds, its rules unknown. */
export interface LiveChain {
  readonly kind: IptablesKind;
  readonly key: string;
  readonly value: null;
}

export const IPTABLES_OBJECTS: ObjectSpec<IptablesKind, ChainGeneration> = {
  order: ['chain'],
  same: (a, b) => a === b,
};

/**
 * Service ports rendered per step of desiredSteps() and translateSteps(). A
 * port with five endpoints renders in a few microseconds; far fewer than
 * runSliced's 10 ms budget a step, so the slices stay near their budget.
 */
const STEP_PORTS = 250;

/** A port the state has no categories for renders as one without endpoints (one object, so the memo can hit). */
const NOT_CATEGORIZED = noEndpointCategories(false, false);

/**
 * The rules the last restore input left in nat KUBE-SERVICES and KUBE-NODEPORTS: each service
 * port's top-level text in key order (the memo's strings, so an unchanged port compares by
 * identity) and the closing jump. Memory advances when an input is made, as the reconciler's does.
 */
export class TopLevelMemory {
  private tops: readonly string[] | null = null;
  private jump = '';

  /** Whether these are exactly the rules remembered. */
  same(tops: readonly string[], jump: string): boolean {
    const last = this.tops;
    if (last === null || last.length !== tops.length || jump !== this.jump) return false;
    for (let i = 0; i < tops.length; i++) if (last[i] !== tops[i]) return false;
    return true;
  }

  remember(tops: readonly string[], jump: string): void {
    this.tops = tops;
    this.jump = jump;
  }

  forget(): void {
    this.tops = null;
  }
}

/** One per dataplane (per IP family): the memo and the chain names live as long as it. */
export class IptablesDriver implements ObjectDriver<IptablesKind, ChainGeneration, IptablesRenderInput> {
  readonly spec = IPTABLES_OBJECTS;
  private readonly memo = new ServicePortMemo();
  private readonly names = new ChainNamer();
  private readonly top = new TopLevelMemory();

  /** Render the state's service ports; the draft is the plan's input and translates its operations. */
  desired(input: IptablesRenderInput, full: boolean): IptablesDraft {
    return finish(this.desiredSteps(input, full));
  }

  /** desired() as resumable steps (src/core/steps.ts): one step per STEP_PORTS service ports. */
  *desiredSteps(input: IptablesRenderInput, full: boolean): Steps<IptablesDraft> {
    const draft = new IptablesDraft(input, full, this.memo, this.names, this.top);
    yield* draft.renderSteps();
    return draft;
  }

  /** The last input did not reach the kernel: what it would have left in the top-level chains is unknown. */
  failed(): void {
    this.top.forget();
  }

  /** Our service chains among a table's chain names (iptables-save's), as objects of unknown content. */
  live(chains: Iterable<string>): LiveChain[] {
    const out: LiveChain[] = [];
    for (const key of chains) if (isServiceChainName(key)) out.push({ kind: 'chain', key, value: null });
    return out;
  }
}

/**
 * One sync's service ports, rendered (or recalled from the memo) in key
 * order. Iterating it gives each listed Service and the chains it wants;
 * translate() turns the reconciler's operations into the restore input.
 */
export class IptablesDraft implements Iterable<readonly [string, readonly ChainObject[]]> {
  private readonly owners = new Map<string, ChainObject[]>();
  private readonly svcs: ServicePort[] = [];
  private readonly cats: CategorizedEndpoints[] = [];
  private readonly rendered: RenderedServicePort[] = [];
  /** Each port's generation: every chain of port i has the value gens[i]. */
  private readonly gens: number[] = [];
  /** Each port's nat top-level rules, as the memo keeps them. */
  private readonly tops: string[] = [];
  private readonly frame: RestoreFrame;
  private readonly ctx: ServiceRenderContext;

  private readonly input: IptablesRenderInput;
  private readonly skipped: SkippedServicePort[] = [];
  private readonly memo: ServicePortMemo;

  /** Sets up the draft; renderSteps() fills it (desiredSteps() does both). */
  constructor(
    input: IptablesRenderInput,
    readonly full: boolean,
    memo: ServicePortMemo,
    names: ChainNamer,
    private readonly top: TopLevelMemory,
  ) {
    const { state, config, options } = input;
    const family = config.family;
    const lnp = localhostNodePortsOn(config);
    let totalEndpoints = 0;
    for (const key of state.services.keys()) totalEndpoints += state.endpoints.get(key)?.length ?? 0;
    const largeClusterMode = totalEndpoints > options.largeClusterThreshold;
    this.input = input;
    this.memo = memo;
    this.ctx = renderContext(config, options, lnp, largeClusterMode, state.node.nodeIPs[family] ?? null, names);
    this.frame = { config, options, lnp, largeClusterMode, partial: !full, skipped: this.skipped };
  }

  /**
   * Render (or recall) every service port in key order, STEP_PORTS a step
   * (src/core/steps.ts). Nothing else may use the draft, its memo or its
   * chain names until the steps are done.
   */
  *renderSteps(): Steps<void> {
    const { state, config } = this.input;
    const { full, memo, ctx, skipped, owners } = this;
    if (!full) for (const s of state.changedServices) owners.set(s, []);
    let n = 0;
    for (const key of sortedKeys(state.services)) {
      if (++n % STEP_PORTS === 0) yield;
      const svc = state.services.get(key)!;
      const cat = state.categorized.get(key) ?? NOT_CATEGORIZED;
      let wants = owners.get(svc.serviceKey);
      if (full && wants === undefined) owners.set(svc.serviceKey, (wants = []));
      // A full sync renders afresh: it writes every chain anyway.
      const known = full ? null : memo.recall(svc, cat, ctx.key);
      let r: RenderedServicePort;
      let gen: number;
      let top: string;
      if (known !== null) {
        r = known;
        gen = known.gen;
        top = known.natTop;
      } else {
        const bad = invalidServicePort(svc, config.family);
        if (bad !== null) {
          skipped.push({ key, reason: bad });
          continue;
        }
        r = renderServicePort(ctx, svc, cat, wants !== undefined);
        const kept = memo.remember(svc, cat, ctx.key, r);
        gen = kept.gen;
        top = kept.natTop;
      }
      if (wants !== undefined) for (const c of r.chains) wants.push({ kind: 'chain', key: c, value: gen });
      this.svcs.push(svc);
      this.cats.push(cat);
      this.rendered.push(r);
      this.gens.push(gen);
      this.tops.push(top);
    }
  }

  [Symbol.iterator](): Iterator<readonly [string, readonly ChainObject[]]> {
    return this.owners.entries();
  }

  /** The restore input that applies `ops`, the reconciler's plan for this draft. */
  translate(ops: readonly ChainOp[], full: boolean): IptablesRender {
    return finish(this.translateSteps(ops, full));
  }

  /** translate() as resumable steps: the ports written again, then the assembly (renderRestoreSteps). */
  *translateSteps(ops: readonly ChainOp[], full: boolean): Steps<IptablesRender> {
    // A full plan of a partial draft would withdraw every Service it does not list.
    if (full !== this.full)
      throw new BugError(`iptables: a ${full ? 'full' : 'partial'} plan of the other kind of draft`);
    // A put carries its port's generation, which no other port has: the ports to write, by generation.
    const put = new Set<number>();
    const deleted: string[] = [];
    for (const op of ops) {
      if (op.op === 'put') put.add(op.value);
      else deleted.push(op.key);
    }
    deleted.sort();
    const rendered = this.rendered;
    const write = new Array<boolean>(rendered.length).fill(false);
    if (put.size > 0) {
      let n = 0;
      for (let i = 0; i < rendered.length; i++) {
        if (!put.has(this.gens[i]!)) continue;
        write[i] = true;
        // Recalled from the memo, which keeps no own-chain rules: the same render again.
        if (rendered[i]!.own === null) {
          rendered[i] = renderServicePort(this.ctx, this.svcs[i]!, this.cats[i]!, true);
          if (++n % STEP_PORTS === 0) yield;
        }
      }
    }
    const jump = nodePortsJumpText(this.frame.config, this.frame.lnp);
    const keepTop = !full && this.frame.largeClusterMode && this.top.same(this.tops, jump);
    this.top.remember(this.tops, jump);
    return yield* renderRestoreSteps(this.frame, rendered, write, deleted, keepTop);
  }
}
