// deploy/iptables-wrapper picks the backend the host already uses. Each case
// builds a "host" in a fresh network namespace (rules written with
// iptables-legacy and/or iptables-nft), installs the wrapper as the image does
// (iptables, iptables-save, ... symlinked to it, in a temp dir first in PATH)
// and runs a command through it: the command must reach the chosen backend,
// and the links must now point at that backend's xtables-<mode>-multi.

import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readlinkSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { DEPLOY_DIR } from './manifests.js';
import { newNamespace, type TestNamespace } from './netns.js';

const COMMANDS = ['iptables', 'iptables-save', 'iptables-restore', 'ip6tables', 'ip6tables-save', 'ip6tables-restore'];
const PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The wrapper installed as deploy/Dockerfile does, in a fresh dir. */
function install(): string {
  const dir = mkdtempSync(join(tmpdir(), 'kpt-dep-wrapper-'));
  dirs.push(dir);
  copyFileSync(join(DEPLOY_DIR, 'iptables-wrapper'), join(dir, 'iptables-wrapper'));
  for (const c of COMMANDS) symlinkSync(join(dir, 'iptables-wrapper'), join(dir, c));
  return dir;
}

/** Write `n` distinct filter rules with iptables-<backend> in ns. */
async function addRules(ns: TestNamespace, backend: 'legacy' | 'nft', n: number): Promise<void> {
  await ns.run([`iptables-${backend}`, '-N', `KPT-${backend.toUpperCase()}`]);
  for (let i = 0; i < n; i++) {
    await ns.run([
      `iptables-${backend}`,
      '-A',
      `KPT-${backend.toUpperCase()}`,
      '-s',
      `198.51.100.${i + 1}/32`,
      '-j',
      'RETURN',
    ]);
  }
}

async function hint(ns: TestNamespace, backend: 'legacy' | 'nft'): Promise<void> {
  await ns.run([`iptables-${backend}`, '-t', 'mangle', '-N', 'KUBE-IPTABLES-HINT']);
}

async function withNs(tag: string, fn: (ns: TestNamespace) => Promise<void>): Promise<void> {
  const ns = await newNamespace(tag);
  try {
    await fn(ns);
  } finally {
    ns.dispose();
  }
}

/** Run `iptables-save` through the wrapper; return what the backend printed and where the links now point. */
async function runThrough(
  ns: TestNamespace,
  dir: string,
): Promise<{ stdout: string; stderr: string; links: Set<string> }> {
  const r = await ns.run(['env', `PATH=${dir}:${PATH}`, join(dir, 'iptables-save'), '-t', 'filter']);
  const links = new Set(COMMANDS.map((c) => basename(readlinkSync(join(dir, c)))));
  return { stdout: r.stdout, stderr: r.stderr, links };
}

async function detectOnly(ns: TestNamespace, dir: string): Promise<string> {
  const r = await ns.run(['env', `PATH=${dir}:${PATH}`, 'IPTABLES_WRAPPER_DETECT_ONLY=1', join(dir, 'iptables')]);
  return r.stdout.trim();
}

describe("iptables-wrapper chooses the host's backend", () => {
  it('an empty host: nft (the modern default), and the links are replaced', () =>
    withNs('w', async (ns) => {
      const dir = install();
      assert.equal(await detectOnly(ns, dir), 'nft');
      assert.deepEqual([...(await runThrough(ns, dir)).links], ['xtables-nft-multi']);
    }));

  it('a legacy host (10+ legacy rules, a few nft ones): legacy, and the command reaches the legacy tables', () =>
    withNs('w', async (ns) => {
      await addRules(ns, 'legacy', 12);
      await addRules(ns, 'nft', 2);
      const dir = install();
      assert.equal(await detectOnly(ns, dir), 'legacy');
      const r = await runThrough(ns, dir);
      assert.deepEqual([...r.links], ['xtables-legacy-multi']);
      assert.match(r.stdout, /-A KPT-LEGACY -s 198\.51\.100\.12\/32 -j RETURN/);
      assert.doesNotMatch(r.stdout, /KPT-NFT/);
      assert.match(r.stderr, /using the legacy backend/);
      // Later calls go straight to the backend: iptables now writes legacy rules.
      await ns.run([join(dir, 'iptables'), '-A', 'KPT-LEGACY', '-s', '203.0.113.1/32', '-j', 'RETURN']);
      assert.match((await ns.run(['iptables-legacy-save', '-t', 'filter'])).stdout, /203\.0\.113\.1/);
    }));

  it('more nft rules than legacy ones: nft', () =>
    withNs('w', async (ns) => {
      await addRules(ns, 'legacy', 3);
      await addRules(ns, 'nft', 5);
      const dir = install();
      const r = await runThrough(ns, dir);
      assert.deepEqual([...r.links], ['xtables-nft-multi']);
      assert.match(r.stdout, /-A KPT-NFT -s 198\.51\.100\.5\/32 -j RETURN/);
    }));

  it('a few legacy rules and no nft ones: legacy (more rules wins below the threshold too)', () =>
    withNs('w', async (ns) => {
      await addRules(ns, 'legacy', 2);
      assert.equal(await detectOnly(ns, install()), 'legacy');
    }));

  it("the kubelet's hint chain decides over rule counts, in either direction", async () => {
    await withNs('w', async (ns) => {
      await hint(ns, 'legacy');
      await addRules(ns, 'nft', 5);
      assert.equal(await detectOnly(ns, install()), 'legacy');
    });
    await withNs('w', async (ns) => {
      await hint(ns, 'nft');
      await addRules(ns, 'legacy', 12);
      assert.equal(await detectOnly(ns, install()), 'nft');
    });
  });
});
