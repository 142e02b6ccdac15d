// The streamed list parser gives what JSON.parse of the whole reply gives,
// however the reply is cut into chunks, and fails where JSON.parse fails.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ListBodyParser } from './liststream.js';

function parseIn(text: string, cuts: readonly number[]): unknown {
  const bytes = Buffer.from(text, 'utf8');
  const p = new ListBodyParser();
  let at = 0;
  for (const c of [...cuts, bytes.length]) {
    p.push(bytes.subarray(at, c));
    at = c;
  }
  return p.end();
}

/** Every single cut, and a few chunk sizes (cuts inside multi-byte characters included). */
function cutsOf(length: number): number[][] {
  const out: number[][] = [[]];
  for (let i = 0; i <= length; i++) out.push([i]);
  for (const size of [1, 2, 3, 7, 64]) {
    const cuts: number[] = [];
    for (let i = size; i < length; i += size) cuts.push(i);
    out.push(cuts);
  }
  return out;
}

const REPLIES: readonly string[] = [
  JSON.stringify({
    kind: 'EndpointSliceList',
    apiVersion: 'discovery.k8s.io/v1',
    metadata: { resourceVersion: '42', continue: 'abc' },
    items: [
      { metadata: { name: 'a', labels: { 'x/y': 'z' } }, endpoints: [{ addresses: ['10.0.0.1'] }], items: [1, [2]] },
      { metadata: { name: 'b"]},{\\', annotations: { note: 'é ☃ 𝄞 "items":[' } }, ports: [] },
    ],
  }),
  '{ "items" : [ {"a":1} , {"b":[{}]} ] , "metadata" : {"resourceVersion":"7"} }\n',
  '{"kind":"ServiceList","items":[],"metadata":{"resourceVersion":"1"}}',
  '{"items":[1,"two",null,true,{"three":3},[4]]}',
  '{"kind":"Status","status":"Failure","code":410,"message":"items: too old"}',
  '{"kind":"List","metadata":{"items":[{"nested":"not streamed"}]},"itemsX":[1],"items":[{"a":"b"}]}',
  '{"items":null}',
  '',
];

describe('ListBodyParser', () => {
  it('gives what JSON.parse of the whole reply gives, however the reply is chunked', () => {
    for (const text of REPLIES) {
      const want = text === '' ? undefined : JSON.parse(text);
      for (const cuts of cutsOf(Buffer.byteLength(text)))
        assert.deepEqual(parseIn(text, cuts), want, `${text} @ ${cuts}`);
    }
  });

  it('fails as JSON.parse does on a malformed or truncated reply', () => {
    const bad = [
      '{"items":[{"a":1},]}',
      '{"items":[{"a":1},,{"b":2}]}',
      '{"items":[{"a":}]}',
      '{"items":[{"a":1}',
      '{"items":[{"a":1}]',
      '{"items":[{"a":"unterminated}]}',
      'not json',
    ];
    for (const text of bad) {
      assert.throws(() => JSON.parse(text), SyntaxError, text);
      for (const cuts of cutsOf(text.length))
        assert.throws(() => parseIn(text, cuts), SyntaxError, `${text} @ ${cuts}`);
    }
  });

  it("keeps no view of a chunk once the chunk's items are parsed", () => {
    const p = new ListBodyParser();
    const chunk = Buffer.from('{"metadata":{"resourceVersion":"9"},"items":[{"a":1},{"b":2}],"kind":"L"}');
    p.push(chunk);
    chunk.fill(0x20); // a view into the chunk would now read spaces
    assert.deepEqual(p.end(), { metadata: { resourceVersion: '9' }, items: [{ a: 1 }, { b: 2 }], kind: 'L' });
  });
});
