// prom-client, only the parts the proxy uses. Its index loads everything the
// package ships (the Pushgateway client, the cluster aggregator, Summary's
// t-digest), and its default process_cpu_* metric requires the whole
// OpenTelemetry API, for exemplars the proxy never enables. A resident
// process keeps every module it loaded, on every node, so the metric types
// come from prom-client's own files one by one, and the default metrics are
// prom-client's own modules in its order, except the CPU counters, which are
// registered here with the same names, help texts and values
// (promclient.test.ts compares the output with prom-client's
// collectDefaultMetrics).
import { createRequire } from 'node:module';
import type * as Prom from 'prom-client';

const load = createRequire(import.meta.url);

export const Registry = load('prom-client/lib/registry') as typeof Prom.Registry;
export type Registry = Prom.Registry;
export const Counter = load('prom-client/lib/counter') as typeof Prom.Counter;
export type Counter<T extends string = string> = Prom.Counter<T>;
export const Gauge = load('prom-client/lib/gauge') as typeof Prom.Gauge;
export type Gauge<T extends string = string> = Prom.Gauge<T>;
export const Histogram = load('prom-client/lib/histogram') as typeof Prom.Histogram;
export type Histogram<T extends string = string> = Prom.Histogram<T>;
const buckets = load('prom-client/lib/bucketGenerators') as Pick<typeof Prom, 'linearBuckets' | 'exponentialBuckets'>;
export const linearBuckets = buckets.linearBuckets;
export const exponentialBuckets = buckets.exponentialBuckets;

/**
 * prom-client's default metrics after the CPU counters, in the order of its
 * lib/defaultMetrics.js (processResources only where Node has
 * getActiveResourcesInfo, as there).
 */
const DEFAULT_METRICS = [
  'processStartTime',
  'osMemoryHeap',
  'processOpenFileDescriptors',
  'processMaxFileDescriptors',
  'eventLoopLag',
  ...(typeof process.getActiveResourcesInfo === 'function' ? ['processResources'] : []),
  'processHandles',
  'processRequests',
  'heapSizeAndUsed',
  'heapSpacesSizeAndUsed',
  'version',
  'gc',
];

type DefaultMetric = (register: Prom.Registry, config: { eventLoopMonitoringPrecision: number }) => void;

/** prom-client's collectDefaultMetrics({ register }), without its OpenTelemetry import. */
export function collectDefaultMetrics(register: Prom.Registry): void {
  registerCpuCounters(register);
  const config = { eventLoopMonitoringPrecision: 10, register };
  for (const name of DEFAULT_METRICS) (load(`prom-client/lib/metrics/${name}`) as DefaultMetric)(register, config);
}

/** prom-client's processCpuTotal without exemplars: one collect sets all three. */
function registerCpuCounters(register: Prom.Registry): void {
  let last = process.cpuUsage();
  const registers = [register];
  const user = new Counter({
    name: 'process_cpu_user_seconds_total',
    help: 'Total user CPU time spent in seconds.',
    registers,
    collect() {
      const now = process.cpuUsage();
      const userMicros = now.user - last.user;
      const systemMicros = now.system - last.system;
      last = now;
      user.inc(userMicros / 1e6);
      system.inc(systemMicros / 1e6);
      total.inc((userMicros + systemMicros) / 1e6);
    },
  });
  const system = new Counter({
    name: 'process_cpu_system_seconds_total',
    help: 'Total system CPU time spent in seconds.',
    registers,
  });
  const total = new Counter({
    name: 'process_cpu_seconds_total',
    help: 'Total user and system CPU time spent in seconds.',
    registers,
  });
}
