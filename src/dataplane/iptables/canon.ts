// A canonical form of an iptables rule, so that the text the renderer writes
// and the text iptables-save prints back for the same rule compare equal.
// iptables-save (1.8.x, checked against iptables-nft 1.8.9) differs from our
// input in ways that do not change the rule:
//   - the header options -s -d -i -o -p come first, in that order, and
//     addresses get their prefix length (10.0.0.1 -> 10.0.0.1/32);
//   - an explicit `-m tcp|udp|sctp` is printed before --dport/--sport;
//   - matches keep their load order but a match's options are reordered and
//     defaults spelled out (recent: --mask 255.255.255.255 --rsource;
//     REJECT: --reject-with icmp-port-unreachable);
//   - MARK --or-mark V / --xor-mark V print as --set-xmark V/V and V/0x0;
//     hex values lose leading zeros (0x00004000 -> 0x4000);
//   - --probability is stored as round(p * 2^31) and printed with 11 digits;
//   - the ipvs match's --vproto is printed as a number (udp -> 17).
// The canonical form: header options in fixed order, then each match module
// with its options sorted (modules sorted by name; their order has no effect
// on the rules we write), then the target with its options sorted, after the
// normalisations above. Two rules with equal canonical forms are the same
// rule to the kernel; the converse holds for every rule the renderer writes.

import { parseCIDR } from '../../core/ip.js';
import { tokenize } from './tokens.js';

const HEADER = ['-s', '-d', '-i', '-o', '-p'] as const;
const PORT_PROTOS = new Set(['tcp', 'udp', 'sctp', 'dccp']);
/** Options with no value, by module (everything else takes exactly one value). */
const FLAG_OPTIONS = new Set([
  '--set',
  '--rcheck',
  '--update',
  '--remove',
  '--reap',
  '--rsource',
  '--rdest',
  '--random',
  '--random-fully',
  '--persistent',
]);
/** Defaults iptables-save spells out: dropped from both sides. */
const DEFAULTS = new Set([
  '--mask 255.255.255.255',
  '--mask ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
  '--rsource',
  '--reject-with icmp-port-unreachable',
  '--reject-with icmp6-port-unreachable',
]);

function normAddr(v: string): string {
  const c = parseCIDR(v.includes('/') ? v : `${v}/${v.includes(':') ? 128 : 32}`);
  return c ? c.text : v;
}

function normHex(v: string): string {
  if (!/^0x[0-9a-f]+(\/0x[0-9a-f]+)?$/i.test(v)) return v;
  return v
    .split('/')
    .map((h) => `0x${parseInt(h, 16).toString(16)}`)
    .join('/');
}

/** Protocol numbers iptables-save prints for the ipvs match's --vproto. */
const PROTO_NAMES: Record<string, string> = { '6': 'tcp', '17': 'udp', '132': 'sctp' };

function normValue(opt: string, v: string): string {
  if (opt === '--probability') return String(Math.round(Number(v) * 0x80000000));
  if (opt === '--vproto') return PROTO_NAMES[v] ?? v.toLowerCase();
  return normHex(v);
}

interface Parsed {
  header: Map<string, string>;
  modules: Map<string, string[]>;
  target: string[];
}

/** Split a rule's tokens into header options, match modules and target. */
function parse(tokens: readonly string[]): Parsed {
  const header = new Map<string, string>();
  const modules = new Map<string, string[]>();
  const target: string[] = [];
  let cur: string[] | null = null; // options of the module or target being read
  let neg = '';
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t === '!') {
      neg = '! ';
      continue;
    }
    if ((HEADER as readonly string[]).includes(t)) {
      const v = tokens[++i] ?? '';
      header.set(t, `${neg}${t} ${t === '-s' || t === '-d' ? normAddr(v) : t === '-p' ? v.toLowerCase() : v}`);
      neg = '';
      continue;
    }
    if (t === '-m') {
      const name = tokens[++i] ?? '';
      cur = modules.get(name) ?? [];
      modules.set(name, cur);
      continue;
    }
    if (t === '-j' || t === '-g') {
      target.push(`${t} ${tokens[++i] ?? ''}`);
      cur = target;
      continue;
    }
    // An option: belongs to the current module/target, or to the implicit
    // protocol match (`-p tcp --dport 80` loads the tcp match).
    let owner = cur;
    if (owner === null || ((t === '--dport' || t === '--sport') && owner !== target)) {
      const proto = header.get('-p')?.split(' ').pop() ?? '';
      const name = PORT_PROTOS.has(proto) ? proto : '?';
      owner = modules.get(name) ?? [];
      modules.set(name, owner);
    }
    const opt = FLAG_OPTIONS.has(t)
      ? t
      : t === '--match-set' // set name and its direction flags (dst,dst)
        ? `${t} ${tokens[++i] ?? ''} ${tokens[++i] ?? ''}`
        : `${t} ${normValue(t, tokens[++i] ?? '')}`;
    owner.push(`${neg}${opt}`);
    neg = '';
  }
  return { header, modules, target };
}

function targetText(target: string[]): string {
  if (target.length === 0) return '';
  const [jump, ...opts] = target as [string, ...string[]];
  let o = opts.filter((x) => !DEFAULTS.has(x));
  if (jump === '-j MARK') {
    o = o.map((x) => {
      const [k, v = ''] = x.split(' ');
      if (k === '--or-mark') return `--set-xmark ${normHex(v)}/${normHex(v)}`;
      if (k === '--xor-mark') return `--set-xmark ${normHex(v)}/0x0`;
      return x;
    });
  }
  return [jump, ...o.sort()].join(' ');
}

/** The canonical form of a rule's text (what follows `-A CHAIN `). */
export function canonicalRule(rule: string): string {
  const tokens = tokenize(rule);
  if (!tokens) return rule;
  const p = parse(tokens);
  const parts: string[] = HEADER.flatMap((h) => (p.header.has(h) ? [p.header.get(h)!] : []));
  for (const name of [...p.modules.keys()].sort()) {
    const opts = p.modules
      .get(name)!
      .filter((x) => !DEFAULTS.has(x))
      .sort();
    if (PORT_PROTOS.has(name) && opts.length === 0) continue; // `-m tcp` without options
    parts.push(`-m ${name}`, ...opts);
  }
  const t = targetText(p.target);
  if (t !== '') parts.push(t);
  return parts.join(' ');
}

/** True when two rule texts are the same rule to the kernel. */
export function sameRule(a: string, b: string): boolean {
  return a === b || canonicalRule(a) === canonicalRule(b);
}
