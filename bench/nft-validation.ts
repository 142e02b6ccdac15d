// Benchmark (never a test): what the kernel charges one nf_tables commit for
// the size of the table around it. A table of N chains, each reached by a
// jump from one verdict map and holding a mark rule and a DNAT rule (the
// shape of nftables mode's endpoint chains), then three one-line commits:
//   * an element into a plain set (no expression to validate);
//   * a DNAT rule appended to an existing chain;
//   * a new chain with a DNAT rule and a map element jumping to it (what a
//     one-endpoint change in the `lean` layout commits).
// The time is that of the `sendmsg` that carries the batch (strace -T): the
// kernel processes and commits the batch inside it, so the nft tool's own
// start-up and cache reads are not in it. Every size runs in a fresh network
// namespace kpt-nftval-<pid>-<n>, removed on exit. Run as root:
//
//   node --import tsx bench/nft-validation.ts [--sizes 5000,50000,150000] [--reps 5]
//
// Prints a table and writes bench/out/nft-validation.{json,svg,png}.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../test/netns/spawn.js';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../test/netns/cleanup.js';
import { writeChart } from './lib/chart.js';
import { arg, median } from './lib/cluster.js';

const SIZES = arg('sizes', '5000,50000,150000').split(',').map(Number);
const REPS = Number(arg('reps', '5'));
const OUT = join(REPO_ROOT, 'bench', 'out');
const KINDS = ['set element', 'DNAT rule', 'chain + DNAT rule + jump element'] as const;

const a4 = (base: string, i: number) => `${base}.${(i >> 8) & 255}.${i & 255}`;

function table(n: number): string {
  const out = ['table ip t {', ' set plain {', '  type ipv4_addr', ' }'];
  for (let i = 0; i < n; i++) {
    out.push(` chain c${i} {`, `  ip saddr ${a4(`10.${(i >> 16) & 255}`, i)} meta mark set 0x4000`);
    out.push(`  meta l4proto tcp dnat to ${a4(`10.${64 + ((i >> 16) & 63)}`, i)}:80`, ' }');
  }
  out.push(' map vm {', '  type ipv4_addr : verdict');
  const els: string[] = [];
  for (let i = 0; i < n; i++) els.push(`${a4(`172.${16 + (i >> 16)}`, i)} : jump c${i}`);
  out.push(`  elements = { ${els.join(', ')} }`, ' }');
  out.push(' chain pre {', '  type nat hook prerouting priority -100', '  ip daddr vmap @vm', ' }', '}');
  return out.join('\n') + '\n';
}

/** The longest sendmsg of one nft run, in ms: the one carrying the batch. */
function commitMs(ns: string, cmd: string): number {
  const r = spawnSync('ip', ['netns', 'exec', ns, 'strace', '-T', '-e', 'trace=sendmsg', 'nft', cmd], {
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`nft ${cmd}: ${r.stderr.slice(-500)}`);
  const times = [...r.stderr.matchAll(/<(\d+\.\d+)>/g)].map((m) => Number(m[1]) * 1000);
  return Math.max(...times);
}

function measure(n: number): Record<string, number[]> {
  const ns = `kpt-nftval-${process.pid}-${n}`;
  execFileSync('ip', ['netns', 'add', ns]);
  trackNamespace(ns);
  const file = join(OUT, `nft-validation-${process.pid}.nft`);
  try {
    writeFileSync(file, table(n));
    execFileSync('ip', ['netns', 'exec', ns, 'nft', '-f', file]);
    const res: Record<string, number[]> = Object.fromEntries(KINDS.map((k) => [k, []]));
    for (let k = 1; k <= REPS; k++) {
      res[KINDS[0]]!.push(commitMs(ns, `add element ip t plain { 192.168.7.${k} }`));
      res[KINDS[1]]!.push(commitMs(ns, `add rule ip t c1 meta l4proto tcp dnat to 10.9.9.${k}:80`));
      res[KINDS[2]]!.push(
        commitMs(
          ns,
          `add chain ip t x${k}; add rule ip t x${k} meta l4proto tcp dnat to 10.9.8.${k}:80; add element ip t vm { 192.168.9.${k} : jump x${k} }`,
        ),
      );
    }
    return res;
  } finally {
    rmSync(file, { force: true });
    deleteNamespaceSync(ns);
    untrackNamespace(ns);
  }
}

function main(): void {
  if (spawnSync('strace', ['-V']).status !== 0)
    execFileSync('apt-get', ['install', '-y', '-qq', 'strace'], { stdio: 'ignore' });
  mkdirSync(OUT, { recursive: true });
  const rows = SIZES.map((n) => ({ chains: n, ms: measure(n) }));
  console.log(`| chains (rules) | ${KINDS.map((k) => `${k}: median ms`).join(' | ')} |`);
  console.log(`|---:|${KINDS.map(() => '---:').join('|')}|`);
  for (const r of rows)
    console.log(`| ${r.chains} (${2 * r.chains + 1}) | ${KINDS.map((k) => median(r.ms[k]!).toFixed(1)).join(' | ')} |`);
  const base = join(OUT, 'nft-validation');
  writeFileSync(`${base}.json`, JSON.stringify({ reps: REPS, rows }, null, 1));
  writeChart(base, {
    title: 'One nf_tables commit beside a table of N chains (kernel time, median)',
    yLabel: 'ms',
    series: [...KINDS],
    groups: rows.map((r) => ({ label: `${r.chains / 1000}k chains`, values: KINDS.map((k) => median(r.ms[k]!)) })),
  });
  console.log(`wrote ${base}.json`);
}

main();
