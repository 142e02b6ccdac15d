// Every bounded wait of the namespace harness, scaled for slow machines:
// KPT_TIMEOUT_SCALE=N multiplies them (the QEMU guest of scripts/guest runs
// 15-20x slower than the host under software emulation and sets it). Default
// 1: on the host nothing changes.
const raw = Number(process.env['KPT_TIMEOUT_SCALE'] ?? '1');

export const TIMEOUT_SCALE = Number.isFinite(raw) && raw >= 1 ? raw : 1;

/** ms scaled by KPT_TIMEOUT_SCALE. */
export function scaled(ms: number): number {
  return Math.round(ms * TIMEOUT_SCALE);
}
