export {
  cachedSnapshot,
  defaultHubCacheDir,
  hubEndpoint,
  isHubId,
  repoCacheDir,
} from './cache.js';
export {
  defaultPullFilter,
  type HubFailure,
  type PulledFile,
  type PullOptions,
  type PullProgress,
  type PullResult,
  pullModel,
  QkHubError,
  resolveHubModel,
} from './download.js';
