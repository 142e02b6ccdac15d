// Benchmark (never a test): the stale-UDP reconciler's two kernel steps at
// 1k/10k/100k conntrack entries, ctnetlink (src/platform/conntracknl.ts)
// against the `conntrack` CLI (src/platform/conntrack.ts):
//   list     all UDP entries of the family, parsed into FlowRecords;
//   delete   every entry stale, spread over P (frontend, endpoint) pairs: the
//            CLI runs one `conntrack -D` filter per pair (what the fallback
//            does), netlink deletes each entry by its tuple.
// Entries are made with ctnetlink CT_NEW in a namespace of our own
// (kpt-<pid>-<rand>-ctbench, removed on exit and on SIGINT), 120 s timeout,
// NATed reply tuples as a Service's have. Prints a table and writes
// bench/out/conntrack.{json,svg,png}. Run as root:
//
//   node --import tsx bench/conntrack.ts [--sizes 1000,10000,100000] [--pairs 1,100] [--runs 3]
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { loadavg } from 'node:os';
import { Conntrack, type FlowRecord } from '../src/platform/conntrack.js';
import { openCtNetlink } from '../src/platform/conntracknl.js';
import { NETLINK_PROTOCOL, openNetlink } from '../src/platform/netlink/index.js';
import { run } from '../src/platform/exec.js';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../test/netns/cleanup.js';
import { newPrefix } from '../test/netns/names.js';
import { newEntryRequest } from '../test/support/conntrack.js';
import { writeChart } from './lib/chart.js';

const OUT = process.env['KPT_BENCH_OUT'] ?? join(dirname(fileURLToPath(import.meta.url)), 'out');
const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : dflt;
};
const SIZES = arg('sizes', '1000,10000,100000').split(',').map(Number);
const PAIRS = arg('pairs', '1,100').split(',').map(Number);
const RUNS = Number(arg('runs', '3'));

