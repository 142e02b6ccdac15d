// The composition root of a running proxy (upstream cmd/kube-proxy/app
// server.go + server_linux.go): platform setup, node discovery, one datapath
// per IP family, the proxier and its runner, the Kubernetes sources, and the
// healthz / metrics / service-health servers. All lifetimes end through one
// AbortController (SIGTERM/SIGINT); rules stay in place on shutdown so the
// next process takes over without a traffic gap.
import { watch } from 'node:fs';
import { hostname } from 'node:os';
import { featureGateEnabled } from '../core/config/features.js';
import { resolveDataplaneConfig } from '../core/config/nodeport.js';
import { resolveNodeName } from '../core/config/nodename.js';
import { ipvsSchedulerNote } from '../core/lbalgorithm.js';
import type { Dataplane, IPFamily, ProxyMode } from '../core/types.js';
import { healthObserver, healthTimeoutFor, ProxyHealthState } from '../engine/health.js';
import { NodeChangeWatch } from '../engine/nodewatch.js';
import { Proxier } from '../engine/proxier.js';
import { BoundedFrequencyRunner } from '../engine/runner.js';
import { healthCheckListenAddresses } from '../engine/servicehealth.js';
import { repairEventObserver } from '../engine/repairevents.js';
import { syncFailureObserver } from '../engine/syncfailures.js';
import { SyncStatusRecorder } from '../engine/syncstatus.js';
import { realClock } from '../platform/clock.js';
import { Conntrack, conntrackReconciler, type ConntrackTable } from '../platform/conntrack.js';
import { openCtNetlink } from '../platform/conntracknl.js';
import { startHealthzServer } from '../platform/healthz.js';
import { loggingObserver, teeObservers, type Logger } from '../platform/logger.js';
import { ProxyMetrics } from '../platform/metrics.js';
import { startMetricsServer } from '../platform/metricsserver.js';
import { localIPs } from '../platform/netinfo.js';
import { ServiceHealthServer } from '../platform/servicehealth.js';
import { setupConntrack } from '../platform/sysctl.js';
import { writeFile } from 'node:fs/promises';
import { createDataplane, familiesFor, MODE_DEFAULTED, modeDriver, SUPPORTED_MODES } from './modes/index.js';
import type { RunCommand } from './options.js';
import { startupNode } from './node.js';
import { openSource } from './sources.js';
import { DatapathCanary } from '../platform/canary.js';
import {
  CanaryJudge,
  canaryNote,
  canaryPlans,
  CANARY_EVENT_ACTION,
  CANARY_FAILED_REASON,
  CANARY_RECOVERED_REASON,
  type CanaryTransition,
} from '../engine/canary.js';
import { CANARY_SERVICE_PORT_KEY, canaryVIP } from '../core/canary.js';
import { EventRecorder, nodeRef, serviceRef, type EventType } from '../platform/eventrecorder.js';
import { zpageOptions } from './zpages.js';
import { FirstSyncs, removeOthers, retireOthers } from './handover.js';
import { armFaultInjection } from '../platform/faults.js';
import { loopTurn, runSliced } from '../platform/slices.js';

const NS_PER_S = 1e9;

/** Upstream platformSetup's privileged part: conntrack sysctls. */
async function platformSetup(cmd: RunCommand, log: Logger): Promise<readonly string[]> {
  const ct = cmd.resolved.linux.conntrack;
  const sec = (ns: number | null) => (ns === null ? null : ns / NS_PER_S);
  const r = await setupConntrack(
    {
      maxPerCore: ct.maxPerCore,
      min: ct.min,
      tcpEstablishedTimeout: sec(ct.tcpEstablishedTimeout),
      tcpCloseWaitTimeout: sec(ct.tcpCloseWaitTimeout),
      tcpBeLiberal: ct.tcpBeLiberal,
      udpTimeout: sec(ct.udpTimeout),
      udpStreamTimeout: sec(ct.udpStreamTimeout),
    },
    { log },
  );
  for (const w of r.warnings) log.warn(w);
  const oom = cmd.resolved.linux.oomScoreAdj;
  if (oom !== null) {
    // Best effort, as upstream: an unprivileged run must still start.
    await writeFile('/proc/self/oom_score_adj', `${oom}\n`).catch((e: Error) =>
      log.debug({ err: e.message }, 'could not set oom_score_adj'),
    );
  }
  return r.warnings;
}

