// Hand-written map contents for tests of the BPF programs on their own
// (before and apart from the driver): small builders that encode one
// entry each, in the JSON form helper.ts takes.
import * as L from '../../src/dataplane/ebpf/layout.js';
import type { Protocol } from '../../src/core/types.js';

export interface HexOp {
  readonly map: L.MapName;
  readonly op: 'update' | 'delete';
  readonly key: string;
  readonly value?: string;
}

const up = (map: L.MapName, key: Uint8Array, value: Uint8Array): HexOp => ({
  map,
  op: 'update',
  key: L.hex(key),
  value: L.hex(value),
});

export function cfg(family: 'IPv4' | 'IPv6', flags: number, mark = 0x4000, netnsCookie = 0n): HexOp {
  return up(
    'cfg',
    L.encodeU32(L.familyIndex(family)),
    L.encodeCfgValue({ mark, flags: flags | L.CFG_ENABLED, netnsCookie }),
  );
}

export function addr(ip: string, flags: number): HexOp {
  return up('addrs', L.encodeAddrKey(ip), L.encodeU32(flags));
}

export function svc(
  addrIP: string,
  port: number,
  proto: Protocol,
  v: Partial<L.SvcValue> & Pick<L.SvcValue, 'svcId' | 'kind'>,
): HexOp {
  return up(
    'svc',
    L.encodeSvcKey({ addr: addrIP, port, proto }),
    L.encodeSvcValue({ clusterSet: 0, localSet: 0, affinitySecs: 0, flags: 0, algo: 'random', ...v }),
  );
}

/** A whole endpoint set: count, slots and membership. */
export function set(setId: number, eps: ReadonlyArray<{ addr: string; port: number }>): HexOp[] {
  return [
    ...eps.map((e, slot) => up('eps', L.encodeEpKey({ setId, slot }), L.encodeEpValue(e))),
    ...eps.map((e, slot) => up('members', L.encodeMemberKey({ setId, ...e }), L.encodeU32(slot))),
    up('sets', L.encodeU32(setId), L.encodeSetValue(eps.length)),
  ];
}

export function podCidr(addrIP: string, prefix: number): HexOp {
  return up('podCidrs', L.encodeLpmKey({ addr: addrIP, prefix }), L.encodeU8(1));
}

export function svcCidr(addrIP: string, prefix: number): HexOp {
  return up('svcCidrs', L.encodeLpmKey({ addr: addrIP, prefix }), L.encodeU8(1));
}

export function lbSrc(svcId: number, addrIP: string, prefix: number): HexOp {
  return up('lbSrc', L.encodeLpmSvcKey({ svcId, addr: addrIP, prefix }), L.encodeU8(1));
}

/** A connection entry as the programs write them (svc_id 0, no CT_SNAT address). */
export function ct(key: L.CtKey, value: { addr: string; port: number; flags: number; closing?: number }): HexOp {
  return up('ct', L.encodeCtKey(key), L.encodeCtValue({ ...value, nat: null, svcId: 0, createdNs: 0n }));
}
