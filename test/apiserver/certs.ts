// A throw-away PKI for the test API server, made with the `openssl` CLI
// (Debian package `openssl`): a self-signed CA, a serving certificate for the
// listen host (plus localhost/127.0.0.1/::1), and client certificates on demand
// (CN = user name, O = groups) so kubeconfigs with client-certificate auth can
// be tested. The keys and certificates are kept in memory; openssl works in
// a private temp dir that exists only while it runs (so a test API server
// killed before its dispose() leaves nothing in /tmp).

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface KeyPair {
  readonly cert: string;
  readonly key: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** Run fn in a fresh private temp dir, removed afterwards whatever happens. */
function inTempDir<T>(fn: (dir: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'kpt-apiserver-pki-'));
  try {
    return fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export class TestPKI {
  readonly ca: KeyPair;
  readonly serving: KeyPair;
  private serial = 1;

  constructor(hosts: readonly string[]) {
    this.ca = inTempDir((dir) => {
      openssl(
        [
          'req',
          '-x509',
          ...EC,
          '-keyout',
          'ca.key',
          '-out',
          'ca.crt',
          '-days',
          '2',
          '-subj',
          '/CN=kpt-test-ca',
          '-addext',
          'basicConstraints=critical,CA:TRUE',
          '-addext',
          'keyUsage=critical,keyCertSign,cRLSign',
        ],
        dir,
      );
      return { cert: read(dir, 'ca.crt'), key: read(dir, 'ca.key') };
    });
    const names = new Set(['localhost', '127.0.0.1', '::1', ...hosts]);
    const san = [...names].map((h) => (isIP(h) ? `IP:${h}` : `DNS:${h}`)).join(',');
    this.serving = this.issue('kpt-test-apiserver', [], `subjectAltName=${san}\nextendedKeyUsage=serverAuth\n`);
  }

  /** A client certificate for `user` in `groups`, signed by the CA. */
  issueClient(user: string, groups: readonly string[] = []): KeyPair {
    return this.issue(user, groups, 'extendedKeyUsage=clientAuth\n');
  }

  private issue(cn: string, orgs: readonly string[], ext: string): KeyPair {
    const n = this.serial++;
    const subj = `/CN=${cn}${orgs.map((o) => `/O=${o}`).join('')}`;
    return inTempDir((dir) => {
      writeFileSync(join(dir, 'ca.crt'), this.ca.cert);
      writeFileSync(join(dir, 'ca.key'), this.ca.key, { mode: 0o600 });
      writeFileSync(join(dir, 'leaf.ext'), ext);
      openssl(['req', '-new', ...EC, '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', subj], dir);
      openssl(
        [
          'x509',
          '-req',
          '-in',
          'leaf.csr',
          '-CA',
          'ca.crt',
          '-CAkey',
          'ca.key',
          '-set_serial',
          String(1000 + n),
          '-days',
          '2',
          '-extfile',
          'leaf.ext',
          '-out',
          'leaf.crt',
        ],
        dir,
      );
      return { cert: read(dir, 'leaf.crt'), key: read(dir, 'leaf.key') };
    });
  }
}

function read(dir: string, f: string): string {
  return readFileSync(join(dir, f), 'utf8');
}
