// A stand-in for bin/kube-proxy-ts's `explain` / `diff` dispatch (main.ts is
// the lead's file) so the e2e tests can run the subcommands as a process
// inside a node namespace: `node tools-entry.js diff --kubeconfig ...`.
import { runDiff } from '../../src/cmd/diff.js';
import { runExplain } from '../../src/cmd/explain.js';

const [sub, ...rest] = process.argv.slice(2);
const code = sub === 'explain' ? await runExplain(rest) : sub === 'diff' ? await runDiff(rest) : 2;
process.exitCode = code;
