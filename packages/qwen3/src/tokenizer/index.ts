/**
 * The Qwen3 tokenizer, chat template and streaming detokeniser.
 */
export { bundledTokenizerFiles, TOKENIZER_DIR_ENV, type TokenizerFiles } from './files.js';
export { type DecodeFn, IncrementalDecoder } from './stream.js';
export { type LoadTokenizerOptions, loadTokenizer } from './tokenizer.js';
