// Benchmark (never a test): what the annotation kube-proxy-ts/lb-algorithm
// costs nftables mode. N Services x 4 endpoints, all with one algorithm (or
// none: random, the production 'lean' layout): the planner's cold render, the
// netlink encoding of its batch (its size) and the kernel's cold load of the
// same transaction with `nft -f` in a fresh network namespace (`unshare -n`,
// gone when nft exits). Medians of --runs. Run as root:
//
//   node --import tsx bench/lb-algorithms.ts [--sizes 1000] [--runs 5]
//
// Writes bench/out/lb-algorithms.json.
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { LbAlgorithm } from '../src/core/lbalgorithm.js';
import { syncStateFromObjects } from '../src/core/snapshot.js';
import type { DataplaneConfig, SyncState } from '../src/core/types.js';
import { encodeBatch } from '../src/platform/nftables/nlencode.js';
import { NftablesPlanner } from '../src/platform/nftables/planner.js';
import * as F from '../test/support/fixtures.js';

const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : dflt;
};
const SIZES = arg('sizes', '1000').split(',').map(Number);
const RUNS = Number(arg('runs', '5'));
const CONFIG: DataplaneConfig = {
  family: 'IPv4',
  masqueradeMark: 0x4000,
  masqueradeAll: false,
  localDetector: { kind: 'cidr', cidrs: ['10.0.0.0/8'] },
  nodePortAddresses: [`${F.NODE_IP}/32`],
  localhostNodePorts: false,
  localIPs: ['127.0.0.1', F.NODE_IP],
};

function state(n: number, algorithm: LbAlgorithm | undefined): SyncState {
  const services: unknown[] = [];
  const slices: unknown[] = [];
  for (let i = 0; i < n; i++) {
    const name = `s${i}`;
    const ip = `172.30.${i >> 8}.${i & 255}`;
    services.push(
      F.withClusterIP(
        F.makeService('ns', name, (s) => {
          if (algorithm) s.metadata.annotations = { 'kube-proxy-ts/lb-algorithm': algorithm };
          s.spec.ports = [F.svcPort('p80', 80)];
        }),
        ip,
      ),
    );
    slices.push(
      F.makeSlice('ns', name, 1, (s) => {
        s.endpoints = [1, 2, 3, 4].map((k) => F.endpoint(`10.${180 + k}.${i >> 8}.${i & 255}`));
        s.ports = [F.slicePort('p80', 8080)];
      }),
    );
  }
  return syncStateFromObjects({
    services,
    slices,
    family: 'IPv4',
    node: F.makeNode(F.TEST_NODE),
    serviceCIDRs: [F.SERVICE_CIDR],
    fullSync: true,
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const dir = join(tmpdir(), `kpt-lbbench-${process.pid}`);
mkdirSync(dir, { recursive: true });
const results: unknown[] = [];
try {
  for (const n of SIZES)
    for (const algorithm of [undefined, 'round-robin', 'maglev', 'source-hash'] as const) {
      const s = state(n, algorithm);
      const plan: number[] = [];
      const encode: number[] = [];
      const load: number[] = [];
      let bytes = 0;
      for (let r = 0; r < RUNS; r++) {
        const t0 = performance.now();
        const { tx } = new NftablesPlanner(CONFIG).plan(s, 0);
        const t1 = performance.now();
        const b = encodeBatch(tx.operations, 'ip', new Map(), 1);
        encode.push(performance.now() - t1);
        plan.push(t1 - t0);
        bytes = b.chunks.reduce((sum, c) => sum + c.length, 0);
        const file = join(dir, 'table.nft');
        writeFileSync(file, tx.toString());
        const t2 = performance.now();
        execFileSync('unshare', ['-n', 'nft', '-f', file]);
        load.push(performance.now() - t2);
      }
      const row = {
        services: n,
        algorithm: algorithm ?? 'random',
        planMs: Math.round(median(plan)),
        encodeMs: Math.round(median(encode)),
        batchMB: Number((bytes / 1e6).toFixed(1)),
        nftLoadMs: Math.round(median(load)),
      };
      results.push(row);
      console.log(JSON.stringify(row));
    }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
mkdirSync(new URL('./out/', import.meta.url), { recursive: true });
writeFileSync(new URL('./out/lb-algorithms.json', import.meta.url), JSON.stringify(results, null, 2));
