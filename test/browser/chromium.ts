// Headless Chromium for page tests: Debian's `chromium` package (installed on
// first use), driven by playwright-core, started inside a network namespace
// (so it reaches servers that listen on a node's loopback) with a fresh
// profile that is removed on close. The flags keep it from talking to
// anything but the page under test.
import { existsSync, mkdtempSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { run } from '../../src/platform/exec.js';

export const CHROMIUM = '/usr/bin/chromium';

const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Install Debian's chromium if it is missing (waits for another apt run to finish). */
export async function ensureChromium(): Promise<void> {
  if (existsSync(CHROMIUM)) return;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const apt = ['-y', '-q', '-o', 'DPkg::Lock::Timeout=600', '--no-install-recommends'];
  await run('apt-get', ['-q', '-o', 'DPkg::Lock::Timeout=600', 'update'], { env });
  await run('apt-get', ['install', ...apt, 'chromium'], { env });
  if (!existsSync(CHROMIUM)) throw new Error(`apt-get installed chromium but ${CHROMIUM} is missing`);
}

export interface NsBrowser {
  readonly context: BrowserContext;
  close(): Promise<void>;
}

/**
 * Chromium in network namespace `ns`. Playwright talks to it over a pipe,
 * which `ip netns exec` passes through, so the launcher is a two-line wrapper.
 */
export async function launchInNamespace(ns: string): Promise<NsBrowser> {
  await ensureChromium();
  const dir = mkdtempSync(join(tmpdir(), 'kpt-chromium-'));
  const wrapper = join(dir, 'chromium-in-ns');
  writeFileSync(wrapper, `#!/bin/sh\nexec ip netns exec '${ns}' ${CHROMIUM} "$@"\n`);
  chmodSync(wrapper, 0o755);
  const profile = join(dir, 'profile');
  try {
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: wrapper,
      headless: true,
      args: FLAGS,
      timeout: 60_000,
    });
    return {
      context,
      async close() {
        await context.close().catch(() => {});
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}
