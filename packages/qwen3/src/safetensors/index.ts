/** Safetensors: validated reading (one file or a sharded checkpoint) and streaming writing. */
export {
  type Checkpoint,
  type CheckpointTensorInfo,
  INDEX_FILE_NAME,
  openCheckpoint,
  SINGLE_FILE_NAME,
} from './checkpoint.js';
export {
  floatDTypeOf,
  isSafetensorsDType,
  type RawTensor,
  SAFETENSORS_DTYPE_BYTES,
  type SafetensorsDType,
  type SafetensorsTensorInfo,
  safetensorsDTypeOf,
  type TensorSpec,
} from './format.js';
export { openSafetensors, type SafetensorsFile } from './reader.js';
export {
  DEFAULT_MAX_SHARD_BYTES,
  type ShardedWriteResult,
  shardFileName,
  type TensorEntry,
  type TensorSource,
  type WritableTensor,
  type WriteProgress,
  type WriteSafetensorsOptions,
  type WriteShardedOptions,
  writeSafetensors,
  writeShardedSafetensors,
} from './writer.js';
