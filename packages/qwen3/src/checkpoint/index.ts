/** Qwen3 checkpoints: the expected tensors, loading weights, random weights, and whole checkpoint directories. */
export {
  bundledTokenizerDir,
  type CheckpointDescription,
  describeCheckpoint,
  type RandomCheckpointSummary,
  readCheckpointConfig,
  TOKENIZER_FILES,
  type WriteRandomCheckpointOptions,
  writeRandomCheckpoint,
} from './files.js';
export { disposeWeights, type ExpectedTensor, expectedTensors, summarizeNames } from './layout.js';
export { assertCheckpointMatches, type LoadProgress, type LoadWeightsOptions, loadWeights } from './load.js';
export {
  INIT_STD,
  type RandomTensor,
  type RandomTensorsOptions,
  type RandomWeightsOptions,
  randomTensorBytes,
  randomTensors,
  randomWeights,
} from './random.js';