async function fill(ns: string, n: number, pairs: number): Promise<void> {
  const sock = await openNetlink(NETLINK_PROTOCOL.NETFILTER, { netns: ns });
  if (!sock) throw new Error('netlink unavailable (koffi)');
  try {
    const reqs = Array.from({ length: n }, (_, i) => newEntryRequest(i, pairs));
    const bad = sock.ackAll(reqs).filter((r) => r.errno !== 0);
    if (bad.length) throw new Error(`${bad.length} entries not created (errno ${bad[0]!.errno})`);
  } finally {
    sock.close();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const time = async <T>(f: () => Promise<T> | T): Promise<[number, T]> => {
  const t0 = performance.now();
  const v = await f();
  return [performance.now() - t0, v];
};

interface Result {
  size: number;
  listNetlinkMs: number;
  listCliMs: number;
  delete: Array<{ pairs: number; netlinkMs: number; cliMs: number; cliPasses: number }>;
}

async function measure(ns: string, size: number): Promise<Result> {
  const nl = (await openCtNetlink(ns))!;
  const cli = new Conntrack((args) => run('ip', ['netns', 'exec', ns, 'conntrack', ...args], { allowFailure: true }));
  try {
    await fill(ns, size, 1);
    const ln: number[] = [];
    const lc: number[] = [];
    for (let r = 0; r < RUNS; r++) {
      const [a, viaNl] = await time(() => nl.listUDPFlows('IPv4'));
      const [b, viaCli] = await time(() => cli.listUDPFlows('IPv4'));
      if (viaNl.length !== size || viaCli.length !== size)
        throw new Error(`listed ${viaNl.length} / ${viaCli.length}, expected ${size}`);
      ln.push(a);
      lc.push(b);
    }
    const del: Result['delete'] = [];
    for (const pairs of PAIRS) {
      const dn: number[] = [];
      const dc: number[] = [];
      let cliPasses = 1;
      for (let r = 0; r < RUNS; r++) {
        nl.deleteFlows('IPv4', nl.listUDPFlows('IPv4')); // start empty
        await fill(ns, size, pairs);
        const flows: FlowRecord[] = nl.listUDPFlows('IPv4');
        const [a, rn] = await time(() => nl.deleteStale('IPv4', flows));
        if (rn.deleted !== size) throw new Error(`netlink deleted ${rn.deleted} of ${size}`);
        await fill(ns, size, pairs);
        // conntrack -D stops when its dump is interrupted (the conntrack hash is shared with every other
        // namespace of the host): run it again until everything is gone, as a caller would have to.
        const [b, passes] = await time(async () => {
          let left = size;
          for (let pass = 1; pass <= 100; pass++) {
            left -= (await cli.deleteStale('IPv4', flows)).deleted;
            if (left <= 0) return pass;
          }
          throw new Error(`conntrack -D left ${left} of ${size} entries after 100 passes`);
        });
        cliPasses = Math.max(cliPasses, passes);
        dn.push(a);
        dc.push(b);
      }
      del.push({ pairs, netlinkMs: median(dn), cliMs: median(dc), cliPasses });
    }
    return { size, listNetlinkMs: median(ln), listCliMs: median(lc), delete: del };
  } finally {
    nl.close();
  }
}

async function main(): Promise<void> {
  const ns = `${newPrefix()}ctbench`;
  trackNamespace(ns);
  const drop = () => {
    deleteNamespaceSync(ns);
    untrackNamespace(ns);
  };
  process.once('SIGINT', () => {
    drop();
    process.exit(130);
  });
  execFileSync('ip', ['netns', 'add', ns]);
  const load0 = loadavg()[0]!;
  const results: Result[] = [];
  try {
    for (const size of SIZES) {
      results.push(await measure(ns, size));
      // Each size starts from an empty table.
      const nl = (await openCtNetlink(ns))!;
      nl.deleteFlows('IPv4', nl.listUDPFlows('IPv4'));
      nl.close();
    }
  } finally {
    drop();
  }
  const f = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(1)} ms`);
  console.log(
    `medians of ${RUNS} runs; load average ${load0.toFixed(2)} at start, ${loadavg()[0]!.toFixed(2)} at end (2 cores)`,
  );
  const dh = PAIRS.map((p) => `delete all, ${p} pair${p > 1 ? 's' : ''}: netlink / CLI (x)`).join(' | ');
  console.log(`| entries | list: netlink | list: conntrack -L | x | ${dh} |`);
  console.log(`|---|---|---|---|${PAIRS.map(() => '---|').join('')}`);
  for (const r of results) {
    const d = r.delete.map(
      (x) =>
        `${f(x.netlinkMs)} / ${f(x.cliMs)}${x.cliPasses > 1 ? ` [${x.cliPasses} passes]` : ''} (${(x.cliMs / x.netlinkMs).toFixed(1)})`,
    );
    console.log(
      `| ${r.size} | ${f(r.listNetlinkMs)} | ${f(r.listCliMs)} | ${(r.listCliMs / r.listNetlinkMs).toFixed(1)} | ${d.join(' | ')} |`,
    );
  }
  mkdirSync(OUT, { recursive: true });
  writeFileSync(join(OUT, 'conntrack.json'), JSON.stringify(results, null, 2));
  const png = writeChart(join(OUT, 'conntrack'), {
    title: 'conntrack: list and delete UDP entries, ctnetlink vs conntrack CLI (seconds, log scale)',
    yLabel: 'seconds',
    log: true,
    series: [
      'list: netlink',
      'list: conntrack -L',
      ...PAIRS.flatMap((p) => [`delete (${p} pairs): netlink`, `delete (${p} pairs): conntrack -D`]),
    ],
    groups: results.map((r) => ({
      label: `${r.size / 1000}k entries`,
      values: [
        r.listNetlinkMs / 1000,
        r.listCliMs / 1000,
        ...r.delete.flatMap((d) => [d.netlinkMs / 1000, d.cliMs / 1000]),
      ],
    })),
  });
  console.log(png ? `chart: ${png}` : 'chart: SVG only (no rsvg-convert)');
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
