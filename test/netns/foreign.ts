// Foreign state: what other actors own in a namespace, which the proxy must
// never change. plantForeignState() gives a node what a real one has beside
// kube-proxy (a firewall's iptables chains and jumps in every table, an
// nftables table with a set, an ipset, an interface with an address and a
// route); dumpForeignState() prints everything in a namespace that is NOT the
// proxy's, in a stable form, so a test can compare a dump from before a fault
// with one from after the repair and require them to be identical.
//
// Ours (left out of the dumps): iptables chains named KUBE-* and rules that
// mention them; nftables tables `kube-proxy` and `kube-proxy-userspace`; ipsets
// named KUBE-*; the interface kube-ipvs0 and its addresses and routes. Empty
// built-in iptables chains with policy ACCEPT are also left out: iptables-nft
// creates them with their table, so they come and go with our chains and mean
// nothing. Counters are dropped.
import { nsRun } from './spawn.js';

/** Interfaces the proxy may create (IPVS mode's dummy device). */
export const OUR_INTERFACES = ['kube-ipvs0'];
// kube-proxy-ts-localhost: nftables mode's loopback NodePort reject table (src/dataplane/nftables/localhost.ts).
const OUR_NFT_TABLES = ['kube-proxy', 'kube-proxy-userspace', 'kube-proxy-ts-localhost'];
const IPTABLES_NFT_TABLES = ['filter', 'nat', 'mangle', 'raw', 'security'];

const PLANT = String.raw`
set -e
for ipt in iptables ip6tables; do
  if [ "$ipt" = iptables ]; then net=203.0.113.0/24; else net=2001:db8:113::/64; fi
  $ipt -t nat -N FOREIGN-NAT
  $ipt -t nat -A FOREIGN-NAT -d "$net" -p tcp --dport 9 -j RETURN
  $ipt -t nat -A PREROUTING -j FOREIGN-NAT
  $ipt -t nat -A POSTROUTING -s "$net" -j RETURN
  $ipt -t filter -N FOREIGN-FW
  $ipt -t filter -A FOREIGN-FW -s "$net" -p tcp --dport 22 -j DROP
  $ipt -t filter -A INPUT -j FOREIGN-FW
  $ipt -t filter -A FORWARD -s "$net" -j DROP
  $ipt -t mangle -N FOREIGN-MANGLE
  $ipt -t mangle -A FOREIGN-MANGLE -d "$net" -j RETURN
  $ipt -t mangle -A PREROUTING -j FOREIGN-MANGLE
  $ipt -t raw -A PREROUTING -d "$net" -j RETURN
done
nft -f - <<'EOF'
table inet foreign {
  set blocked { type ipv4_addr; elements = { 203.0.113.5, 203.0.113.6 } }
  chain input { type filter hook input priority 10; policy accept; ip saddr @blocked drop; }
  chain output { type filter hook output priority 10; policy accept; ip daddr 203.0.113.7 counter drop; }
}
EOF
ipset create foreign-set hash:ip
ipset add foreign-set 203.0.113.8
ip link add foreign0 type bridge
ip addr add 198.51.100.1/32 dev foreign0
ip link set foreign0 up
ip route add 198.51.100.128/25 dev foreign0
ip rule add from 198.51.100.0/24 lookup 100 priority 1000
`;

/** Give namespace ns a firewall's worth of state that is not ours. */
export async function plantForeignState(ns: string): Promise<void> {
  await nsRun(ns, ['sh', '-c', PLANT]);
}

const DUMP = String.raw`
for t in filter nat mangle raw security; do echo "== iptables $t"; iptables-save -t $t 2>/dev/null || true; done
for t in filter nat mangle raw security; do echo "== ip6tables $t"; ip6tables-save -t $t 2>/dev/null || true; done
echo "== nft"; nft -s list ruleset 2>/dev/null || true
echo "== ipset"; ipset list -t 2>/dev/null || true
echo "== link"; ip -o link show
echo "== addr"; ip -o addr show
echo "== route"; ip route show table all
echo "== route6"; ip -6 route show table all
echo "== rule"; ip rule show; ip -6 rule show
`;

/** Everything in ns that is not the proxy's, one section per kind, in a stable form. */
export async function dumpForeignState(ns: string): Promise<string> {
  const out = await nsRun(ns, ['sh', '-c', DUMP]);
  const sections = out.stdout.split(/^== /m).filter(Boolean);
  return sections
    .map((sec) => {
      const nl = sec.indexOf('\n');
      const title = sec.slice(0, nl);
      const body = sec.slice(nl + 1);
      return `== ${title}\n${filterSection(title, body)}`;
    })
    .join('\n');
}

