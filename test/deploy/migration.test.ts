// The migration in docs/migration.md, checked against the files it uses:
// our DaemonSet keeps every property of kubeadm's kube-proxy DaemonSet; the
// patches in deploy/patches/ (applied as `kubectl patch --type merge` does)
// keep the objects valid and give every node exactly one proxy in each stage;
// the cleanup DaemonSet runs `kube-proxy --cleanup` with the proxy's
// privileges; and the guide names only files that exist and `kube-proxy`
// command lines that parse.

import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { splitDiffArgs } from '../../src/cmd/diff.js';
import { parseExplainArgs } from '../../src/cmd/explain.js';
import { splitMigrateArgs } from '../../src/cmd/migrate.js';
import { parseCommandLine } from '../../src/cmd/options.js';
import { mergePatch } from '../apiserver/http.js';
import { DEPLOY_DIR, loadManifests, only, type Container, type DaemonSet, type PodSpec } from './manifests.js';
import { schedulesOn, type Labels } from './scheduling.js';
import { schemaErrors, unknownFields, type Manifest } from './schema.js';

const REPO = join(DEPLOY_DIR, '..');
const FIXTURES = fileURLToPath(
  new URL(import.meta.url.includes('/dist/') ? '../../../test/deploy/fixtures/' : './fixtures/', import.meta.url),
);
const ours = only<DaemonSet>(loadManifests(), 'DaemonSet');
const kubeadm = parse(readFileSync(join(FIXTURES, 'kubeadm-kube-proxy-daemonset.yaml'), 'utf8')) as DaemonSet;
const cleanupDs = parse(readFileSync(join(DEPLOY_DIR, 'cleanup', 'kube-proxy-ts-cleanup.yaml'), 'utf8')) as DaemonSet;
const guide = readFileSync(join(REPO, 'docs', 'migration.md'), 'utf8');

function patch(target: DaemonSet, file: string): DaemonSet {
  return mergePatch(target, parse(readFileSync(join(DEPLOY_DIR, 'patches', file), 'utf8'))) as DaemonSet;
}

async function assertValid(m: Manifest): Promise<void> {
  assert.deepEqual(await schemaErrors(m), [], `${m.kind} ${m.metadata?.name}`);
  assert.deepEqual(unknownFields(m), [], `${m.kind} ${m.metadata?.name}`);
}

/** A DaemonSet's host-facing properties: what makes it a node proxy. */
function hostShape(spec: PodSpec, c: Container) {
  const hostMounts = (c.volumeMounts ?? [])
    .flatMap((m) => {
      const v = spec.volumes?.find((x) => x.name === m.name);
      return v?.hostPath ? [{ mountPath: m.mountPath, readOnly: m.readOnly === true, hostPath: v.hostPath }] : [];
    })
    .sort((a, b) => a.mountPath.localeCompare(b.mountPath));
  return {
    hostNetwork: spec.hostNetwork,
    priorityClassName: spec.priorityClassName,
    tolerations: spec.tolerations,
    nodeSelector: spec.nodeSelector,
    privileged: c.securityContext?.privileged,
    hostMounts,
  };
}

const LINUX = { 'kubernetes.io/os': 'linux' };
const NODES: Record<string, Labels> = {
  trial: { ...LINUX, 'kube-proxy-ts/trial': 'true' },
  other: { ...LINUX },
  windows: { 'kubernetes.io/os': 'windows' },
};

/** Which proxies run on each node, given the two DaemonSets (null: deleted). */
function placement(kubeProxy: DaemonSet | null, ts: DaemonSet | null): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [node, labels] of Object.entries(NODES)) {
    out[node] = [
      ...(kubeProxy && schedulesOn(kubeProxy.spec.template.spec, labels) ? ['kube-proxy'] : []),
      ...(ts && schedulesOn(ts.spec.template.spec, labels) ? ['kube-proxy-ts'] : []),
    ];
  }
  return out;
}

describe('migration: kubeadm equivalence', () => {
  it("our DaemonSet has the host shape of kubeadm's kube-proxy DaemonSet", () => {
    assert.deepEqual(
      hostShape(ours.spec.template.spec, ours.spec.template.spec.containers[0]!),
      hostShape(kubeadm.spec.template.spec, kubeadm.spec.template.spec.containers[0]!),
    );
  });

  it('same command, the same NODE_NAME for --hostname-override, the same update strategy', () => {
    const [a, b] = [ours.spec.template.spec.containers[0]!, kubeadm.spec.template.spec.containers[0]!];
    assert.equal(a.command![0], b.command![0]);
    assert.ok(a.command!.includes('--hostname-override=$(NODE_NAME)'));
    assert.deepEqual(
      a.env!.find((e) => e.name === 'NODE_NAME'),
      b.env!.find((e) => e.name === 'NODE_NAME'),
    );
    assert.equal(ours.spec.updateStrategy?.type, kubeadm.spec.updateStrategy?.type);
  });
});

