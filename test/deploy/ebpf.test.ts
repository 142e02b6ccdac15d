// deploy/ebpf/daemonset-patch.yaml: the JSON patch that turns the DaemonSet
// into an ebpf-mode one with socket-level balancing for every pod. Applied to
// deploy/manifests/04-daemonset.yaml, the result still validates, mounts the
// host's bpf filesystem and cgroup tree, and passes --ebpf-socket-lb-cgroup
// pointing at that mount. The base DaemonSet and the binary's default leave
// socket balancing off (running the proxy by hand never attaches to a
// machine's cgroup root).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { parseCommandLine, type RunCommand } from '../../src/cmd/options.js';
import { DEFAULT_EBPF_OPTIONS } from '../../src/dataplane/ebpf/options.js';
import {
  containerArgv,
  containerEnv,
  DEPLOY_DIR,
  loadManifests,
  mountedConfigMapFile,
  only,
  type ConfigMap,
  type DaemonSet,
  type PodWorld,
} from './manifests.js';
import { schemaErrors, unknownFields } from './schema.js';

type Op = { op: string; path: string; value: unknown };

/** RFC 6902 `add` (the only operation the patch uses), with `-` appending to an array. */
function applyJsonPatch<T>(doc: T, ops: readonly Op[]): T {
  const out = structuredClone(doc) as unknown;
  for (const o of ops) {
    assert.equal(o.op, 'add', `unsupported op ${o.op}`);
    const parts = o.path.split('/').slice(1);
    const last = parts.pop()!;
    let at = out as Record<string, unknown>;
    for (const p of parts) {
      const next = Array.isArray(at) ? (at as unknown[])[Number(p)] : at[p];
      assert.ok(next !== undefined && next !== null, `${o.path}: ${p} does not exist`);
      at = next as Record<string, unknown>;
    }
    if (Array.isArray(at)) {
      if (last === '-') at.push(o.value);
      else at.splice(Number(last), 0, o.value);
    } else at[last] = o.value;
  }
  return out as T;
}

const all = loadManifests();
const base = only<DaemonSet>(all, 'DaemonSet');
const cm = only<ConfigMap>(all, 'ConfigMap');
const ops = parse(readFileSync(join(DEPLOY_DIR, 'ebpf', 'daemonset-patch.yaml'), 'utf8')) as Op[];
const ds = applyJsonPatch(base, ops);
const pod = ds.spec.template.spec;
const container = pod.containers[0]!;
const ebpfConfig = cm.data['config.conf']!.replace(/^mode: ""$/m, 'mode: ebpf');
const world: PodWorld = {
  nodeName: 'node-a',
  configMaps: { [cm.metadata!.name!]: { ...cm.data, 'config.conf': ebpfConfig } },
};

async function parseAsPod(d: DaemonSet): Promise<RunCommand> {
  const spec = d.spec.template.spec;
  const c = spec.containers[0]!;
  const cmd = await parseCommandLine(containerArgv(c, containerEnv(c, world)).slice(1), {
    readFile: async (p) => {
      const text = mountedConfigMapFile(spec, c, world, p);
      if (text === undefined) throw new Error(`ENOENT: ${p} is not in a mounted ConfigMap`);
      return text;
    },
  });
  assert.equal(cmd.kind, 'run');
  return cmd as RunCommand;
}

/** The host path mounted at mountPath, and whether the mount is read-only. */
function hostMount(mountPath: string): { host: string | undefined; readOnly: boolean } {
  const m = container.volumeMounts?.find((x) => x.mountPath === mountPath);
  assert.ok(m, `no mount at ${mountPath}`);
  return { host: pod.volumes?.find((v) => v.name === m.name)?.hostPath?.path, readOnly: m.readOnly === true };
}

describe('deploy/ebpf/daemonset-patch.yaml', () => {
  it('the patched DaemonSet validates against the API schema and has no unknown field', async () => {
    assert.deepEqual(await schemaErrors(ds), []);
    assert.deepEqual(unknownFields(ds), []);
  });

  it("mounts the host's bpf filesystem and its cgroup tree (writable: attaching needs a real cgroup)", () => {
    assert.deepEqual(hostMount('/sys/fs/bpf'), { host: '/sys/fs/bpf', readOnly: false });
    assert.deepEqual(hostMount('/run/kube-proxy-ts/cgroup'), { host: '/sys/fs/cgroup', readOnly: false });
  });

  it('with mode ebpf, the command attaches socket balancing at the mounted cgroup root, without warnings', async () => {
    const cmd = await parseAsPod(ds);
    assert.deepEqual(cmd.warnings, []);
    assert.equal(cmd.mode, 'ebpf');
    assert.equal(cmd.ebpf.socketLBCgroup, '/run/kube-proxy-ts/cgroup');
    assert.equal(cmd.ebpf.pinRoot.startsWith('/sys/fs/bpf/'), true, 'pins on the mounted host bpf filesystem');
  });

  it('the base DaemonSet and the binary default leave socket balancing off', async () => {
    assert.equal(DEFAULT_EBPF_OPTIONS.socketLBCgroup, '');
    assert.equal((await parseAsPod(base)).ebpf.socketLBCgroup, '');
  });
});
