// Benchmark helper (never a test): two runs of bench/ebpf.ts side by side, a
// before and an after (e.g. main's code and a branch's, run one after the
// other), for one path: a table of conn/s, p99, bulk and CPU per connection
// per mode and size, and a chart of the rate and the CPU per connection.
// Runs taken minutes apart on a shared machine differ by their load too:
// each row carries its load average, and CPU per connection moves less with
// load than conn/s does.
//
//   node --import tsx bench/ebpf-compare.ts --before A.json --after B.json
//        [--path nodeport|clusterip] [--out bench/out/ebpf-compare]
import { readFileSync } from 'node:fs';
import { writeChart } from './lib/chart.js';

interface Row {
  mode: string;
  path: string;
  services: number;
  rate: number;
  p99: number;
  gbps: number;
  cpuUs: number;
  load: number;
}

function arg(name: string, dflt?: string): string {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? process.argv[i + 1] : dflt;
  if (v === undefined) throw new Error(`--${name} is required`);
  return v;
}

const path = arg('path', 'nodeport');
const runs = (['before', 'after'] as const).map((label) => ({
  label,
  rows: (JSON.parse(readFileSync(arg(label), 'utf8')) as { rows: Row[] }).rows.filter((r) => r.path === path),
}));
const keys = [...new Set(runs.flatMap((r) => r.rows.map((x) => `${x.services} ${x.mode}`)))];
const find = (run: (typeof runs)[number], key: string) => run.rows.find((x) => `${x.services} ${x.mode}` === key);

console.log(`| Services mode | run | conn/s | p99 us | bulk Gbit/s | cpu us/conn | load |`);
console.log(`|---|---|---:|---:|---:|---:|---:|`);
for (const key of keys)
  for (const run of runs) {
    const r = find(run, key);
    if (r)
      console.log(
        `| ${key} | ${run.label} | ${Math.round(r.rate).toLocaleString('en')} | ${Math.round(r.p99).toLocaleString('en')} | ` +
          `${r.gbps.toFixed(2)} | ${Math.round(r.cpuUs)} | ${r.load.toFixed(1)} |`,
      );
  }

const out = arg('out', 'bench/out/ebpf-compare');
const chart = (file: string, title: string, yLabel: string, pick: (r: Row) => number) =>
  writeChart(file, {
    title,
    yLabel,
    series: runs.map((r) => r.label),
    groups: keys.map((key) => ({
      label: key,
      values: runs.map((run) => (find(run, key) ? pick(find(run, key)!) : null)),
    })),
  });
console.log(chart(`${out}-rate`, `Connections per second, ${path} path: before and after`, 'conn/s', (r) => r.rate));
console.log(
  chart(`${out}-cpu`, `CPU per connection, ${path} path: before and after (µs)`, 'µs per connection', (r) => r.cpuUs),
);
