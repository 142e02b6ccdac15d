// Entry point of bin/kube-proxy-ts: parse flags and config, then dispatch to
// one of the actions (help, version, write-config-to, cleanup, init-only) or
// run the proxy. Errors from bad input end the process with a message naming
// the flag or field and exit code 1, like upstream's cobra command.
//
// Each action's modules are imported when it runs (dynamic import()): the
// proxy then never loads explain/diff/status, nor the tools the proxy alone
// needs (a resident process pays every loaded module in RSS, on every node).
import { readFile, writeFile } from 'node:fs/promises';
import { hasCode, ProxyError } from '../core/errors.js';
import { durationToMillis, parseDuration } from '../core/config/duration.js';
import { logOutput } from '../core/config/logging.js';
import { createLogger } from '../platform/logger.js';
import { encodeConfigYAML, parseCommandLine, type ParsedCommand } from './options.js';

/** The version in the nearest package.json above this file (works from dist/ and from source). */
async function packageVersion(): Promise<string> {
  for (const up of ['../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(await readFile(new URL(up, import.meta.url), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'kube-proxy-ts') return pkg.version ?? '0.0.0';
    } catch {
      // not at this level
    }
  }
  return '0.0.0';
}

export async function main(argv: string[]): Promise<number> {
  // Our own read-only tools; every other argv is upstream kube-proxy's command line.
  if (argv[0] === 'explain') return (await import('./explain.js')).runExplain(argv.slice(1));
  if (argv[0] === 'diff') return (await import('./diff.js')).runDiff(argv.slice(1));
  if (argv[0] === 'migrate') return (await import('./migrate.js')).runMigrate(argv.slice(1));
  if (argv[0] === 'status') return (await import('./status.js')).runStatus(argv.slice(1));
  let cmd: ParsedCommand;
  try {
    cmd = await parseCommandLine(argv, { readFile: (p) => readFile(p, 'utf8') }, await packageVersion());
  } catch (err) {
    if (err instanceof ProxyError) {
      process.stderr.write(`Error: ${err.message}\n`);
      if (hasCode(err, 'KPT_FLAG_INVALID')) process.stderr.write("Run 'kube-proxy-ts --help' for usage.\n");
      return 1;
    }
    throw err;
  }
  if (cmd.kind !== 'run') {
    process.stdout.write(cmd.text.endsWith('\n') ? cmd.text : `${cmd.text}\n`);
    return 0;
  }
  const logging = cmd.resolved.logging;
  const log = createLogger({
    verbosity: logging.verbosity ?? 0,
    output: logOutput(logging, durationToMillis(parseDuration(logging.flushFrequency))),
  });
  for (const w of cmd.warnings) log.warn(w);

  if (cmd.actions.writeConfigTo) {
    await writeFile(cmd.actions.writeConfigTo, encodeConfigYAML(cmd.config));
    log.info({ path: cmd.actions.writeConfigTo }, 'Wrote configuration');
    return 0;
  }
  if (cmd.actions.cleanup) {
    const { cleanupAll } = await import('./modes/index.js');
    const errors = await cleanupAll(log, {
      ebpfPinRoot: cmd.ebpf.pinRoot,
      excludeCIDRs: cmd.resolved.ipvs.excludeCIDRs,
    });
    return errors === 0 ? 0 : 1;
  }
  const { initOnly, runProxy } = await import('./server.js');
  if (cmd.actions.initOnly) {
    await initOnly(cmd, log);
    return 0;
  }
  return runProxy(cmd, log);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`Error: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
