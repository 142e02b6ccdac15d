// nftables side of `diff`: not implemented yet (see the report).
import { ProxyError } from '../core/errors.js';
import type { DataplaneConfig, IPFamily, SyncState } from '../core/types.js';
import type { FamilyDiff } from './diffipt.js';

export interface NftablesFamilyInput {
  readonly netns: string | null;
  readonly family: IPFamily;
  readonly config: DataplaneConfig;
  readonly state: SyncState;
}

export function diffNftablesFamily(_i: NftablesFamilyInput): Promise<FamilyDiff> {
  return Promise.reject(new ProxyError('KPT_NOT_FOUND', 'diff: nftables mode is not implemented yet'));
}
