// Writes an OCI image layout (https://github.com/opencontainers/image-spec,
// image-layout.md) from gzipped layer tarballs: blobs, the image config, the
// manifest and index.json. JSON is written with a fixed key order and no
// timestamps but --created, so equal inputs give equal digests. Prints the
// manifest digest. Used by deploy/image/build.
//
//   node ocilayout.mjs --out DIR --tag TAG --created EPOCH --version V --revision R \
//     --layer FILE.tar.gz:DIFFID:COMMENT [--layer ...]
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    tag: { type: 'string' },
    created: { type: 'string' },
    version: { type: 'string' },
    revision: { type: 'string' },
    layer: { type: 'string', multiple: true },
  },
});
const out = values.out;
if (!out || !values.tag || !values.created || !values.layer?.length) throw new Error('missing arguments');
const created = new Date(Number(values.created) * 1000).toISOString().replace(/\.000Z$/, 'Z');
const blobs = join(out, 'blobs', 'sha256');
rmSync(out, { recursive: true, force: true });
mkdirSync(blobs, { recursive: true });

const sha256 = (buf) => createHash('sha256').update(buf).digest('hex');
function writeBlob(mediaType, bytes) {
  const hex = sha256(bytes);
  writeFileSync(join(blobs, hex), bytes);
  return { mediaType, digest: `sha256:${hex}`, size: bytes.length };
}
const json = (o) => Buffer.from(JSON.stringify(o));

const layers = values.layer.map((spec) => {
  const [file, diffid, ...comment] = spec.split(':');
  const hex = sha256(readFileSync(file));
  copyFileSync(file, join(blobs, hex));
  return {
    descriptor: {
      mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip',
      digest: `sha256:${hex}`,
      size: statSync(file).size,
    },
    diffid: `sha256:${diffid}`,
    comment: comment.join(':'),
  };
});

const labels = {
  'org.opencontainers.image.title': 'kube-proxy-ts',
  'org.opencontainers.image.description': 'The Kubernetes network proxy, rebuilt in TypeScript on Node.js',
  'org.opencontainers.image.version': values.version ?? values.tag,
  'org.opencontainers.image.revision': values.revision ?? 'unknown',
  'org.opencontainers.image.licenses': 'Apache-2.0',
};
const config = writeBlob(
  'application/vnd.oci.image.config.v1+json',
  json({
    created,
    architecture: 'amd64',
    os: 'linux',
    config: {
      Entrypoint: ['/usr/local/bin/kube-proxy-ts'],
      // MALLOC_ARENA_MAX as in deploy/Dockerfile (see there and bin/kube-proxy-ts).
      Env: [
        'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        'NODE_ENV=production',
        'MALLOC_ARENA_MAX=2',
      ],
      WorkingDir: '/opt/kube-proxy-ts',
      Labels: labels,
    },
    rootfs: { type: 'layers', diff_ids: layers.map((l) => l.diffid) },
    history: layers.map((l) => ({ created, created_by: 'deploy/image/build', comment: l.comment })),
  }),
);
const manifest = writeBlob(
  'application/vnd.oci.image.manifest.v1+json',
  json({
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config,
    layers: layers.map((l) => l.descriptor),
    annotations: { 'org.opencontainers.image.created': created, ...labels },
  }),
);
writeFileSync(
  join(out, 'index.json'),
  JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.index.v1+json',
    manifests: [{ ...manifest, annotations: { 'org.opencontainers.image.ref.name': values.tag } }],
  }),
);
writeFileSync(join(out, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
process.stdout.write(`${manifest.digest}\n`);
