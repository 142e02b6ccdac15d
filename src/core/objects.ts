// The vocabulary between a mode's driver and the one reconciler
// (src/engine/reconciler.ts): a driver says which keyed objects each owner
// (a service, a service port, the node) wants in its datapath, and receives
// back the ordered operations that make the datapath hold them. The types
// live in core so the pure drivers in src/dataplane can build and read them
// without depending on the engine.

/**
 * One object of a datapath: an nftables chain or set element, a BPF map
 * entry, an IPVS virtual server, an ipset member. `kind` picks the applier's
 * code path and the order (see ObjectOrder); `key` names the object within
 * its kind; `value` is what the object holds.
 */
export interface Keyed<K extends string, V> {
  readonly kind: K;
  readonly key: string;
  readonly value: V;
}

/**
 * Make the object hold `value`. `before` is what the datapath held, when it
 * held the object: absent means create, present means replace, and `null`
 * means the object exists but its content is unknown (read back from a kernel
 * that does not tell, e.g. a chain's rules), so it must be rewritten.
 */
export interface PutOp<K extends string, V> {
  readonly op: 'put';
  readonly kind: K;
  readonly key: string;
  readonly value: V;
  readonly before?: V | null;
}

/** Remove the object, which held `before` (null: unknown). */
export interface DeleteOp<K extends string, V> {
  readonly op: 'delete';
  readonly kind: K;
  readonly key: string;
  readonly before: V | null;
}

export type ObjectOp<K extends string, V> = PutOp<K, V> | DeleteOp<K, V>;

/**
 * How a mode's objects behave under reconciliation.
 *
 * `order` lists the kinds in the order their puts are applied, so that what
 * an object refers to exists first (sets and chains before the rules and
 * elements that use them, endpoint slots before the counts that reach them);
 * deletes run afterwards, in the reverse order, so nothing still in use is
 * removed before its users are.
 */
export interface ObjectSpec<K extends string, V> {
  readonly order: readonly K[];
  /** True when the datapath need not be written to change `a` into `b`. */
  same(a: V, b: V): boolean;
  /**
   * The value of an object that several owners want, from each owner's
   * value (in the order the owners asked). Absent: the latest owner's value.
   */
  merge?(kind: K, values: readonly V[]): V;
}

/**
 * The pure half of a mode's driver (src/dataplane/<mode>/driver.ts): what
 * each owner wants, given the sync's state. A partial sync asks only for the
 * owners the state marks changed (an owner with nothing to want maps to an
 * empty list, which withdraws it); a full one asks for every owner.
 */
export interface ObjectDriver<K extends string, V, S> {
  readonly spec: ObjectSpec<K, V>;
  desired(state: S, full: boolean): Iterable<readonly [string, readonly Keyed<K, V>[]]>;
}
