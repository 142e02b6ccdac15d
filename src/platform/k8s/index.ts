// The Kubernetes sources: load a kubeconfig, then run the informers that feed
// the engine's handlers. See sources.ts for the selectors, reflector.ts for the
// list/watch contract and events.ts for what they publish.
export { loadKubeConfig, SERVICE_ACCOUNT_DIR, type LoadKubeConfigOptions } from './kubeconfig.js';
export { startSources, DEFAULT_BACKOFF, type SourceHandlers, type StartSourcesOptions } from './sources.js';
export { type SourceEvent, sourceEventLevel } from './events.js';
export { ApiStatusError, KubeTransport, type ListWatchTransport } from './transport.js';
export { Reflector, type ReflectorOptions, type ReflectorSink, type BackoffOptions } from './reflector.js';
