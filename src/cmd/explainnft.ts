// nftables side of `explain`: not implemented yet (see the report).
import { ProxyError } from '../core/errors.js';
import type { IPFamily } from '../core/types.js';
import type { CommandRunner } from '../platform/iptables/runner.js';
import type { ExplainRequest } from './explain.js';
import type { Explanation } from './explainview.js';

export function explainNftables(_run: CommandRunner, _req: ExplainRequest, _family: IPFamily, _locals: readonly string[]): Promise<Explanation> {
  return Promise.reject(new ProxyError('KPT_NOT_FOUND', 'explain: nftables mode is not implemented yet'));
}
