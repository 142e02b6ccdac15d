// Where the running proxy's Services, EndpointSlices, Node and ServiceCIDRs
// come from: the API server (kubeconfig / in-cluster, the informers in
// src/platform/k8s) or, with --manifests DIR, a folder of manifests
// (src/platform/manifests). Both feed the same handlers.
import type { Node } from '../core/api.js';
import { featureGateEnabled } from '../core/config/features.js';
import type { EventSink } from '../platform/eventrecorder.js';
import { checkContentType, KubeClient, loadKubeConfig, startSources, type SourceEvent } from '../platform/k8s/index.js';
import type { Logger } from '../platform/logger.js';
import type { ManifestHandlers } from '../platform/manifests/source.js';
import { fetchNode } from './node.js';
import type { RunCommand } from './options.js';

export type ProxyHandlers = ManifestHandlers;

export interface ProxySource {
  /** This proxy's Node at start-up (null: not found; the proxy starts anyway). */
  node(signal: AbortSignal): Promise<Node | null>;
  /** Feed the handlers until the signal aborts. */
  run(handlers: ProxyHandlers, signal: AbortSignal): Promise<void>;
  /** Where Kubernetes Events go (API server only). */
  readonly eventSink?: EventSink;
  /** Release connections (after run's promise settled). */
  close?(): void;
}

function logSourceEvent(log: Logger, ev: SourceEvent): void {
  switch (ev.type) {
    case 'error':
      log.warn(ev, 'watch error; will retry');
      break;
    case 'expired':
      log.info(ev, 'resourceVersion expired; relisting');
      break;
    case 'behind':
      log.info(ev, 'API server behind our resourceVersion; relisting with a consistent read');
      break;
    case 'watchListUnavailable':
      log.info(ev, 'Data could not be fetched in watch-list mode; falling back to a list');
      break;
    case 'reachable':
      log.info(ev, 'API server reachable again; reconnecting');
      break;
    case 'handlerError':
      log.error(ev, 'event handler failed');
      break;
    case 'backoff':
      log.debug(ev, 'backing off');
      break;
    default:
      log.debug(ev, `source ${ev.type}`);
  }
}

/** The source the command line asks for; null after logging why it cannot be opened. */
export async function openSource(cmd: RunCommand, nodeName: string, log: Logger): Promise<ProxySource | null> {
  if (cmd.manifestsDir) {
    try {
      // Loaded only in this mode: the manifest parser is not needed with an API server.
      const { ManifestSource } = await import('../platform/manifests/source.js');
      const m = await ManifestSource.open({
        dir: cmd.manifestsDir,
        nodeName,
        serviceProxyName: cmd.serviceProxyName ?? '',
        log,
      });
      log.info(
        { dir: cmd.manifestsDir },
        'Standalone mode: reading Services, EndpointSlices and the Node from manifests',
      );
      return { node: async () => m.node(), run: (handlers, signal) => m.run(handlers, signal) };
    } catch (e) {
      log.error({ err: (e as Error).message }, 'Cannot read the manifest folder');
      return null;
    }
  }
  let client: KubeClient;
  try {
    client = connectClient(cmd, log);
  } catch (e) {
    log.error({ err: (e as Error).message }, 'Failed to load Kubernetes client configuration');
    return null;
  }
  return {
    node: (signal) => fetchNode(client, nodeName, log, signal),
    run: (handlers, signal) =>
      startSources({
        client,
        nodeName,
        signal,
        resyncMs: cmd.timing.configSyncPeriodMs,
        serviceProxyName: cmd.serviceProxyName ?? '',
        watchList: featureGateEnabled(cmd.resolved.featureGates, 'WatchListClient'),
        handlers,
        onEvent: (ev) => logSourceEvent(log, ev),
      }),
    eventSink: client,
    close: () => client.close(),
  };
}

/** The API client from --kubeconfig/--master/in-cluster and clientConnection (qps, burst, contentType). */
function connectClient(cmd: RunCommand, log: Logger): KubeClient {
  const cc = cmd.resolved.clientConnection;
  const { note } = checkContentType(cc.contentType);
  if (note) log.info(note);
  const config = loadKubeConfig({ kubeconfigPath: cc.kubeconfig || undefined, master: cmd.master });
  log.info({ server: config.server, source: config.source, qps: cc.qps, burst: cc.burst }, 'Kubernetes API client');
  return new KubeClient(config, { qps: cc.qps, burst: cc.burst });
}
