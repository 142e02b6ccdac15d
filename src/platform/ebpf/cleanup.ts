// `--cleanup` (and start-up of the other modes): take every trace of the
// ebpf mode out of the kernel, working from what is pinned and attached, so
// it needs neither the BPF object nor a loaded program. Other tools' tc
// filters and programs are left alone: tcx links are ours only when pinned
// under our root, and a cls_bpf filter is ours only at our priority and
// handle with a program named kpt_*.
import { existsSync } from 'node:fs';
import { deleteMasqueradeTable, MASQ_TABLE } from '../../dataplane/ebpf/masq.js';
import { nftFamily } from '../../dataplane/nftables/names.js';
import { hasTable, nftRunner } from '../nftables/leftovers.js';
import { run } from '../exec.js';
import { TcAttacher, DIRECTIONS, removeOurTcFilter } from './attach.js';
import { detachCgroup } from './cgroup.js';
import { XdpAttacher } from './xdpattach.js';
import { listIfaces, openIfaceSource } from './ifaces.js';
import { isBpffs, PinDir } from './pins.js';
import { libbpfAvailable } from './libbpf.js';
import { DEFAULT_PIN_ROOT } from './pins.js';

export interface EbpfCleanupResult {
  readonly removed: string[];
}

export async function cleanupEbpf(pinRoot: string): Promise<EbpfCleanupResult> {
  const removed: string[] = [];
  await openIfaceSource();
  const ifaces = listIfaces();
  if (existsSync(pinRoot) && isBpffs(pinRoot)) {
    const pins = new PinDir(pinRoot);
    removed.push(...new TcAttacher(pins, 'tcx').detachAll([]), ...XdpAttacher.detachAll(pins), ...detachCgroup(pins));
    pins.removeAll();
    removed.push(pinRoot);
  }
  // Without libbpf nothing of ours can have been attached here.
  if (!libbpfAvailable()) return { removed };
  for (const i of ifaces)
    for (const dir of DIRECTIONS) if (removeOurTcFilter(i.index, dir)) removed.push(`${i.name}/${dir}`);
  return { removed };
}

/**
 * The masquerade table of versions before masquerade moved into the programs, if this family has one (asked
 * first: a write where nothing is ours would be a commit the running mode's drift watch sees). Connections it
 * masqueraded keep their translation: netfilter keeps it in their conntrack entries.
 */
export async function removeOldMasqueradeTable(family: 'IPv4' | 'IPv6'): Promise<boolean> {
  // No nft on this host means no table of ours either.
  const ours = await hasTable(nftRunner(), nftFamily(family), MASQ_TABLE).catch(() => false);
  if (ours) await run('nft', ['-f', '-'], { input: deleteMasqueradeTable(family).toString(), allowFailure: true });
  return ours;
}

/** --cleanup and other modes' start: our programs, pins and the masquerade tables of older versions. */
export async function cleanupEbpfMode(pinRoot: string = DEFAULT_PIN_ROOT): Promise<string[]> {
  const r = await cleanupEbpf(pinRoot);
  for (const f of ['IPv4', 'IPv6'] as const) await removeOldMasqueradeTable(f);
  return r.removed;
}
