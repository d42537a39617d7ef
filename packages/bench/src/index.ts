/** `@qk/bench`: qk's measurement harness, suites, peers and reports (`qk.bench/2`). */
export {
  type DecodeSuiteOptions,
  type E2eModel,
  type E2eOpener,
  type E2eStats,
  HF_DECODE_PEERS,
  HF_PEERS,
  HF_PREFILL_PEERS,
  type HfDecodePeer,
  PATCH_VARIANTS,
  type PatchSuiteOptions,
  type PrefillSuiteOptions,
  promptIds,
  runDecodeSuite,
  runHfPeers,
  runPatchSuite,
  runPrefillSuite,
} from './e2e.js';
export {
  type CpuTimingOptions,
  type GpuTimingOptions,
  measureCopyCeiling,
  measureHostCopyCeiling,
  timeCpu,
  timeGpu,
} from './harness.js';
export { cudaVersionText, gitCommit, hostInfo, machineInfo } from './machine.js';
export { type PeerResult, type PeerRun, peersDir, runTorchPeers, torchStatus } from './peers/torch.js';
export { indexMarkdown, reportMarkdown } from './render/markdown.js';
export { chartSvg } from './render/svg.js';
export { readReport, renderReportDir, writeReports } from './render/write.js';
export {
  chartsFor,
  defaultBackend,
  judgeBar,
  measureCase,
  measureCeiling,
  type OpSuite,
  runOpSuite,
  type SuiteRunOptions,
  skippedReport,
  TORCH_PEERS,
} from './run-op-suite.js';
export {
  assertValidReport,
  BENCH_SCHEMA,
  type BenchBackend,
  type BenchIndex,
  type BenchReport,
  type BenchRow,
  type BenchTable,
  type Ceiling,
  type ChartSpec,
  type MachineInfo,
  type PeerStatus,
  type PeerValue,
  type SchemaProblem,
  validateReport,
} from './schema.js';
export { type ChatStats, type PrefixResult, runPrefixReuse } from './serve/prefix.js';
export { seededWords, soakRequests } from './serve/prompts.js';
export {
  type MemorySample,
  type RequestRecord,
  runSoak,
  type SoakMessage,
  type SoakOptions,
  type SoakRequest,
  type SoakResult,
  sendChatStream,
} from './serve/soak.js';
export {
  checkChatStream,
  type SseEvent,
  SseReader,
  STREAM_ERROR_KINDS,
  type StreamError,
  type StreamErrorKind,
  type StreamExpectation,
  type StreamOutcome,
} from './serve/stream-check.js';
export {
  divergentReplies,
  PREFIX_TTFT_BAR,
  runServeSuite,
  SERVED_SPEED_BAR,
  type ServeSuiteOptions,
  type ServeTarget,
  type VariantComparison,
  variantComparison,
} from './serve/suite.js';
export { type Summary, summarize } from './stats.js';
export {
  CONTROLS_CASES,
  runStructuredSuite,
  STRUCTURED_BARS,
  STRUCTURED_SCHEMAS,
  type StructuredDraw,
  type StructuredModel,
  type StructuredStats,
  type StructuredSuiteOptions,
} from './structured.js';
export { gemvSuite, OP_SUITES, OP_SUITES_BY_NAME, opsSuite } from './suites/index.js';
export {
  type BarSpec,
  type OpCase,
  type PeerSpec,
  randTensor,
  rotationsFor,
  type SuiteContext,
  suiteContext,
} from './suites/op-case.js';
