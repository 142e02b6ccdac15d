import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseMessages } from '../netlink/message.js';
import { NlWriter } from './nlwriter.js';

/** Messages with nested attributes of varying sizes, as the batch encoder writes them. */
function writeSample(w: NlWriter, messages: number): void {
  for (let i = 0; i < messages; i++) {
    w.begin((10 << 8) | 6, 1, 100 + i, 2, 0).str(1, 'kube-proxy');
    const list = w.nest(4);
    for (let k = 0; k < i % 7; k++) {
      const e = w.nest(1);
      w.str(1, `expr-${k}-${'x'.repeat(i % 13)}`)
        .u32be(2, i * k)
        .u64be(3, i)
        .u8(4, k);
      w.close(e);
    }
    w.close(list);
    w.bytes(7, Buffer.from(`comment ${i}\0`)).end();
  }
}

test('small chunks hold the same bytes as one large buffer, and no message straddles two chunks', () => {
  const big = new NlWriter(1 << 20);
  writeSample(big, 300);
  const small = new NlWriter(128);
  writeSample(small, 300);
  const chunks = small.chunks();
  assert.ok(chunks.length > 50, `expected many chunks, got ${chunks.length}`);
  assert.equal(small.length, big.length);
  assert.deepEqual(Buffer.concat(chunks), big.view());
  assert.deepEqual(small.view(), big.view());
  let seq = 100;
  for (const c of chunks) {
    const msgs = parseMessages(c);
    assert.equal(
      msgs.reduce((n, m) => n + ((16 + m.payload.length + 3) & ~3), 0),
      c.length,
      'a chunk holds whole messages',
    );
    for (const m of msgs) assert.equal(m.seq, seq++);
  }
  assert.equal(seq, 400);
});

test('a message larger than the chunk size grows its own chunk', () => {
  const w = new NlWriter(64);
  w.begin(1, 0, 1, 2, 0).bytes(1, Buffer.alloc(1000, 7)).end();
  w.begin(1, 0, 2, 2, 0).str(1, 'after').end();
  const msgs = parseMessages(Buffer.concat(w.chunks()));
  assert.deepEqual(
    msgs.map((m) => [m.seq, m.payload.length]),
    [
      [1, 4 + 1004],
      [2, 4 + 12],
    ],
  );
  assert.equal(
    msgs[0]!.payload.subarray(8, 1008).every((b) => b === 7),
    true,
  );
});
