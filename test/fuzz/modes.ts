// Every mode's renderer, driven the way its platform dataplane drives it, for
// the fuzz tests: `start(family).sync(state)` renders each synced state into
// a Fake kept across syncs (partial renders included), and renderFlows()
// renders the final states afresh and traces the valid flows through each
// mode's Fake.
import type { Scenario } from '../cases/packetflow.js';
import { scenarioConfig } from '../cases/resolve.js';
import { LOCAL_IPS_V4, LOCAL_IPS_V6 } from '../cases/fixtures.js';
import type { IPFamily, ProxyMode, SyncState } from '../../src/core/types.js';
import type { TracePacket } from '../../src/dataplane/trace.js';
import * as ipt from '../../src/dataplane/iptables/index.js';
import { IptablesPlanner } from '../../src/platform/iptables/planner.js';
import * as nft from '../../src/dataplane/nftables/index.js';
import { NftablesPlanner } from '../../src/platform/nftables/planner.js';
import * as ipvs from '../../src/dataplane/ipvs/index.js';
import * as ebpf from '../../src/dataplane/ebpf/index.js';
import * as us from '../../src/dataplane/userspace/index.js';
import { EbpfPlanner } from '../../src/platform/ebpf/planner.js';
import { UserspacePlanner } from '../../src/platform/userspace/planner.js';
import { syncFake } from '../dataplane/userspace-fixtures.js';
import { VALID_FLOWS } from './hostile.js';
import { IpvsFakeLoader, loadState } from '../support/ipvsload.js';

export interface ModeRender {
  sync(state: SyncState): void;
}

interface Mode {
  readonly name: string;
  start(family: IPFamily): ModeRender;
  /** A fresh full render of `state`, traced: output plus " masq" when masqueraded. */
  tracer(state: SyncState): (p: TracePacket) => string;
}

const localIPs = (f: IPFamily) => (f === 'IPv4' ? LOCAL_IPS_V4 : LOCAL_IPS_V6);
const config = (family: IPFamily, mode: ProxyMode) =>
  scenarioConfig({ name: 'fuzz', family, setup: { services: [], slices: [] } } as unknown as Scenario, mode);
const full = (s: SyncState): SyncState => ({ ...s, fullSync: true });
const shown = (r: { output: string; masq: boolean }) => `${r.output}${r.masq ? ' masq' : ''}`;

function loadIptables(fake: ipt.Fake, render: ipt.IptablesRender): void {
  fake.restore(render.restoreText, { noflush: true });
  for (const j of ipt.IPTABLES_JUMP_CHAINS) {
    if (j.onlyIfChainRendered && !render.filterChains.includes(j.to)) continue;
    fake.ensureRule('prepend', j.table, j.from, ipt.jumpRuleArgs(j));
  }
}

const iptables: Mode = {
  name: 'iptables',
  start(family) {
    const planner = new IptablesPlanner();
    const fake = new ipt.Fake();
    return {
      sync(state) {
        const r = planner.plan(
          { state, config: config(family, 'iptables'), options: ipt.DEFAULT_IPTABLES_OPTIONS },
          state.fullSync,
          ipt.chainsFromSave(fake.save('nat'), 'nat'),
        );
        loadIptables(fake, r);
      },
    };
  },
  tracer(state) {
    const fake = new ipt.Fake();
    loadIptables(
      fake,
      new IptablesPlanner().plan(
        { state: full(state), config: config(state.family, 'iptables'), options: ipt.DEFAULT_IPTABLES_OPTIONS },
        true,
        [],
      ),
    );
    return (p) => shown(ipt.trace(fake, p, localIPs(state.family)));
  },
};

function nftables(layout: nft.EndpointLayout): Mode {
  return {
    name: `nftables (${layout})`,
    start(family) {
      const planner = new NftablesPlanner(config(family, 'nftables'), layout);
      const fake = new nft.Fake(nft.nftFamily(family));
      return {
        sync(state) {
          const snapshot = planner.needsFullSync(state) ? fake.snapshot() : null;
          fake.run(planner.plan(state, 0, snapshot).tx);
        },
      };
    },
    tracer(state) {
      const fake = new nft.Fake(nft.nftFamily(state.family));
      fake.run(new NftablesPlanner(config(state.family, 'nftables'), layout).plan(full(state), 0, null).tx);
      return (p) => shown(nft.trace(fake, p, localIPs(state.family)));
    },
  };
}

const ipvsMode: Mode = {
  name: 'ipvs',
  start(family) {
    const loader = new IpvsFakeLoader(
      new ipvs.Fake({ nodeAddresses: [...LOCAL_IPS_V4, ...LOCAL_IPS_V6] }),
      config(family, 'ipvs'),
    );
    return {
      sync(state) {
        loader.sync(state);
      },
    };
  },
  tracer(state) {
    const fake = new ipvs.Fake({ nodeAddresses: [...LOCAL_IPS_V4, ...LOCAL_IPS_V6] });
    loadState(fake, full(state), config(state.family, 'ipvs'));
    return (p) => shown(ipvs.trace(fake, p, localIPs(state.family)));
  },
};

const ebpfMode: Mode = {
  name: 'ebpf',
  start(family) {
    const planner = new EbpfPlanner(config(family, 'ebpf'));
    const fake = new ebpf.Fake();
    return {
      sync(state) {
        fake.apply(planner.plan({ state }).ops);
      },
    };
  },
  tracer(state) {
    const fake = new ebpf.Fake();
    fake.apply(new EbpfPlanner(config(state.family, 'ebpf')).plan({ state: full(state) }).ops);
    return (p) => shown(ebpf.trace(fake, p, localIPs(state.family)));
  },
};

function loadUserspace(state: SyncState): us.Fake {
  const plan = us.planUserspace(state);
  const fake = new us.Fake(state.family === 'IPv4' ? 'ip' : 'ip6');
  const ports = new Map([...plan.listeners.values()].map((spec) => [spec.key, fake.listen(spec)]));
  fake.run(us.renderRules(plan, ports, config(state.family, 'userspace')));
  return fake;
}

const userspace: Mode = {
  name: 'userspace',
  start(family) {
    const planner = new UserspacePlanner(config(family, 'userspace'));
    const fake = new us.Fake(family === 'IPv4' ? 'ip' : 'ip6');
    return { sync: (state) => void syncFake(planner, fake, state) };
  },
  tracer(state) {
    const fake = loadUserspace(full(state));
    return (p) => shown(us.trace(fake, p, localIPs(state.family)));
  },
};

export const MODES: readonly Mode[] = [iptables, ...nft.ENDPOINT_LAYOUTS.map(nftables), ipvsMode, ebpfMode, userspace];

/** "<mode> <flow>" -> what each valid flow gets in each mode, from the final state of each family. */
export function renderFlows(states: readonly SyncState[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of MODES) {
    for (const st of states) {
      const t = m.tracer(st);
      for (const f of VALID_FLOWS.filter((x) => x.family === st.family))
        out.set(`${m.name} ${f.name}`, t({ src: f.src, dst: f.dst, port: f.port, protocol: f.protocol }));
    }
  }
  return out;
}
