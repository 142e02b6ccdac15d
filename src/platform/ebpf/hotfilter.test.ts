// HotFilter against maps in memory: kpt_hot is written so that the first
// check never lets go a packet to an address kpt_addrs holds (the bits of an
// added key before the key, those of a removed key after it), only changed
// words are written, and a failed write is answered by counting what the
// maps hold. The kernel side is test/e2e/ebpf-exit.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as F from '../../dataplane/ebpf/filter.js';
import * as L from '../../dataplane/ebpf/layout.js';
import type { MapOp } from '../../dataplane/ebpf/store.js';
import { HotFilter, type HotMaps } from './hotfilter.js';
import type { BpfMap } from './map.js';

class MemMap {
  readonly entries = new Map<string, Uint8Array>();
  writes = 0;
  dump(): Array<[Uint8Array, Uint8Array]> {
    return [...this.entries].map(([k, v]) => [Buffer.from(k, 'latin1'), v]);
  }
  updateMany(rows: ReadonlyArray<readonly [Uint8Array, Uint8Array]>): void {
    for (const [k, v] of rows) this.entries.set(Buffer.from(k).toString('latin1'), new Uint8Array(v));
    this.writes += rows.length;
  }
}

function setup() {
  const hot = new MemMap();
  const addrs = new MemMap();
  const svcCidrs = new MemMap();
  const maps = { hot, addrs, svcCidrs } as unknown as HotMaps & Record<string, BpfMap>;
  /** kpt_hot says a packet to ip may be ours. */
  const hotFor = (ip: string): boolean => {
    const base = ip.includes(':') ? F.HOT_STRIDE : 0;
    const h = F.hotAddrBit(L.addrBytes(ip));
    const w = hot.entries.get(Buffer.from(L.encodeU32(base + 1 + (h >> 6))).toString('latin1'));
    return !!w && (w[(h & 63) >> 3]! & (1 << (h & 7))) !== 0;
  };
  return { hot, addrs, maps, hotFor };
}

const put = (ip: string): MapOp => ({ map: 'addrs', op: 'update', key: L.encodeAddrKey(ip), value: L.encodeU32(4) });
const del = (ip: string): MapOp => ({ map: 'addrs', op: 'delete', key: L.encodeAddrKey(ip) });

test('bits of added addresses are written before the write, bits of removed ones cleared after it', () => {
  const { hot, addrs, maps, hotFor } = setup();
  addrs.updateMany([[L.encodeAddrKey('10.96.0.1'), L.encodeU32(4)]]);
  const f = new HotFilter(maps);
  assert.ok(hotFor('10.96.0.1'), 'what kpt_addrs held at the start');
  assert.equal(hot.entries.size, 2 * F.HOT_STRIDE, 'every word of both families written once at the start');

  const ops = [put('10.96.0.2'), del('10.96.0.1'), put('fd00::2')];
  hot.writes = 0;
  assert.equal(f.before(ops), true);
  assert.ok(hotFor('10.96.0.2') && hotFor('fd00::2'), 'added before the write');
  assert.ok(hotFor('10.96.0.1'), 'still there while its key may be');
  assert.ok(hot.writes <= 2, `only the changed words: ${hot.writes}`);
  f.after(ops);
  assert.ok(!hotFor('10.96.0.1'), 'gone after the write');
  assert.ok(hotFor('10.96.0.2'));

  hot.writes = 0;
  const ct: MapOp = { map: 'ct', op: 'update', key: new Uint8Array(40), value: new Uint8Array(56) };
  assert.equal(f.before([ct]), false);
  assert.equal(hot.writes, 0, 'writes to other maps do not touch kpt_hot');
});

test('after a failed write, rebuild() counts what the maps hold', () => {
  const { addrs, maps, hotFor } = setup();
  const f = new HotFilter(maps);
  const ops = [put('10.96.0.3'), put('10.96.0.4')];
  f.before(ops);
  // Only the first write happened before the failure.
  addrs.updateMany([[L.encodeAddrKey('10.96.0.3'), L.encodeU32(4)]]);
  f.rebuild();
  assert.ok(hotFor('10.96.0.3'));
  assert.ok(!hotFor('10.96.0.4'), 'the key that never made it has no bit');
});
