// `kube-proxy-ts migrate` on a node that really runs IPVS mode, in the QEMU
// guest: test/e2e/tools-migrate.test.ts in ipvs mode, where kube-ipvs0 and
// the IPVS table (/proc/net/ip_vs) are the kernel's, not captured text.
process.env['KPT_E2E_MODES'] ??= 'ipvs';
await import('../e2e/tools-migrate.test.js');
