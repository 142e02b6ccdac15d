// The Clock type moved to src/core/clock.ts. This re-export stays only until
// src/platform/k8s, being edited elsewhere, imports it from core too.
export type { Clock, TimerHandle } from '../core/clock.js';
