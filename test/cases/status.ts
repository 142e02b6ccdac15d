// The status document a proxy in `mode` serves after syncing one SyncState
// (what `kube-proxy-ts status -o json` prints), built with the proxy's own
// buildStatusView: the saved status `explain --status FILE` reads, for tests
// without a running proxy.
import type { SyncState } from '../../src/core/types.js';
import { buildStatusView, type StatusDoc } from '../../src/engine/statusview.js';

export function statusAfterSync(mode: string, st: SyncState): StatusDoc {
  return buildStatusView({
    mode,
    version: 'test',
    startTime: 0,
    now: 0,
    node: st.node,
    initialized: true,
    syncs: [
      { family: st.family, lastSync: null, lastError: null, failuresSinceSuccess: 0, repairs: 0, lastRepair: null },
    ],
    states: new Map([[st.family, st]]),
  });
}
