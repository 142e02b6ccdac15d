// Pieces several mode drivers share.
import { access } from 'node:fs/promises';
import { ProxyError } from '../../core/errors.js';
import type { IPFamily } from '../../core/types.js';
import type { TracePacket } from '../../dataplane/trace.js';
import { hostRunner } from '../../platform/exec.js';
import type { StatusDoc } from '../../engine/statusview.js';
import type { StatusAnswer } from '../explaindump.js';
import type { ServiceAddress, ServiceSource } from '../explainservice.js';
import type { Explanation } from '../explainview.js';
import type { DumpContext, LiveContext } from './driver.js';

/** A ruleset that names its Services (iptables, nftables) as explain's source. */
export function rulesSource<F>(
  mode: Explanation['mode'],
  fake: F,
  addresses: (fake: F, service: string) => ServiceAddress[],
  trace: (fake: F, packet: TracePacket, localIPs: readonly string[]) => Explanation,
): ServiceSource {
  return {
    mode,
    addresses: (service) => addresses(fake, service),
    trace: (packet, localIPs) => trace(fake, packet, localIPs),
  };
}

/**
 * For modes whose kernel state names no Service (ipvs, userspace): the
 * running proxy's status says which addresses a Service has. Without it,
 * `--service` cannot be answered; a single packet can still be traced.
 */
export async function statusAddressesFor(
  mode: string,
  ctx: LiveContext,
): Promise<{ answer: StatusAnswer; addresses: (service: string, family: IPFamily) => ServiceAddress[] }> {
  const answer = await ctx.status();
  if (answer.doc === null && ctx.service !== null)
    throw new ProxyError(
      'KPT_NOT_FOUND',
      `${ctx.family}: ${mode} mode's kernel state names no Service, and the proxy that knows ${ctx.service}'s addresses could not be asked: ${answer.error ?? 'no status'}`,
    );
  return { answer, addresses: await addressesFrom(answer.doc) };
}

/** The same for a saved state: the status saved with it (--status FILE) names the addresses. */
export async function dumpStatusAddresses(
  d: DumpContext,
  noStatus: string,
): Promise<{ addresses: (service: string, family: IPFamily) => ServiceAddress[] }> {
  const doc = d.status?.doc ?? null;
  if (doc === null && d.service !== null)
    throw new ProxyError('KPT_INPUT_INVALID', `${d.file}: ${d.status?.error ?? noStatus}`);
  return { addresses: await addressesFrom(doc) };
}

async function addressesFrom(doc: StatusDoc | null): Promise<(service: string, family: IPFamily) => ServiceAddress[]> {
  const { statusAddresses } = await import('../explainservice.js');
  return (service, family) => (doc === null ? [] : statusAddresses(doc, service, family));
}

async function works(cmd: string, args: string[]): Promise<boolean> {
  try {
    await hostRunner(cmd, args);
    return true;
  } catch {
    return false;
  }
}

/** The iptables-based modes proxy a family where its iptables binary works. */
export const familyHasIptables = (family: IPFamily): Promise<boolean> =>
  works(family === 'IPv6' ? 'ip6tables' : 'iptables', ['-w', '-t', 'nat', '-S', 'POSTROUTING']);

/** The other modes need only the kernel's support for the family. */
export const familyInKernel = (family: IPFamily): Promise<boolean> =>
  access('/proc/net/if_inet6').then(
    () => true,
    () => family === 'IPv4',
  );

/** iptables mode's own chains (KUBE-NODEPORTS, KUBE-SVC-*...) exist in either family. */
export async function iptablesModeLeftovers(): Promise<boolean> {
  const [{ Iptables }, { iptablesModeChains }] = await Promise.all([
    import('../../platform/iptables/iptables.js'),
    import('../../platform/iptables/cleanup.js'),
  ]);
  for (const family of ['IPv4', 'IPv6'] as const satisfies readonly IPFamily[]) {
    try {
      const save = await new Iptables(family, hostRunner).save('nat');
      if (iptablesModeChains(save)) return true;
    } catch {
      // no ip6tables: nothing of that family
    }
  }
  return false;
}
