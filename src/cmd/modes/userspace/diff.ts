// userspace side of `diff`. The mode's live state is in two places:
//   - the kernel: the `kube-proxy-userspace` table (nft list table) and the
//     sockets listening on the ports it redirects to (ss);
//   - the running proxy: which endpoints each listener relays to, asked
//     through its status document on the metrics address, as `explain` does.
// What a sync would write: the real UserspacePlanner (the driver under the one
// reconciler) plans, as a fresh proxy's first sync does, every listener to open
// and the whole table, with each listener on the port it is listening on now
// (a listener keeps its port across syncs) or, when it is not listening, on a
// new port, shown as "<new port>". The table is compared line by line
// (chains, rules, map elements) and the listeners port by port with their
// endpoints. Without an answer from the proxy, endpoints are left out of the
// comparison and the summary says why. Only reads reach the kernel.
import type { DataplaneConfig, IPFamily, SyncState } from '../../../core/types.js';
import { Fake } from '../../../dataplane/nftables/fake.js';
import { nftFamily, type NftFamily } from '../../../dataplane/nftables/names.js';
import { NODEPORT_PORTALS, SERVICE_PORTALS, TABLE_NAME, type PortalValue } from '../../../dataplane/userspace/index.js';
import type { ListenerWork } from '../../../dataplane/userspace/driver.js';
import type { StatusDoc } from '../../../engine/statusview.js';
import type { CommandRunner } from '../../../platform/exec.js';
import { UserspacePlanner } from '../../../platform/userspace/planner.js';
import type { FamilyDiff } from '../driver.js';
import { setDiff } from '../ipvs/diff.js';
import { listenersFrom, userspaceTableFromListing } from './explain.js';

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

/** The live table loaded into an nftables Fake of it (empty when the table does not exist). */
async function liveTable(run: CommandRunner, fam: NftFamily): Promise<Fake> {
  const empty = new Fake(fam, TABLE_NAME);
  const tables = (await run('nft', ['list', 'tables', fam])).stdout;
  if (!tables.split('\n').some((l) => l.trim() === `table ${fam} ${TABLE_NAME}`)) return empty;
  return userspaceTableFromListing((await run('nft', ['list', 'table', fam, TABLE_NAME])).stdout, fam) ?? empty;
}

/**
 * The port each planned listener would be on: the one the live table sends
 * one of its portals to, if something listens there; else a placeholder
 * (returned in `fresh`, never a port a live listener uses).
 */
function plannedPorts(
  work: ListenerWork,
  live: Fake,
  listening: ReadonlySet<string>,
): { ports: Map<string, number>; fresh: Set<number> } {
  const ports = new Map<string, number>();
  // A portal's key is its element's key text (`ip . proto . port`, or `proto . nodePort`), as nft lists it.
  for (const op of work.portals) {
    if (op.op !== 'put') continue;
    const { target } = op.value as PortalValue;
    if (target.kind !== 'listener' || ports.has(target.listener)) continue;
    const fields = op.key.split(' . ');
    const nodePort = fields.length === 2;
    const value = live.sets.get(nodePort ? NODEPORT_PORTALS : SERVICE_PORTALS)?.elements.get(op.key)?.value?.[0];
    if (value !== undefined && listening.has(`${fields[nodePort ? 0 : 1]}/${value}`))
      ports.set(target.listener, Number(value));
  }
  const taken = new Set(ports.values());
  const fresh = new Set<number>();
  let next = 1;
  for (const { key } of work.open) {
    if (ports.has(key)) continue;
    while (taken.has(next) || listening.has(`tcp/${next}`) || listening.has(`udp/${next}`)) next++;
    ports.set(key, next);
    fresh.add(next++);
  }
  return { ports, fresh };
}

/**
 * The table's lines: each chain with its hook, then its rules, each set or
 * map with its type, then its elements, every rule and element prefixed with
 * its chain or map, so that lines compare one by one; placeholder ports are
 * named.
 */
function tableLines(t: Fake, fresh: ReadonlySet<number>): string[] {
  const out: string[] = [];
  const byName = <T>(m: ReadonlyMap<string, T>) => [...m].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [name, { chain: c, rules }] of byName(t.chains)) {
    out.push(
      `chain ${name}${c.type !== undefined ? ` { type ${c.type} hook ${c.hook} priority ${c.priority ?? 0} }` : ''}`,
    );
    out.push(...rules.map((r) => `${name}: ${r.rule}`));
  }
  for (const [name, { def, elements }] of byName(t.sets)) {
    out.push(`${def.kind} ${name} { ${def.type} }`);
    const portals = name === SERVICE_PORTALS || name === NODEPORT_PORTALS;
    const lines = [...elements.values()].map((e) => {
      const key = e.key.join(' . ');
      const value = e.value?.join(' . ');
      if (value === undefined) return key;
      return `${key} : ${portals && fresh.has(Number(value)) ? NEW_PORT : value}`;
    });
    out.push(...lines.sort().map((l) => `${name}: ${l}`));
  }
  return out;
}

export async function diffUserspaceFamily(i: UserspaceFamilyInput): Promise<FamilyDiff> {
  const fam = nftFamily(i.family);
  const before = await liveTable(i.run, fam);
  const listening = await listeningPorts(i.run);
  const planner = new UserspacePlanner(i.config);
  // A planner of its own needs the live state: it plans the whole table, and every listener as one to open.
  const plan = planner.plan(i.state, () => [], false);
  const { ports, fresh } = plannedPorts(plan.work, before, listening);
  const after = new Fake(fam, TABLE_NAME);
  after.run(planner.transaction(plan, (k) => ports.get(k)).tx);

  // Listeners: the live ones are the ports the table redirects to that something listens on.
  const withEndpoints = i.status !== null;
  const listenerLine = (proto: string, port: string, endpoints: readonly string[]) =>
    `${proto} :${port}${withEndpoints ? ` -> ${[...endpoints].sort().join(', ') || '(none)'}` : ''}`;
  const liveListeners = [...listenersFrom(before, i.status, i.family).values()]
    .filter((l) => listening.has(`${l.protocol.toLowerCase()}/${l.port}`))
    .map((l) => listenerLine(l.protocol.toLowerCase(), String(l.port), l.endpoints));
  // A listener to be opened has no port yet: it is named by its Service port and endpoint set instead.
  const planned = plan.work.open.map((l) => {
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