export async function initOnly(cmd: RunCommand, log: Logger): Promise<void> {
  await platformSetup(cmd, log);
  await modeDriver(cmd.mode).init?.(cmd, log);
  log.info('Privileged initialization done (--init-only)');
}

export async function runProxy(cmd: RunCommand, log: Logger): Promise<number> {
  const config = cmd.resolved;
  const mode = cmd.mode;
  const abort = new AbortController();
  const stop = (why: string, code = 0) => {
    if (abort.signal.aborted) return;
    log.info({ reason: why }, 'Shutting down');
    exitCode = code;
    abort.abort();
  };
  let exitCode = 0;
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  const faultDir = process.env['KPT_FAULT_DIR'];
  if (faultDir) {
    log.warn({ dir: faultDir }, 'KPT_FAULT_DIR is set: fault injection for tests is armed');
    armFaultInjection(faultDir);
  }

  // Loaded only when asked for: a proxy without profiling never opens an inspector session. Without a
  // metrics server there is nowhere to serve profiles, so heap sampling is not started either. Started
  // before anything else is built, so a heap profile covers the proxy's start-up, as Go's does.
  const pprof =
    config.enableProfiling && config.metricsBindAddress.trim() !== ''
      ? (await import('../platform/pprof/routes.js')).startProfiling({ log })
      : undefined;
  const driver = modeDriver(mode);
  const why = (await driver.unsupportedReason?.()) ?? null;
  if (why) {
    log.error(why);
    return 1;
  }
  const setupWarnings = await platformSetup(cmd, log);
  // A side-by-side trial shares the node with another proxy: never remove its rules. Otherwise
  // other modes' state goes once this mode serves every Service (the handover, below).
  if (cmd.serviceProxyName)
    log.info(
      { serviceProxyName: cmd.serviceProxyName },
      "Serving only Services claimed with service-proxy-name; leaving other proxies' rules alone",
    );

  const nodeName = resolveNodeName(config.hostnameOverride, hostname());
  const source = await openSource(cmd, nodeName, log);
  if (!source) return 1;
  const events = source.eventSink
    ? new EventRecorder({ sink: source.eventSink, clock: realClock, host: hostname(), log })
    : null;
  const nodeEvent = (type: EventType, reason: string, note = '') =>
    events?.eventf(nodeRef(nodeName), type, reason, 'StartKubeProxy', note);
  const node = await source.node(abort.signal);
  if (abort.signal.aborted) return exitCode;
  const detected = startupNode(nodeName, node, config.bindAddress);
  if (detected.primaryIsLoopback)
    log.warn(
      'No IP found for this node, so loopback stands in for it; set --bind-address if the node has another address',
    );
  const { nodeIPs, podCIDRs } = detected;
  log.info({ nodeName, nodeIPs, mode }, 'Starting kube-proxy-ts');
  if (cmd.modeDefaulted) log.warn({ mode, reason: MODE_DEFAULTED.reason }, MODE_DEFAULTED.note);
  const scheduler = driver.lbAlgorithm ? ipvsSchedulerNote(config.ipvs.scheduler) : null;
  if (scheduler) log.info({ scheduler: scheduler.scheduler, lbAlgorithm: scheduler.equivalent }, scheduler.message);
  if (driver.deprecation) log.error({}, driver.deprecation.log);

  const clock = realClock;
  const metrics = new ProxyMetrics();
  const families = await familiesFor(mode, detected.primaryFamily);
  const dpConfigs = families.map((family) =>
    resolveDataplaneConfig(config, family, localIPs(family), nodeIPs[family], podCIDRs),
  );
  // ctnetlink as upstream; the conntrack CLI only where netlink is unavailable.
  const ctTable: ConntrackTable = (await openCtNetlink()) ?? new Conntrack();
  log.info({ via: ctTable.kind }, 'Stale UDP conntrack entries are reconciled');
  const plainDataplanes: Dataplane[] = await Promise.all(
    dpConfigs.map((dpConfig) =>
      createDataplane(mode, {
        config: dpConfig,
        resolved: config,
        clock,
        log,
        metrics,
        syncPeriodMs: cmd.timing.syncPeriodMs,
        ebpf: cmd.ebpf,
        conntrack: ctTable,
      }),
    ),
  );
  if (cmd.serviceTrafficMetrics > 0 && !driver.countsTraffic)
    log.warn(
      { mode },
      `--service-traffic-metrics counts traffic in ${SUPPORTED_MODES.filter((m) => modeDriver(m).countsTraffic).join(' and ')} modes only; no per-Service counters`,
    );
  const dataplanes = driver.riders
    ? await driver.riders(plainDataplanes, { cmd, nodeIPs, metrics, log })
    : plainDataplanes;

  let proxier: Proxier | null = null;
  const health = new ProxyHealthState({
    clock,
    healthTimeout: healthTimeoutFor(cmd.timing.syncPeriodMs),
    nodeEligible: () => proxier?.nodeEligible() ?? false,
    families,
  });
  const conntrackHook = conntrackReconciler(ctTable, metrics, clock, (err) =>
    log.warn({ err }, 'conntrack delete failed'),
  );
  const svcHealth = new ServiceHealthServer({
    // One socket per family: each family's nodePortAddresses, or its wildcard.
    listenAddresses: healthCheckListenAddresses(dpConfigs),
    isProxyHealthy: () => health.isHealthy(),
    log,
    onListenFailed: (svcKey, port, err) => {
      metrics.serviceHealthcheckListenFailed();
      const note = `node ${nodeName} failed to start healthcheck ${JSON.stringify(svcKey)} on port ${port}: ${err.message}`;
      log.error({ service: svcKey, port, err: err.message }, 'FailedToStartServiceHealthcheck');
      events?.eventf(serviceRef(svcKey), 'Warning', 'FailedToStartServiceHealthcheck', 'Listen', note);
    },
  });

  // The handover (src/cmd/handover.ts): other modes' state goes once this mode serves every Service.
  const handoverOptions = {
    ebpfPinRoot: cmd.ebpf.pinRoot,
    excludeCIDRs: config.ipvs.excludeCIDRs,
    drainMs: cmd.handoverDrainMs,
  };
  let removeOthersPending = false;
  const runner = new BoundedFrequencyRunner(
    'sync-runner',
    async () => {
      // A sync is asked for from inside an informer's callback (the end of a 10k-object list, say): start it
      // on a turn of its own, so the two do not make one long stall of the event loop.
      await loopTurn();
      await proxier!.syncProxyRules();
      await svcHealth.syncServices(proxier!.healthCheckNodePorts());
      svcHealth.syncEndpoints(proxier!.localReadyEndpoints());
      if (removeOthersPending) {
        removeOthersPending = false;
        await removeOthers(mode, log, handoverOptions).catch((err: unknown) =>
          log.error({ err: String(err) }, "Removing other modes' state failed; the next start tries again"),
        );
      }
    },
    {
      minInterval: cmd.timing.minSyncPeriodMs,
      maxInterval: cmd.timing.syncPeriodMs,
      retryInterval: cmd.timing.minSyncPeriodMs > 0 ? cmd.timing.minSyncPeriodMs : 1000,
      // Upstream's burstSyncs: the first change after a quiet period, and one right after it, sync at once.
      burst: 2,
    },
    clock,
    { onError: (err) => log.error({ err: err instanceof Error ? err.message : String(err) }, 'Sync failed; retrying') },
  );

  const canaries = await startCanaries(cmd, mode, families, nodeIPs, nodeName, {
    clock,
    log,
    syncEpoch: () => proxier?.syncEpoch() ?? 1,
    programmed: (family) => proxier?.lastSyncState(family)?.services.has(CANARY_SERVICE_PORT_KEY) ?? false,
    onTransition: (family, t) => {
      const note = canaryNote(mode, family, canaryVIP(family), t);
      if (t.healthy) {
        health.datapathRecovered(family);
        log.info({ family }, note);
        events?.eventf(nodeRef(nodeName), 'Normal', CANARY_RECOVERED_REASON, CANARY_EVENT_ACTION, note);
      } else {
        health.datapathFailed(family, t.reason);
        log.error({ family }, note);
        events?.eventf(nodeRef(nodeName), 'Warning', CANARY_FAILED_REASON, CANARY_EVENT_ACTION, note);
      }
    },
  });
  const syncStatus = new SyncStatusRecorder(clock, families);
  const firstSyncs = new FirstSyncs(families);
  proxier = new Proxier({
    nodeName,
    dataplanes,
    clock,
    observer: teeObservers(
      metrics,
      healthObserver(health),
      loggingObserver(log),
      syncFailureObserver(driver.failureCounter, metrics),
      syncStatus.observer,
      firstSyncs.observer,
      repairEventObserver((reason, action, note) => events?.eventf(nodeRef(nodeName), 'Warning', reason, action, note)),
    ),
    requestSync: () => runner.run(),
    runSteps: runSliced,
    conntrack: conntrackHook,
    allowServiceExternalIPs: featureGateEnabled(config.featureGates, 'AllowServiceExternalIPs'),
    serviceProxyName: cmd.serviceProxyName ?? '',
    nodeIPOverride: detected.override,
    canary: (family) => canaries.get(family)?.canary.target() ?? null,
    ...(cmd.earlySyncMs > 0 ? { earlySyncAfterMs: cmd.earlySyncMs } : {}),
  });

  const healthz = startHealthzServer({
    bindAddress: config.healthzBindAddress,
    state: health,
    counters: metrics,
    log,
    hardFail: config.bindAddressHardFail,
    onListenError: (err) => {
      nodeEvent('Warning', 'FailedToStartProxierHealthcheck', err.message);
      stop('healthz bind failure', 1);
    },
    onListenRetry: (err) => nodeEvent('Warning', 'FailedToStartProxierHealthcheck', err.message),
  });
  const metricsSrv = startMetricsServer({
    bindAddress: config.metricsBindAddress,
    metrics,
    proxyMode: mode,
    config: cmd.config,
    ...zpageOptions(
      cmd,
      proxier,
      syncStatus,
      clock,
      performance.timeOrigin,
      () => new Map([...canaries].map(([f, c]) => [f, c.judge.status()])),
    ),
    ...(pprof ? { pprof } : {}),
    log,
    hardFail: config.bindAddressHardFail,
    onListenError: (err) => {
      nodeEvent('Warning', 'FailedToStartMetricServer', err.message);
      stop('metrics bind failure', 1);
    },
    onListenRetry: (err) => nodeEvent('Warning', 'FailedToStartMetricServer', err.message),
  });

  // Upstream exits when the config file changes, so its supervisor restarts it with the new one.
  const configWatch = cmd.configFile
    ? watchConfigFile(
        cmd.configFile,
        () => stop("content of the proxy server's configuration file was updated", 1),
        log,
      )
    : null;
  // Node IP (and, for NodeCIDR, podCIDR) changes need a restart, as upstream's NodeManager decides.
  const nodeWatch = new NodeChangeWatch(
    proxier,
    { nodeIPs: detected.reported, podCIDRs },
    config.detectLocalMode === 'NodeCIDR',
    clock,
    (why) => stop(why, 1),
  );

  runner.loop();
  if (!cmd.serviceProxyName)
    void firstSyncs.done
      .then(() => retireOthers(mode, log, handoverOptions, abort.signal))
      .then((drained) => {
        if (!drained) return;
        removeOthersPending = true; // by the runner, between two syncs
        runner.run();
      })
      .catch((err: unknown) => log.error({ err: String(err) }, "Retiring other modes' state failed"));
  for (const c of canaries.values()) c.canary.start();
  const sources = source.run(
    {
      service: proxier,
      endpointSlice: proxier,
      node: proxier,
      // In a trial the other proxy owns the ServiceCIDRs: do not drop traffic to ClusterIPs it serves.
      serviceCIDR: cmd.serviceProxyName ? { onServiceCIDRsChanged() {} } : proxier,
    },
    abort.signal,
  );
  // Upstream's birth cry, then the start-up warnings it reports as events.
  nodeEvent('Normal', 'Starting');
  for (const w of setupWarnings) nodeEvent('Warning', 'readOnlySysFS', w);
  if (cmd.modeDefaulted) nodeEvent('Warning', MODE_DEFAULTED.reason, MODE_DEFAULTED.note);
  if (driver.deprecation) nodeEvent('Warning', driver.deprecation.reason, driver.deprecation.note);

  await new Promise<void>((resolve) => abort.signal.addEventListener('abort', () => resolve(), { once: true }));
  nodeWatch.cancel();
  configWatch?.close();
  await runner.stop();
  // A failure event (e.g. the healthz port taken) should reach the API server before we exit.
  await Promise.race([events?.flush(), new Promise((r) => setTimeout(r, 2000).unref())]);
  await Promise.allSettled([
    sources,
    healthz?.close(),
    Promise.resolve(metricsSrv?.close()).then(() => pprof?.close()),
    svcHealth.close(),
    ...[...canaries.values()].map((c) => c.canary.close()),
    ...dataplanes.map((d) => d.close?.()),
  ]);
  ctTable.close?.();
  source.close?.();
  log.info('Stopped; rules are left in place for the next proxy');
  return exitCode;
}

