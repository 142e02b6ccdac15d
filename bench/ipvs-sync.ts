// Benchmark (never a test): IPVS mode against iptables and nftables modes in
// the same QEMU guest (Debian's kernel has IPVS; this machine's does not).
// Absolute times under software emulation mean little, so the report is in
// ratios to the other modes measured in the same guest:
//   - cold sync of 1k and 10k ClusterIP Services x 5 endpoints;
//   - a one-endpoint change at 10k (the engine's partial sync);
//   - TCP connection setup latency p50/p99 through a ClusterIP with 0 and
//     with 10k other Services programmed (IPVS and nftables look up in hash
//     tables; iptables walks KUBE-SERVICES rule by rule);
//   - IPVS mode's kernel clients against the tools at 1k Services: generic
//     netlink vs `ipvsadm -R` (one process) vs one `ipvsadm` per change,
//     rtnetlink vs `ip -batch` vs one `ip addr add` each, `ipset restore` vs
//     one `ipset add` each (per-process costs measured on a sample of 20
//     Services, scaled to 1k).
// Run on the host as root; it boots the guest (scripts/guest) and runs itself
// inside with --measure, then prints the table and writes
// bench/out/ipvs-sync.{json,svg,png}:
//
//   node --import tsx bench/ipvs-sync.ts [--sizes 1000,10000] [--connections 300]
//
// Inside the guest each mode gets fresh namespaces kpt-<pid>-<rand>-*.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import type { Dataplane, SyncState } from '../src/core/types.js';
import { realClock } from '../src/platform/clock.js';
import { IptablesDataplane } from '../src/platform/iptables/dataplane.js';
import { netnsRunner } from '../src/platform/exec.js';
import { runnerSysctl } from '../src/platform/iptables/sysctl.js';
import { IpvsKernel } from '../src/platform/ipvs/client.js';
import { IpvsDataplane } from '../src/platform/ipvs/dataplane.js';
import { IpsetTool } from '../src/platform/ipvs/ipset.js';
import { openKernel } from '../src/platform/ipvs/kernel.js';
import { Rtnl } from '../src/platform/ipvs/rtnl.js';
import { NftablesDataplane, nftRunner } from '../src/platform/nftables/dataplane.js';
import type { IpvsOp, VirtualServer } from '../src/dataplane/ipvs/objects.js';
import { deleteNamespaceSync, trackNamespace, untrackNamespace } from '../test/netns/cleanup.js';
import { newPrefix } from '../test/netns/names.js';
import { writeChart } from './lib/chart.js';
import { IPVS_BENCH_CONFIG as CONFIG, ipvsBenchState } from './lib/ipvsstate.js';

const here = dirname(fileURLToPath(import.meta.url));
const REPO = here.includes(join('dist', 'bench')) ? join(here, '..', '..') : join(here, '..');
const arg = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const SIZES = (arg('sizes') ?? '1000,10000').split(',').map(Number);
const CONNECTIONS = Number(arg('connections') ?? 300);
const MODES = ['ipvs', 'iptables', 'nftables'] as const;
type Mode = (typeof MODES)[number];

interface Results {
  readonly sizes: number[];
  readonly cold: Record<Mode, Record<number, number>>;
  readonly change: Record<Mode, number>;
  readonly latency: Record<Mode, Record<'0' | 'big', { p50: number; p99: number }>>;
  readonly clients: Record<string, number>;
  readonly guest: { kernel: string; cpus: number };
}

/** n ClusterIP Services x 5 endpoints; Service 0 points at the real server 10.2.0.2:8080. */
function state(n: number, changed = false, full = true): SyncState {
  return ipvsBenchState(n, { full, first: ['10.2.0.2'], change: changed ? '10.250.0.1' : undefined });
}

const sh = (ns: string, ...args: string[]) => execFileSync('ip', ['netns', 'exec', ns, ...args], { encoding: 'utf8' });

