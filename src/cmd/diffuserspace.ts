// userspace side of `diff`. The mode's live state is in two places:
//   - the kernel: the `kube-proxy-userspace` table (nft list table) and the
//     sockets listening on the ports it redirects to (ss);
//   - the running proxy: which endpoints each listener relays to, asked
//     through its status document on the metrics address, as `explain` does.
// What a sync would write: the real UserspaceRenderer plans the listeners and
// renders the table, with each listener on the port it is listening on now
// (a listener keeps its port across syncs) or, when it is not listening, on a
// new port, shown as "<new port>". The table is compared line by line
// (chains, rules, map elements) and the listeners port by port with their
// endpoints. Without an answer from the proxy, endpoints are left out of the
// comparison and the summary says why. Only reads reach the kernel.
import type { DataplaneConfig, IPFamily, SyncState } from '../core/types.js';
import { Fake, TABLE_NAME, UserspaceRenderer, type UserspacePlan } from '../dataplane/userspace/index.js';
import type { StatusDoc } from '../engine/statusview.js';
import type { CommandRunner } from '../platform/exec.js';
import type { FamilyDiff } from './diffipt.js';
import { setDiff } from './diffipvs.js';
import { listenersFrom, userspaceScriptFromListing, userspaceTableBlock } from './explainuserspace.js';

export interface UserspaceFamilyInput {
  readonly run: CommandRunner;
  readonly family: IPFamily;
  readonly config: DataplaneConfig;
  readonly state: SyncState;
  /** The proxy's status document, or null with the reason it could not be had. */
  readonly status: StatusDoc | null;
  readonly statusError: string | null;
}

const NEW_PORT = '<new port>';

/** "tcp/40001" of every socket listening in the runner's namespace. */
export async function listeningPorts(run: CommandRunner): Promise<Set<string>> {
  const out = new Set<string>();
  for (const proto of ['tcp', 'udp'] as const) {
    const r = await run('ss', ['-Hln', proto === 'tcp' ? '-t' : '-u']);
    for (const line of r.stdout.split('\n')) {
      // State Recv-Q Send-Q Local:Port Peer:Port: the port ends the fourth column.
      const m = /:(\d+)$/.exec(line.trim().split(/\s+/)[3] ?? '');
      if (m) out.add(`${proto}/${m[1]}`);
    }
  }
  return out;
}

/** The live table loaded into the userspace Fake (empty when the table does not exist). */
async function liveTable(run: CommandRunner, fam: 'ip' | 'ip6'): Promise<Fake> {
  const fake = new Fake(fam);
  const tables = (await run('nft', ['list', 'tables', fam])).stdout;
  if (!tables.split('\n').some((l) => l.trim() === `table ${fam} ${TABLE_NAME}`)) return fake;
  const block = userspaceTableBlock((await run('nft', ['list', 'table', fam, TABLE_NAME])).stdout, fam);
  if (block !== null) fake.run(userspaceScriptFromListing(block, fam));
  return fake;
}

/**
 * The port each planned listener would be on: the one the live table sends
 * one of its portals to, if something listens there; else a placeholder
 * (returned in `fresh`, never a port a live listener uses).
 */
function plannedPorts(
  plan: UserspacePlan,
  live: Fake,
  listening: ReadonlySet<string>,
): { ports: Map<string, number>; fresh: Set<number> } {
  const liveValue = (map: string, key: string) => live.maps.get(map)?.elements.get(key);
  const ports = new Map<string, number>();
  for (const p of plan.portals) {
    const proto = p.protocol.toLowerCase();
    const claims: Array<[string | undefined, string]> = [
      [liveValue('service-portals', `${p.clusterIP} . ${proto} . ${p.port}`), 'internal'],
      ...p.externalIPs.map((ip): [string | undefined, string] => [
        liveValue('service-portals', `${ip} . ${proto} . ${p.port}`),
        'external',
      ]),
      [p.nodePort > 0 ? liveValue('nodeport-portals', `${proto} . ${p.nodePort}`) : undefined, 'external'],
    ];
    for (const [value, which] of claims) {
      const target = which === 'internal' ? p.internal : p.external;
      if (value === undefined || target?.kind !== 'listener' || ports.has(target.listener)) continue;
      if (listening.has(`${proto}/${value}`)) ports.set(target.listener, Number(value));
    }
  }
  const taken = new Set(ports.values());
  const fresh = new Set<number>();
  let next = 1;
  for (const key of plan.listeners.keys()) {
    if (ports.has(key)) continue;
    while (taken.has(next) || listening.has(`tcp/${next}`) || listening.has(`udp/${next}`)) next++;
    ports.set(key, next);
    fresh.add(next++);
  }
  return { ports, fresh };
}