interface CanaryWiring {
  readonly clock: typeof realClock;
  readonly log: Logger;
  readonly syncEpoch: () => number;
  readonly programmed: (family: IPFamily) => boolean;
  readonly onTransition: (family: IPFamily, t: CanaryTransition) => void;
}

/**
 * One canary per family that can have one (canaryPlans, src/engine/canary.ts:
 * the mode runs it for that family and the node has a non-loopback address of
 * it), each said once in the log either way. Listening before the first sync,
 * so that sync programs it.
 */
async function startCanaries(
  cmd: RunCommand,
  mode: ProxyMode,
  families: readonly IPFamily[],
  nodeIPs: Readonly<Partial<Record<IPFamily, string>>>,
  nodeName: string,
  w: CanaryWiring,
): Promise<Map<IPFamily, { canary: DatapathCanary; judge: CanaryJudge }>> {
  const out = new Map<IPFamily, { canary: DatapathCanary; judge: CanaryJudge }>();
  if (!cmd.datapathCanary) return out;
  // A side-by-side trial shares the node with another proxy, which has its own canary on the same ClusterIP.
  if (cmd.serviceProxyName) {
    w.log.info({ mode }, 'No datapath canary in a side-by-side trial (--service-proxy-name)');
    return out;
  }
  for (const plan of canaryPlans(families, modeDriver(mode).canaryFamilies, nodeIPs)) {
    const { family } = plan;
    if ('skip' in plan) {
      w.log.info({ mode, family }, `No ${family} datapath canary: ${plan.skip}`);
      continue;
    }
    const judge = new CanaryJudge(w.clock);
    const canary = new DatapathCanary({
      family,
      nodeName,
      listenIP: plan.listenIP,
      clock: w.clock,
      judge,
      syncEpoch: w.syncEpoch,
      programmed: () => w.programmed(family),
      onTransition: (t) => w.onTransition(family, t),
      log: w.log,
      intervalMs: cmd.datapathCanaryMs,
    });
    try {
      await canary.listen();
    } catch (err) {
      w.log.warn(
        { err: (err as Error).message, family, ip: plan.listenIP },
        `No ${family} datapath canary: its listener could not open`,
      );
      continue;
    }
    w.log.info({ family, vip: canary.vip, endpoint: canary.target()?.endpoint.key }, 'Datapath canary listening');
    out.set(family, { canary, judge });
  }
  return out;
}

function watchConfigFile(path: string, onChange: () => void, log: Logger): { close(): void } | null {
  try {
    const w = watch(path, (ev) => {
      if (ev === 'change' || ev === 'rename') onChange();
    });
    w.on('error', (e) => log.warn({ err: e.message }, 'config file watch failed'));
    return w;
  } catch (e) {
    log.warn({ err: (e as Error).message, path }, 'cannot watch config file');
    return null;
  }
}