/** client ns --veth-- node ns --veth-- server ns, a TCP server on 10.2.0.2:8080. */
function topology(): { node: string; client: string; server: string; stop: () => void } {
  const p = newPrefix();
  const [node, client, server] = [`${p}n`, `${p}c`, `${p}s`];
  for (const ns of [node, client, server]) {
    trackNamespace(ns);
    execFileSync('ip', ['netns', 'add', ns]);
    sh(ns, 'ip', 'link', 'set', 'lo', 'up');
  }
  execFileSync('ip', ['-n', node, 'link', 'add', 'c0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', client]);
  execFileSync('ip', ['-n', node, 'link', 'add', 's0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', server]);
  const cmds: Array<[string, string[]]> = [
    [node, ['addr', 'add', '10.1.0.1/24', 'dev', 'c0']],
    [node, ['addr', 'add', '10.2.0.1/24', 'dev', 's0']],
    [node, ['link', 'set', 'c0', 'up']],
    [node, ['link', 'set', 's0', 'up']],
    [client, ['addr', 'add', '10.1.0.2/24', 'dev', 'eth0']],
    [client, ['link', 'set', 'eth0', 'up']],
    [client, ['route', 'add', 'default', 'via', '10.1.0.1']],
    [server, ['addr', 'add', '10.2.0.2/24', 'dev', 'eth0']],
    [server, ['link', 'set', 'eth0', 'up']],
    [server, ['route', 'add', 'default', 'via', '10.2.0.1']],
  ];
  for (const [ns, c] of cmds) execFileSync('ip', ['-n', ns, ...c]);
  sh(node, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1');
  const srv = spawn('ip', ['netns', 'exec', server, process.execPath, '-e', SERVER], { stdio: 'ignore' });
  return {
    node,
    client,
    server,
    stop: () => {
      srv.kill('SIGKILL');
      for (const ns of [client, server, node]) {
        deleteNamespaceSync(ns);
        untrackNamespace(ns);
      }
    },
  };
}

const SERVER = `require('net').createServer((c) => c.end('x')).listen(8080, '0.0.0.0')`;
/** Connect to 10.96.0.0:80 n times, one at a time; print the setup latencies (connect to first byte), ms. */
const CLIENT = `
const net = require('net'); const n = Number(process.argv[1]); const out = [];
(async () => { for (let i = 0; i < n; i++) { const t = performance.now();
  await new Promise((res, rej) => { const s = net.connect(80, '10.96.0.0'); s.once('data', () => { out.push(performance.now() - t); s.destroy(); res(); }); s.once('error', rej); s.setTimeout(10000, () => rej(new Error('timeout'))); }); }
  console.log(JSON.stringify(out)); })().catch((e) => { console.error(e.message); process.exit(1); });`;

function dataplane(mode: Mode, node: string): Promise<Dataplane> | Dataplane {
  const run = netnsRunner(node);
  if (mode === 'iptables')
    return new IptablesDataplane({
      config: CONFIG,
      run,
      sysctl: runnerSysctl(run),
      clock: realClock,
      syncPeriodMs: 3_600_000,
    });
  if (mode === 'nftables')
    return new NftablesDataplane({ config: CONFIG, runner: nftRunner(node), netns: node, clock: realClock });
  return openKernel(run, runnerSysctl(run), node).then(
    (kernel) =>
      new IpvsDataplane({
        config: CONFIG,
        ipvs: { scheduler: 'rr', excludeCIDRs: [], strictARP: false, tcpTimeout: 0, tcpFinTimeout: 0, udpTimeout: 0 },
        kernel,
        run,
        clock: realClock,
        syncPeriodMs: 3_600_000,
      }),
  );
}

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

function latency(t: { client: string }): { p50: number; p99: number } {
  const r = spawnSync('ip', ['netns', 'exec', t.client, process.execPath, '-e', CLIENT, String(CONNECTIONS)], {
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`latency client: ${r.stderr}`);
  const xs = JSON.parse(r.stdout) as number[];
  return { p50: percentile(xs, 50), p99: percentile(xs, 99) };
}

/** Cold syncs, the change at the largest size, latency with 1 and with the largest number of Services. */
async function measureMode(mode: Mode, res: Results): Promise<void> {
  const big = Math.max(...SIZES);
  for (const n of SIZES) {
    const t = topology();
    try {
      const dp = await dataplane(mode, t.node);
      const st = state(n);
      res.cold[mode][n] = await timed(() => dp.sync(st));
      log(`${mode} cold ${n}: ${res.cold[mode][n].toFixed(0)} ms`);
      if (n === big) {
        const ch = state(n, true, false);
        res.change[mode] = await timed(() => dp.sync(ch));
        log(`${mode} change at ${n}: ${res.change[mode].toFixed(1)} ms`);
        res.latency[mode].big = latency(t);
      }
      if (n === Math.min(...SIZES)) {
        const one = await dataplane(mode, t.node);
        await one.sync(state(1));
        res.latency[mode]['0'] = latency(t);
      }
      (dp as { close?: () => void }).close?.();
    } finally {
      t.stop();
    }
  }
}

/** The kernel clients against the tools, 1k ClusterIP Services x 5 endpoints. */
async function measureClients(res: Results): Promise<void> {
  const t = topology();
  const ns = t.node;
  const N = 1000;
  const SAMPLE = 20;
  const vs = (i: number): VirtualServer => ({
    family: 'IPv4',
    protocol: 'TCP',
    address: `10.96.${(i >> 8) & 255}.${i & 255}`,
    port: 80,
    scheduler: 'rr',
    flags: 0,
    timeout: 0,
  });
  const rs = (i: number, e: number) => ({
    address: `10.${100 + e}.${(i >> 8) & 255}.${i & 255}`,
    port: 8080,
    weight: 1,
  });
  try {
    const k = await IpvsKernel.open(ns);
    const ops: IpvsOp[] = [];
    for (let i = 0; i < N; i++) {
      ops.push({ op: 'add-service' as const, vs: vs(i) });
      for (let e = 0; e < 5; e++) ops.push({ op: 'add-dest' as const, vs: vs(i), rs: rs(i, e) });
    }
    res.clients['ipvs: generic netlink'] = await timed(async () => k.apply(ops));
    k.apply(k.listServices().map((v) => ({ op: 'del-service' as const, vs: v })));
    const rules: string[] = [];
    for (let i = 0; i < N; i++) {
      rules.push(`-A -t ${vs(i).address}:80 -s rr`);
      for (let e = 0; e < 5; e++) rules.push(`-a -t ${vs(i).address}:80 -r ${rs(i, e).address}:8080 -m -w 1`);
    }
    res.clients['ipvs: ipvsadm -R'] = await timed(async () =>
      execFileSync('ip', ['netns', 'exec', ns, 'ipvsadm', '-R'], { input: `${rules.join('\n')}\n` }),
    );
    execFileSync('ip', ['netns', 'exec', ns, 'ipvsadm', '-C']);
    res.clients['ipvs: one ipvsadm per change'] =
      ((await timed(async () => {
        for (const r of rules.slice(0, SAMPLE * 6))
          execFileSync('ip', ['netns', 'exec', ns, 'ipvsadm', ...r.split(' ')]);
      })) *
        N) /
      SAMPLE;
    k.close();

    const rt = await Rtnl.open(ns);
    const idx = rt.ensureDummy('kube-ipvs0');
    const addrs = Array.from({ length: N }, (_, i) => vs(i).address);
    res.clients['addresses: rtnetlink'] = await timed(async () => rt.changeAddresses(idx, true, addrs));
    rt.changeAddresses(idx, false, addrs);
    res.clients['addresses: ip -batch'] = await timed(async () =>
      execFileSync('ip', ['-n', ns, '-batch', '-'], {
        input: addrs.map((a) => `addr add ${a}/32 dev kube-ipvs0`).join('\n') + '\n',
      }),
    );
    rt.changeAddresses(idx, false, addrs);
    res.clients['addresses: one ip addr add each'] =
      ((await timed(async () => {
        for (const a of addrs.slice(0, SAMPLE))
          execFileSync('ip', ['-n', ns, 'addr', 'add', `${a}/32`, 'dev', 'kube-ipvs0']);
      })) *
        N) /
      SAMPLE;
    rt.close();

    const ipset = new IpsetTool(netnsRunner(ns));
    const create = 'create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 -exist\n';
    await ipset.restore(create);
    const members = addrs.map((a) => `${a},tcp:80`);
    res.clients['ipset: restore'] = await timed(() =>
      ipset.restore(members.map((m) => `add KUBE-CLUSTER-IP ${m} -exist`).join('\n') + '\n'),
    );
    await ipset.restore('flush KUBE-CLUSTER-IP\n');
    res.clients['ipset: one ipset add each'] =
      ((await timed(async () => {
        for (const m of members.slice(0, SAMPLE))
          execFileSync('ip', ['netns', 'exec', ns, 'ipset', 'add', 'KUBE-CLUSTER-IP', m]);
      })) *
        N) /
      SAMPLE;
  } finally {
    t.stop();
  }
}

function log(s: string): void {
  process.stderr.write(`${s}\n`);
}

async function measure(): Promise<void> {
  const empty = () => ({}) as Record<number, number>;
  const lat = () => ({ '0': { p50: 0, p99: 0 }, big: { p50: 0, p99: 0 } });
  const res: Results = {
    sizes: SIZES,
    cold: { ipvs: empty(), iptables: empty(), nftables: empty() },
    change: { ipvs: 0, iptables: 0, nftables: 0 },
    latency: { ipvs: lat(), iptables: lat(), nftables: lat() },
    clients: {},
    guest: {
      kernel: execFileSync('uname', ['-r'], { encoding: 'utf8' }).trim(),
      cpus: Number(execFileSync('nproc', { encoding: 'utf8' })),
    },
  };
  await measureClients(res);
  for (const m of MODES) await measureMode(m, res);
  const out = process.env['KPT_GUEST_OUT'] ?? '.';
  writeFileSync(join(out, 'ipvs-bench.json'), JSON.stringify(res, null, 2));
}

const r2 = (x: number) => (x >= 100 ? x.toFixed(0) : x.toFixed(2));

function report(res: Results): void {
  const big = Math.max(...res.sizes);
  const lines: string[] = [];
  lines.push(
    `IPVS mode in the QEMU guest (kernel ${res.guest.kernel}, ${res.guest.cpus} vCPUs, TCG); times in ms, ratio = ipvs / other`,
  );
  lines.push('');
  lines.push('| measure | ipvs | iptables | nftables | ipvs/iptables | ipvs/nftables |');
  lines.push('|---|---|---|---|---|---|');
  const row = (name: string, v: Record<Mode, number>) =>
    lines.push(
      `| ${name} | ${r2(v.ipvs)} | ${r2(v.iptables)} | ${r2(v.nftables)} | ${(v.ipvs / v.iptables).toFixed(2)} | ${(v.ipvs / v.nftables).toFixed(2)} |`,
    );
  for (const n of res.sizes)
    row(`cold sync, ${n} Services x 5 endpoints`, {
      ipvs: res.cold.ipvs[n]!,
      iptables: res.cold.iptables[n]!,
      nftables: res.cold.nftables[n]!,
    });
  row(`one-endpoint change at ${big}`, res.change);
  for (const k of ['0', 'big'] as const)
    for (const p of ['p50', 'p99'] as const)
      row(`connect latency ${p}, ${k === '0' ? 1 : big} Services`, {
        ipvs: res.latency.ipvs[k][p],
        iptables: res.latency.iptables[k][p],
        nftables: res.latency.nftables[k][p],
      });
  lines.push('');
  lines.push('| kernel client at 1k Services (5 endpoints each) | ms |');
  lines.push('|---|---|');
  for (const [k, v] of Object.entries(res.clients)) lines.push(`| ${k} | ${r2(v)} |`);
  console.log(lines.join('\n'));
  const outDir = join(REPO, 'bench', 'out');
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'ipvs-sync.json'), JSON.stringify(res, null, 2));
  const png = writeChart(join(outDir, 'ipvs-sync'), {
    title: 'IPVS vs iptables vs nftables in the same guest (lower is better)',
    yLabel: 'ms (log)',
    series: [...MODES],
    log: true,
    groups: [
      ...res.sizes.map((n) => ({ label: `cold ${n / 1000}k`, values: MODES.map((m) => res.cold[m][n] ?? null) })),
      { label: `change @${big / 1000}k`, values: MODES.map((m) => res.change[m]) },
      { label: 'p50 1 svc', values: MODES.map((m) => res.latency[m]['0'].p50) },
      { label: `p50 ${big / 1000}k`, values: MODES.map((m) => res.latency[m].big.p50) },
      { label: 'p99 1 svc', values: MODES.map((m) => res.latency[m]['0'].p99) },
      { label: `p99 ${big / 1000}k`, values: MODES.map((m) => res.latency[m].big.p99) },
    ],
  });
  console.log(`\nwrote ${join(outDir, 'ipvs-sync.json')}${png ? ` and ${png}` : ''}`);
}

if (process.argv.includes('--measure')) {
  await measure();
} else if (process.argv.includes('--report')) {
  report(JSON.parse(readFileSync(arg('report')!, 'utf8')) as Results);
} else {
  // On the host: measure in the guest, report here.
  const self = join(REPO, 'dist', 'bench', 'ipvs-sync.js');
  const g = spawnSync(
    join(REPO, 'scripts', 'guest'),
    [
      '--timeout',
      '3600',
      '--',
      process.execPath,
      self,
      '--measure',
      '--sizes',
      SIZES.join(','),
      '--connections',
      String(CONNECTIONS),
    ],
    { stdio: ['ignore', 'inherit', 'pipe'], encoding: 'utf8' },
  );
  process.stderr.write(g.stderr);
  const dir = /logs in (\S+)/.exec(g.stderr)?.[1];
  if (g.status !== 0 || !dir) process.exit(g.status ?? 1);
  report(JSON.parse(readFileSync(join(dir, 'ipvs-bench.json'), 'utf8')) as Results);
}
