// The host versions the nftables start-up check needs (see core/nftcheck.ts):
// the kernel release and `nft --version`.
import { release } from 'node:os';
import { SKIP_KERNEL_CHECK_ENV, type NftablesHostVersions } from '../../core/nftcheck.js';
import { run } from '../exec.js';

export async function nftablesHostVersions(env: NodeJS.ProcessEnv = process.env): Promise<NftablesHostVersions> {
  const r = await run('nft', ['--version'], { allowFailure: true }).catch(() => null);
  return {
    kernelRelease: release(),
    nftVersion: r && r.code === 0 ? r.stdout : null,
    skipKernelCheck: env[SKIP_KERNEL_CHECK_ENV],
  };
}
