// The per-Service traffic metrics (--service-traffic-metrics N), whatever
// counts them: the nftables mode's counter table
// (src/platform/nftables/traffic.ts) or the ebpf mode's kpt_traffic map
// (src/platform/ebpf/traffic.ts). Each source is one IP family; its values
// are read from the kernel at each scrape.
import { Counter, Gauge, type Registry } from './promclient.js';
import type { IPFamily } from '../core/types.js';

export interface ServiceTraffic {
  readonly servicePort: string;
  readonly protocol: string;
  readonly newConnections: number;
  readonly bytes: number;
}

/** One family's counters. */
export interface TrafficSource {
  readonly family: IPFamily;
  /** Service ports past the cap, not counted. */
  readonly untracked: number;
  /** The counted Service ports' values now (empty until the first successful update). */
  read(): Promise<ServiceTraffic[]>;
}

/**
 * The metrics, read from the kernel at each scrape: new connections and
 * bytes (client to Service) per Service port, and how many Service ports
 * are past the cap.
 */
export function registerTrafficMetrics(registry: Registry, all: readonly TrafficSource[]): void {
  const labelNames = ['service_port', 'protocol', 'ip_family'] as const;
  // One read of the kernel per scrape: the registry collects both counters at once, so the second
  // shares the first one's read while it is in flight.
  type Rows = Array<{ c: TrafficSource; rows: ServiceTraffic[] }>;
  let inflight: Promise<Rows> | null = null;
  const read = (): Promise<Rows> =>
    (inflight ??= Promise.all(all.map(async (c) => ({ c, rows: await c.read() }))).finally(() => {
      inflight = null;
    }));
  const perServicePort = (name: string, help: string, value: (r: ServiceTraffic) => number) =>
    new Counter({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        this.reset();
        for (const { c, rows } of await read())
          for (const r of rows)
            this.inc({ service_port: r.servicePort, protocol: r.protocol, ip_family: c.family }, value(r));
      },
    });
  perServicePort(
    'kubeproxy_ts_service_new_connections_total',
    'New connections to each Service port (its cluster, external and load-balancer IPs and its node port), counted in the kernel. Only with --service-traffic-metrics.',
    (r) => r.newConnections,
  );
  perServicePort(
    'kubeproxy_ts_service_bytes_total',
    'Bytes clients sent to each Service port (the client-to-Service direction, headers included), counted in the kernel. Only with --service-traffic-metrics.',
    (r) => r.bytes,
  );
  new Gauge({
    name: 'kubeproxy_ts_service_traffic_untracked_service_ports',
    help: 'Service ports past the --service-traffic-metrics cap, whose traffic is not counted.',
    labelNames: ['ip_family'],
    registers: [registry],
    collect() {
      for (const c of all) this.set({ ip_family: c.family }, c.untracked);
    },
  });
}