/**
 * The table's lines (Fake.dump without the listener table), each rule and
 * element prefixed with its chain or map, so that lines compare one by one;
 * placeholder ports are named.
 */
function tableLines(f: Fake, fresh: ReadonlySet<number>): string[] {
  const out: string[] = [];
  let owner = '';
  let portals = false;
  for (const l of f.dump().split('\n')) {
    if (l === '' || l.startsWith('listener ')) continue;
    if (!l.startsWith('  ')) {
      out.push(l);
      owner = l.split(' ')[1]!;
      portals = /^map (service|nodeport)-portals /.test(l);
      continue;
    }
    const m = portals ? /^(.*) : (\d+)$/.exec(l.trim()) : null;
    out.push(`${owner}: ${m && fresh.has(Number(m[2])) ? `${m[1]} : ${NEW_PORT}` : l.trim()}`);
  }
  return out;
}

export async function diffUserspaceFamily(i: UserspaceFamilyInput): Promise<FamilyDiff> {
  const fam = i.family === 'IPv4' ? 'ip' : 'ip6';
  const before = await liveTable(i.run, fam);
  const listening = await listeningPorts(i.run);
  const renderer = new UserspaceRenderer(i.config);
  const plan = renderer.plan(i.state);
  const { ports, fresh } = plannedPorts(plan, before, listening);
  const after = new Fake(fam);
  after.run(renderer.render(plan, ports));

  // Listeners: the live ones are the ports the table redirects to that something listens on.
  const withEndpoints = i.status !== null;
  const listenerLine = (proto: string, port: string, endpoints: readonly string[]) =>
    `${proto} :${port}${withEndpoints ? ` -> ${[...endpoints].sort().join(', ') || '(none)'}` : ''}`;
  const liveListeners = [...listenersFrom(before, i.status, i.family).values()]
    .filter((l) => listening.has(`${l.protocol.toLowerCase()}/${l.port}`))
    .map((l) => listenerLine(l.protocol.toLowerCase(), String(l.port), l.endpoints));
  // A listener to be opened has no port yet: it is named by its Service port and endpoint set instead.
  const planned = [...plan.listeners.values()].map((l) => {
    const port = ports.get(l.key)!;
    const endpoints = l.endpoints.map((e) => e.key);
    const proto = l.protocol.toLowerCase();
    if (!fresh.has(port)) return listenerLine(proto, String(port), endpoints);
    return `${proto} :${NEW_PORT} ${l.servicePortKey} (${l.set} endpoints) -> ${endpoints.join(', ') || '(none)'}`;
  });
  const parts: Array<[string, string[]]> = [
    [`nft list table ${fam} ${TABLE_NAME}`, setDiff(tableLines(before, new Set()), tableLines(after, fresh))],
    ['listeners', setDiff([...new Set(liveListeners)].sort(), [...new Set(planned)].sort())],
  ];
  let text = '';
  let changes = 0;
  for (const [title, d] of parts) {
    changes += d.length;
    if (d.length) text += `## ${title}\n${d.join('\n')}\n`;
  }
  const blind = withEndpoints ? '' : ` (listener endpoints not compared: ${i.statusError ?? 'no status'})`;
  const summary =
    changes === 0
      ? `no changes${blind}`
      : `${changes} change(s): table lines and listeners as listed; ${fresh.size} listener(s) to open${blind}`;
  return { family: i.family, changes, summary, text };
}
