// The Kubernetes side of the proxy: load a client configuration
// (kubeconfig.ts), talk to the API server (client.ts, our own small client
// over node:https), and run the informers that feed the engine's handlers
// (sources.ts, reflector.ts). events.ts lists what the sources publish.
export { loadKubeConfig, SERVICE_ACCOUNT_DIR, type ClientConfig, type LoadKubeConfigOptions } from './kubeconfig.js';
export { KubeClient, checkContentType, type KubeClientOptions } from './client.js';
export { startSources, DEFAULT_BACKOFF, type SourceHandlers, type StartSourcesOptions } from './sources.js';
export { type SourceEvent, sourceEventLevel } from './events.js';
export { ApiStatusError, type ListWatchTransport } from './transport.js';
export { Reflector, type ReflectorOptions, type ReflectorSink } from './reflector.js';
export type { BackoffOptions } from './backoff.js';
