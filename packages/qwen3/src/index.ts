/**
 * `@qk/qwen3`: Qwen3 for Node.js. Load a Hugging Face checkpoint (or a preset with random weights), run it on the
 * CPU reference engine or the CUDA engines, and generate or chat with streaming, stop strings and abort.
 *
 * ```ts
 * import { loadQwen3 } from '@qk/qwen3';
 * const model = await loadQwen3('/models/Qwen3-0.6B');
 * for await (const chunk of model.chat([{ role: 'user', content: 'Hi!' }])) process.stdout.write(chunk);
 * model.dispose();
 * ```
 */

export { promptOpensThinking, type SplitText, ThinkingSplitter } from './chat/thinking.js';
export {
  checkTools,
  type InvalidToolCall,
  type ParsedToolCalls,
  parseToolCalls,
  type ToolChoice,
} from './chat/tools.js';
export type { ChatGeneration, ChatResult, ChatToolOptions } from './chat/turn.js';
export {
  bundledTokenizerDir,
  type CheckpointDescription,
  describeCheckpoint,
  disposeWeights,
  type ExpectedTensor,
  expectedTensors,
  INIT_STD,
  type LoadProgress,
  type LoadWeightsOptions,
  loadWeights,
  type RandomCheckpointSummary,
  type RandomWeightsOptions,
  randomWeights,
  readCheckpointConfig,
  TOKENIZER_FILES,
  type WriteRandomCheckpointOptions,
  writeRandomCheckpoint,
} from './checkpoint/index.js';
export {
  type Comparison,
  compareTeacherForced,
  type ReferenceRun,
  readReference,
  type StepComparison,
} from './compare.js';
export { configToHfJson, isPresetName, PRESETS, parameterCount, parseQwen3Config } from './config.js';
export {
  type CpuEngineOptions,
  checkEngineAvailable,
  createCpuEngine,
  createEngine,
  defaultEngine,
  ENGINE_NAMES,
  ENGINE_PLACEMENT,
  ENGINE_WEIGHT_FORMATS,
  type EngineOptions,
  type EnginePlacement,
  isEngineName,
  type MegakernelEngineOptions,
  megakernelEngineOptions,
  megakernelUnsupported,
} from './engine/index.js';
export {
  createLayeredEngine,
  DEFAULT_PREFILL_CHUNK,
  type LayeredEngineOptions,
} from './engine/layered.js';
export { createMegakernelEngine, megakernelHandoff } from './engine/megakernel/engine.js';
export {
  type MegakernelDims,
  type MegakernelLayer,
  type MegakernelPlan,
  type MegakernelProjection,
  type MegakernelQuantProjection,
  type MegakernelSampling,
  type MegakernelSpec,
  type MegakernelWeightFormat,
  megakernelPlan,
  Qwen3Megakernel,
} from './engine/megakernel/kernel.js';
export { MEGAKERNEL_TRACE_STAGES, type MegakernelTraceSummary } from './engine/megakernel/trace.js';
export {
  checkMegakernelTuning,
  MEGAKERNEL_TUNING_FIELDS,
  type MegakernelTuning,
} from './engine/megakernel/tuning.js';
export type { AttentionModule, MlpModule, Modules, RmsnormModule, RopeModule } from './engine/modules.js';
export {
  type Projection,
  project,
  projectSwiglu,
  type QuantProjection,
  type ZeroPoints,
} from './engine/projections.js';
export {
  QkAbortError,
  QkBusyError,
  QkCheckpointError,
  QkConfigError,
  QkContextError,
  QkLimitError,
  QkMemoryError,
  QkNonFiniteError,
  QkTokenizerError,
} from './errors.js';
export { maskAllows, maskWords, type TokenConstraint } from './generation/constraint.js';
export {
  type FinishReason,
  Generation,
  type GenerationChunk,
  type GenerationResult,
  type GenerationSink,
  type GenerationStats,
} from './generation/generation.js';
export {
  DEFAULT_MAX_TOKENS,
  type GenerateOptions,
  MAX_TOP_LOGPROBS,
  QWEN3_SAMPLING_DEFAULTS,
  type SamplingDefaults,
} from './generation/options.js';
export {
  cachedSnapshot,
  defaultHubCacheDir,
  defaultPullFilter,
  type HubFailure,
  hubEndpoint,
  isHubId,
  type PulledFile,
  type PullOptions,
  type PullProgress,
  type PullResult,
  pullModel,
  QkHubError,
  repoCacheDir,
  resolveHubModel,
} from './hub/index.js';
export {
  type ChatOptions,
  DEFAULT_MAX_CONTEXT,
  type LoadOptions,
  loadQwen3,
  Qwen3Model,
  type Qwen3ModelParts,
} from './model.js';
export {
  compareLogits,
  DEFAULT_GROUP_SIZE,
  disposeQuantizedLayers,
  type LinearError,
  type LogitAgreement,
  linearErrors,
  type QkQuantizationConfig,
  QkQuantizationError,
  type QuantizeCheckpointOptions,
  type QuantizedLayer,
  type QuantizedLinear,
  quantizeCheckpoint,
  quantizeLinears,
  readQuantizationConfig,
  type WeightFormat,
} from './quant/index.js';
export {
  type Checkpoint,
  type CheckpointTensorInfo,
  openCheckpoint,
  openSafetensors,
  type SafetensorsDType,
  type SafetensorsFile,
  type SafetensorsTensorInfo,
  type TensorSource,
  type WritableTensor,
  type WriteSafetensorsOptions,
  type WriteShardedOptions,
  writeSafetensors,
  writeShardedSafetensors,
} from './safetensors/index.js';
export {
  enforceableSchema,
  GrammarConstraint,
  type JsonSchema,
  type StructuredOptions,
} from './structured/index.js';
export {
  bundledTokenizerFiles,
  type LoadTokenizerOptions,
  loadTokenizer,
  TOKENIZER_DIR_ENV,
  type TokenizerFiles,
} from './tokenizer/index.js';
export type {
  ChatContentPart,
  ChatMessage,
  ChatTemplateOptions,
  Engine,
  EngineName,
  LayerWeights,
  ModuleKind,
  PatchSpec,
  PresetName,
  Qwen3Config,
  Qwen3Tokenizer,
  Qwen3Weights,
  SampledToken,
  SamplingParams,
  StepControls,
  TextStream,
  TokenHistory,
  TokenLogprob,
  ToolCall,
  ToolDefinition,
  WeightInfo,
} from './types.js';
export { LIMITS } from './untrusted.js';
