// deploy/Dockerfile cannot be built here (no container engine), so this reads
// it: every file it copies from the build context exists and survives its
// .dockerignore, the runtime stage installs the tools the proxy execs, the
// iptables names go through the wrapper, and `kube-proxy` is an alias of the
// `kube-proxy-ts` entrypoint. The image's TypeScript config builds src/ only,
// without tests.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { DEPLOY_DIR } from './manifests.js';

const REPO = join(DEPLOY_DIR, '..');
const text = readFileSync(join(DEPLOY_DIR, 'Dockerfile'), 'utf8').replace(/\\\n/g, ' ');
const lines = text
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'));
const ignore = readFileSync(join(DEPLOY_DIR, 'Dockerfile.dockerignore'), 'utf8')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'));

/** The .dockerignore verdict for a context path (last matching rule wins; only `*` and `!path` forms are used). */
function included(path: string): boolean {
  let keep = true;
  for (const rule of ignore) {
    const neg = rule.startsWith('!');
    const pat = (neg ? rule.slice(1) : rule).replace(/\/$/, '');
    if (pat === '*' || path === pat || path.startsWith(`${pat}/`)) keep = neg;
  }
  return keep;
}

describe('deploy/Dockerfile', () => {
  const contextCopies = lines
    .filter((l) => l.startsWith('COPY ') && !l.includes('--from='))
    .flatMap((l) => l.split(/\s+/).slice(1, -1));

  it('copies only files that exist and that its .dockerignore lets through', () => {
    assert.ok(contextCopies.length >= 5);
    for (const src of contextCopies) {
      assert.ok(existsSync(join(REPO, src)), `COPY ${src}: no such file in the repository`);
      assert.ok(included(src.replace(/\/$/, '')), `COPY ${src}: excluded by Dockerfile.dockerignore`);
    }
  });

  it('installs both iptables backends and the same packages as deploy/image/build', () => {
    // The runtime stage's install (the build stage installs the BPF compiler).
    const install = lines.find((l) => l.includes('apt-get install') && /\siptables\s/.test(l))!;
    const listed = install
      .replace(/.*apt-get install\s+(-\S+\s+)*/, '')
      .split('&&')[0]!
      .trim()
      .split(/\s+/);
    // deploy/image/packages: one per line; "# node base image" marks what the Dockerfile's base already has.
    const image = readFileSync(join(DEPLOY_DIR, 'image', 'packages'), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.trim().startsWith('#'));
    const wanted = image.filter((l) => !/#\s*node base image/.test(l)).map((l) => l.replace(/#.*/, '').trim());
    assert.deepEqual([...listed].sort(), [...wanted].sort());
    for (const pkg of ['iptables', 'nftables', 'conntrack', 'ipset', 'ipvsadm', 'libbpf1'])
      assert.ok(wanted.includes(pkg), pkg);
    assert.match(text, /test -x \/usr\/sbin\/xtables-nft-multi && test -x \/usr\/sbin\/xtables-legacy-multi/);
  });

  it('routes every iptables entry point through the wrapper', () => {
    const loop = lines.find((l) => l.includes('ln -sfn /usr/sbin/iptables-wrapper'))!;
    for (const c of [
      'iptables',
      'iptables-save',
      'iptables-restore',
      'ip6tables',
      'ip6tables-save',
      'ip6tables-restore',
    ]) {
      assert.match(loop, new RegExp(`\\s${c}(\\s|;)`), c);
    }
  });

  it('runs kube-proxy-ts, with kube-proxy as an alias of the same program', () => {
    assert.match(text, /ln -s \/opt\/kube-proxy-ts\/bin\/kube-proxy-ts \/usr\/local\/bin\/kube-proxy-ts/);
    assert.match(text, /ln -s \/opt\/kube-proxy-ts\/bin\/kube-proxy-ts \/usr\/local\/bin\/kube-proxy(\s|$)/m);
    assert.equal(lines.filter((l) => l.startsWith('ENTRYPOINT')).pop(), 'ENTRYPOINT ["/usr/local/bin/kube-proxy-ts"]');
    // bin/kube-proxy-ts loads ../dist/src/cmd/main.js, which the build stage produces under the same root.
    assert.match(readFileSync(join(REPO, 'bin', 'kube-proxy-ts'), 'utf8'), /\.\.\/dist\/src\/cmd\/main\.js/);
    assert.ok(lines.includes('COPY --from=build /opt/kube-proxy-ts/dist/ dist/'));
  });

  it('builds src/ without tests into the image layout, where `kube-proxy --version` runs', () => {
    // The build stage's `npx tsc -p deploy/tsconfig.image.json`, then the runtime stage's layout of
    // /opt/kube-proxy-ts (package.json, node_modules, dist/, bin/) and its alias, in a temp dir.
    const root = mkdtempSync(join(tmpdir(), 'kpt-dep-image-'));
    try {
      const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
      const build = spawnSync(
        process.execPath,
        [tsc, '-p', join(DEPLOY_DIR, 'tsconfig.image.json'), '--outDir', join(root, 'dist')],
        { encoding: 'utf8' },
      );
      assert.equal(build.status, 0, build.stdout + build.stderr);
      assert.ok(existsSync(join(root, 'dist', 'src', 'cmd', 'main.js')));
      assert.equal(
        readdirSync(join(root, 'dist'), { recursive: true }).filter((f) => String(f).endsWith('.test.js')).length,
        0,
      );
      assert.deepEqual(readdirSync(join(root, 'dist')), ['src']);
      copyFileSync(join(REPO, 'package.json'), join(root, 'package.json'));
      symlinkSync(join(REPO, 'node_modules'), join(root, 'node_modules'));
      mkdirSync(join(root, 'bin'));
      copyFileSync(join(REPO, 'bin', 'kube-proxy-ts'), join(root, 'bin', 'kube-proxy-ts'));
      symlinkSync(join(root, 'bin', 'kube-proxy-ts'), join(root, 'kube-proxy'));
      const version = spawnSync(process.execPath, [join(root, 'kube-proxy'), '--version'], { encoding: 'utf8' });
      assert.equal(version.status, 0, version.stderr);
      const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };
      assert.match(version.stdout, new RegExp(`v${pkg.version.replace(/\./g, '\\.')}`));
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