function filterSection(title: string, body: string): string {
  const kind = title.split(' ')[0]!;
  switch (kind) {
    case 'iptables':
    case 'ip6tables':
      return foreignIptables(body);
    case 'nft':
      return foreignNft(body);
    case 'ipset':
      return foreignIpsets(body);
    case 'link':
      return foreignLines(body, (l) => !OUR_INTERFACES.some((i) => l.includes(` ${i}:`) || l.includes(` ${i}@`)));
    case 'addr':
    case 'route':
    case 'route6':
      return foreignLines(body, (l) => !OUR_INTERFACES.some((i) => new RegExp(`\\b(dev )?${i}\\b`).test(l)));
    default:
      return foreignLines(body, () => true);
  }
}

function foreignLines(body: string, keep: (line: string) => boolean): string {
  return body
    .split('\n')
    .map((l) => l.replace(/\s+$/, ''))
    .filter((l) => l !== '' && keep(l))
    .join('\n');
}

/** iptables-save of one table without our chains and rules, counters and comments. */
export function foreignIptables(save: string): string {
  const lines = save.split('\n').filter((l) => l !== '' && !l.startsWith('#') && l !== 'COMMIT');
  const rules = lines.filter((l) => l.startsWith('-A ') && !/KUBE-/.test(l));
  const withRules = new Set(rules.map((l) => l.split(' ')[1]));
  const chains = lines
    .filter((l) => l.startsWith(':') && !l.startsWith(':KUBE-'))
    .map((l) => l.replace(/\s*\[\d+:\d+\]$/, ''))
    .filter((l) => {
      const [name, policy] = l.slice(1).split(' ');
      const builtIn = policy !== '-';
      return !(builtIn && policy === 'ACCEPT' && !withRules.has(name));
    });
  if (chains.length === 0 && rules.length === 0) return '';
  const header = lines.find((l) => l.startsWith('*')) ?? '';
  return [header, ...chains, ...rules].join('\n');
}

/** `nft -s list ruleset` without our tables and without the iptables-nft tables (dumped by iptables-save). */
export function foreignNft(ruleset: string): string {
  const blocks: string[] = [];
  let cur: string[] | null = null;
  for (const line of ruleset.split('\n')) {
    if (line.startsWith('table ')) cur = [line];
    else if (cur) cur.push(line);
    if (cur && line === '}') {
      blocks.push(cur.join('\n'));
      cur = null;
    }
  }
  return blocks
    .filter((b) => {
      const [, family, name] = /^table (\S+) (\S+)/.exec(b) ?? [];
      if (OUR_NFT_TABLES.includes(name ?? '')) return false;
      return !((family === 'ip' || family === 'ip6') && IPTABLES_NFT_TABLES.includes(name ?? ''));
    })
    .join('\n');
}

/** `ipset list -t` (headers only) without our sets; the Memory and References lines vary, so they go. */
export function foreignIpsets(list: string): string {
  return list
    .split(/\n(?=Name: )/)
    .filter((b) => b.trim() !== '' && !/^Name: KUBE-/.test(b.trim()))
    .map((b) =>
      b
        .split('\n')
        .filter((l) => l.trim() !== '' && !/^(Size in memory|References|Number of entries):/.test(l))
        .join('\n'),
    )
    .join('\n');
}

/** The foreign state of every namespace given, keyed by namespace. */
export async function dumpAllForeign(namespaces: readonly string[]): Promise<Map<string, string>> {
  const dumps = await Promise.all(namespaces.map(async (ns) => [ns, await dumpForeignState(ns)] as const));
  return new Map(dumps);
}

/** A readable difference between two dumps of the same namespaces ('' when identical). */
export function foreignDiff(before: ReadonlyMap<string, string>, after: ReadonlyMap<string, string>): string {
  const out: string[] = [];
  for (const [ns, b] of before) {
    const a = after.get(ns) ?? '';
    if (a === b) continue;
    const bl = new Set(b.split('\n'));
    const al = new Set(a.split('\n'));
    const gone = [...bl].filter((l) => !al.has(l)).map((l) => `- ${l}`);
    const added = [...al].filter((l) => !bl.has(l)).map((l) => `+ ${l}`);
    out.push(`${ns}:\n${[...gone, ...added].join('\n') || '(same lines, different order)'}`);
  }
  return out.join('\n');
}
