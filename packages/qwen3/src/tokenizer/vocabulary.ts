/**
 * What a grammar engine needs from a tokenizer to turn "the text may continue with these characters" into "these
 * token ids may come next": every id's piece as the tokenizer's model stores it, and how pieces spell bytes.
 */

/** The model's pieces by id. */
export interface TokenVocabulary {
  /** Each id's piece as stored (`Ġhello` in byte-level BPE); `''` for an id the tokenizer has no token for. */
  readonly pieces: readonly string[];
  /** `byte_level` (GPT-2 style, Qwen3), `byte_fallback` (`<0x0A>` pieces), or `raw` (pieces are the text). */
  readonly encoding: 'byte_level' | 'byte_fallback' | 'raw';
}

/** A tokenizer that can list its pieces (the Hugging Face one can). */
export interface VocabularySource {
  vocabulary(): TokenVocabulary;
}

export function hasVocabulary(tokenizer: unknown): tokenizer is VocabularySource {
  return typeof (tokenizer as Partial<VocabularySource>)?.vocabulary === 'function';
}
