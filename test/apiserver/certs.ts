// A throw-away PKI for the test API server, made with the `openssl` CLI
// (Debian package `openssl`): a self-signed CA, a serving certificate for the
// listen host (plus localhost/127.0.0.1/::1), and client certificates on demand
// (CN = user name, O = groups) so kubeconfigs with client-certificate auth can
// be tested. Everything lives in a private temp dir removed by dispose().

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

export class TestPKI {
  readonly ca: KeyPair;
  readonly serving: KeyPair;
  private readonly dir: string;
  private serial = 1;

  constructor(hosts: readonly string[]) {
    this.dir = mkdtempSync(join(tmpdir(), 'kpt-apiserver-pki-'));
    try {
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
        this.dir,
      );
      this.ca = { cert: this.read('ca.crt'), key: this.read('ca.key') };
      const names = new Set(['localhost', '127.0.0.1', '::1', ...hosts]);
      const san = [...names].map((h) => (isIP(h) ? `IP:${h}` : `DNS:${h}`)).join(',');
      this.serving = this.issue('kpt-test-apiserver', [], `subjectAltName=${san}\nextendedKeyUsage=serverAuth\n`);
    } catch (err) {
      this.dispose();
      throw err;
    }
  }

  /** A client certificate for `user` in `groups`, signed by the CA. */
  issueClient(user: string, groups: readonly string[] = []): KeyPair {
    return this.issue(user, groups, 'extendedKeyUsage=clientAuth\n');
  }

  private issue(cn: string, orgs: readonly string[], ext: string): KeyPair {
    const n = this.serial++;
    const subj = `/CN=${cn}${orgs.map((o) => `/O=${o}`).join('')}`;
    writeFileSync(join(this.dir, `${n}.ext`), ext);
    openssl(['req', '-new', ...EC, '-keyout', `${n}.key`, '-out', `${n}.csr`, '-subj', subj], this.dir);
    openssl(
      [
        'x509',
        '-req',
        '-in',
        `${n}.csr`,
        '-CA',
        'ca.crt',
        '-CAkey',
        'ca.key',
        '-set_serial',
        String(1000 + n),
        '-days',
        '2',
        '-extfile',
        `${n}.ext`,
        '-out',
        `${n}.crt`,
      ],
      this.dir,
    );
    return { cert: this.read(`${n}.crt`), key: this.read(`${n}.key`) };
  }

  private read(f: string): string {
    return readFileSync(join(this.dir, f), 'utf8');
  }

  dispose(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