describe('migration: the stages of docs/migration.md', () => {
  it('before: kube-proxy on every Linux node', () => {
    assert.deepEqual(placement(kubeadm, null), { trial: ['kube-proxy'], other: ['kube-proxy'], windows: [] });
  });

  it('trial: labelled nodes run kube-proxy-ts, the others kube-proxy, none both', async () => {
    const kp = patch(kubeadm, 'kube-proxy-skip-trial-nodes.yaml');
    const ts = patch(ours, 'kube-proxy-ts-trial-nodes.yaml');
    await assertValid(kp);
    await assertValid(ts);
    assert.deepEqual(placement(kp, ts), { trial: ['kube-proxy-ts'], other: ['kube-proxy'], windows: [] });
  });

  it('full switch: kube-proxy-ts on every Linux node, kube-proxy kept but scheduled nowhere', async () => {
    const kp = patch(patch(kubeadm, 'kube-proxy-skip-trial-nodes.yaml'), 'kube-proxy-disable.yaml');
    const ts = patch(patch(ours, 'kube-proxy-ts-trial-nodes.yaml'), 'kube-proxy-ts-all-nodes.yaml');
    await assertValid(kp);
    await assertValid(ts);
    assert.deepEqual(placement(kp, ts), { trial: ['kube-proxy-ts'], other: ['kube-proxy-ts'], windows: [] });
    // A node that joins later carries no trial label: still kube-proxy-ts only.
    assert.deepEqual(ts.spec.template.spec.nodeSelector, ours.spec.template.spec.nodeSelector);
  });

  it('rollback (from the trial or the full switch): kube-proxy exactly as kubeadm made it', async () => {
    for (const from of [
      patch(kubeadm, 'kube-proxy-skip-trial-nodes.yaml'),
      patch(patch(kubeadm, 'kube-proxy-skip-trial-nodes.yaml'), 'kube-proxy-disable.yaml'),
    ]) {
      const kp = patch(from, 'kube-proxy-restore.yaml');
      await assertValid(kp);
      assert.deepEqual(kp, kubeadm);
      assert.deepEqual(placement(kp, null), { trial: ['kube-proxy'], other: ['kube-proxy'], windows: [] });
    }
  });
});

describe('migration: the cleanup DaemonSet', () => {
  it("validates, and runs `kube-proxy --cleanup` as an init container with the proxy's host access", async () => {
    await assertValid(cleanupDs);
    const spec = cleanupDs.spec.template.spec;
    const init = spec.initContainers![0]!;
    assert.deepEqual(init.command, ['/usr/local/bin/kube-proxy', '--cleanup']);
    const want = hostShape(ours.spec.template.spec, ours.spec.template.spec.containers[0]!);
    assert.deepEqual(hostShape(spec, init), want);
    assert.deepEqual(placement(null, cleanupDs), { trial: ['kube-proxy-ts'], other: ['kube-proxy-ts'], windows: [] });
  });
});

describe('migration: the guide', () => {
  const shLines = [...guide.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.split('\n').filter(Boolean));

  it('names only deploy/ files that exist, and every patch and manifest it ships', () => {
    const paths = new Set(
      [...guide.matchAll(/\bdeploy\/[\w./-]+\.(?:yaml|md)|\bdeploy\/Dockerfile\b/g)].map((m) => m[0]),
    );
    for (const p of paths) assert.ok(existsSync(join(REPO, p)), `${p} named in docs/migration.md does not exist`);
    for (const f of readdirSync(join(DEPLOY_DIR, 'patches')))
      assert.ok(paths.has(`deploy/patches/${f}`), `patch ${f} is not in the guide`);
    for (const f of readdirSync(join(DEPLOY_DIR, 'manifests')))
      assert.ok(paths.has(`deploy/manifests/${f}`), `manifest ${f} is not in the guide`);
  });

  it('every --patch-file command patches the DaemonSet its patch is tested against', () => {
    const target: Record<string, string> = {
      'kube-proxy-skip-trial-nodes.yaml': 'kube-proxy',
      'kube-proxy-disable.yaml': 'kube-proxy',
      'kube-proxy-restore.yaml': 'kube-proxy',
      'kube-proxy-ts-trial-nodes.yaml': 'kube-proxy-ts',
      'kube-proxy-ts-all-nodes.yaml': 'kube-proxy-ts',
    };
    const uses = shLines.filter((l) => l.includes('--patch-file'));
    assert.ok(uses.length >= 5);
    for (const l of uses) {
      const file = /--patch-file deploy\/patches\/(\S+)/.exec(l)![1]!;
      assert.ok(target[file], `untested patch ${file}`);
      assert.match(l, /--type merge/, l);
      const named = /patch daemonset (\S+)/.exec(l)?.[1] ?? (l.includes('04-daemonset.yaml') ? 'kube-proxy-ts' : '?');
      assert.equal(named, target[file], l);
    }
  });

  it("its `kube-proxy` command lines parse with the proxy's own command line (diff, explain and migrate with theirs)", async () => {
    const cmds = shLines.filter((l) => /^kube-proxy(-ts)? /.test(l));
    assert.ok(cmds.length > 0);
    // The config files the guide names (kubeadm's, the DaemonSet's) are read as an empty KubeProxyConfiguration.
    const readFile = (path: string) =>
      path === '/var/lib/kube-proxy/config.conf' || path === '/var/lib/kube-proxy-ts/config.conf'
        ? Promise.resolve('apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n')
        : Promise.reject(new Error('no file'));
    const sub = { explain: 0, diff: 0, migrate: 0 };
    for (const l of cmds) {
      const argv = l.split(/\s+/).slice(1);
      if (argv[0] === 'explain') {
        sub.explain++;
        assert.notEqual(parseExplainArgs(argv.slice(1)), 'help', l);
        continue;
      }
      let proxyArgs = argv;
      if (argv[0] === 'diff') {
        sub.diff++;
        proxyArgs = splitDiffArgs(argv.slice(1)).rest;
      } else if (argv[0] === 'migrate') {
        sub.migrate++;
        proxyArgs = splitMigrateArgs(argv.slice(1)).rest;
      }
      const cmd = await parseCommandLine(proxyArgs, { readFile });
      assert.equal(cmd.kind, 'run', l);
    }
    assert.deepEqual(
      sub,
      { explain: 2, diff: 2, migrate: 1 },
      'the IPVS-to-nftables section checks a node with migrate, and with diff and explain before and after',
    );
  });
});
