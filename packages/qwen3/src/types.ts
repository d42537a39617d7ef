/**
 * The contracts shared by the modules of `@qk/qwen3`: the model configuration, the weights an engine runs, the
 * engine interface that generation drives, and the tokenizer interface. Implementations live in their own modules
 * (config.ts, checkpoint/, engine/, tokenizer/, model.ts).
 */
import type { FloatDType, Tensor } from '@qk/ops';

/** A dense Qwen3 (`Qwen3ForCausalLM`) configuration, in our names; parsed from HF `config.json` or a preset. */
export interface Qwen3Config {
  /** `hidden_size`. */
  readonly hiddenSize: number;
  /** `num_hidden_layers`. */
  readonly numLayers: number;
  /** `num_attention_heads` (query heads). */
  readonly numHeads: number;
  /** `num_key_value_heads`; divides `numHeads`. */
  readonly numKvHeads: number;
  /** `head_dim` (128 in every published Qwen3; not `hiddenSize / numHeads` in general). */
  readonly headDim: number;
  /** `intermediate_size` of the SwiGLU MLP. */
  readonly intermediateSize: number;
  /** `vocab_size` (rows of the embedding and of the LM head). */
  readonly vocabSize: number;
  /** `rope_theta`. */
  readonly ropeTheta: number;
  /** `rms_norm_eps`. */
  readonly rmsNormEps: number;
  /** `tie_word_embeddings`: the LM head is the embedding matrix. */
  readonly tieWordEmbeddings: boolean;
  /** `max_position_embeddings`. */
  readonly maxPositionEmbeddings: number;
  /** `torch_dtype` of the checkpoint, in our dtype names (`'bf16'`, `'f16'`, `'f32'`). */
  readonly torchDtype: FloatDType;
  /** `bos_token_id`, when the config names one. */
  readonly bosTokenId?: number;
  /** `eos_token_id` (one id or several). */
  readonly eosTokenIds: readonly number[];
}

/** Names of the built-in configurations. */
export type PresetName = 'tiny' | '0.6b' | '1.7b' | '4b' | '8b' | '14b' | '32b';

/** The weights of one decoder layer, HF shapes (`[out, in]` for projections). */
export interface LayerWeights<D extends FloatDType = FloatDType> {
  /** `input_layernorm.weight` `[hidden]`. */
  readonly inputNorm: Tensor<D>;
  /** `self_attn.q_proj.weight` `[heads·headDim, hidden]`. */
  readonly q: Tensor<D>;
  /** `self_attn.k_proj.weight` `[kvHeads·headDim, hidden]`. */
  readonly k: Tensor<D>;
  /** `self_attn.v_proj.weight` `[kvHeads·headDim, hidden]`. */
  readonly v: Tensor<D>;
  /** `self_attn.q_norm.weight` `[headDim]`. */
  readonly qNorm: Tensor<D>;
  /** `self_attn.k_norm.weight` `[headDim]`. */
  readonly kNorm: Tensor<D>;
  /** `self_attn.o_proj.weight` `[hidden, heads·headDim]`. */
  readonly o: Tensor<D>;
  /** `post_attention_layernorm.weight` `[hidden]`. */
  readonly postNorm: Tensor<D>;
  /** `mlp.gate_proj.weight` `[intermediate, hidden]`. */
  readonly gate: Tensor<D>;
  /** `mlp.up_proj.weight` `[intermediate, hidden]`. */
  readonly up: Tensor<D>;
  /** `mlp.down_proj.weight` `[hidden, intermediate]`. */
  readonly down: Tensor<D>;
}

/** Every weight of a Qwen3 model, on one device, in one dtype. */
export interface Qwen3Weights<D extends FloatDType = FloatDType> {
  /** `model.embed_tokens.weight` `[vocab, hidden]`. */
  readonly embed: Tensor<D>;
  readonly layers: readonly LayerWeights<D>[];
  /** `model.norm.weight` `[hidden]`. */
  readonly norm: Tensor<D>;
  /** `lm_head.weight` `[vocab, hidden]`; the same tensor object as `embed` when the embeddings are tied. */
  readonly lmHead: Tensor<D>;
}

/** Which implementation runs the forward pass. */
export type EngineName = 'cpu' | 'layered' | 'megakernel';

/** How the next token is chosen. `temperature` 0 means greedy (argmax). */
export interface SamplingParams {
  readonly temperature: number;
  /** Keep the `topK` most likely tokens; 0 keeps all. */
  readonly topK: number;
  /** Keep the smallest set whose probability reaches `topP`; 1 keeps all. */
  readonly topP: number;
  /** Seed of the generation; each step draws from `seed` and the step index, so runs repeat exactly. */
  readonly seed: number;
}

/**
 * A forward-pass implementation with its own KV cache. Positions are absolute: a call with `start = s` and `n`
 * ids writes cache rows `s … s+n−1` and attends over rows `0 … s+n−1`; rows past that are stale and ignored.
 * Calls are synchronous (the work is on the engine's device or the CPU); generation yields between calls.
 */
export interface Engine {
  readonly name: EngineName;
  readonly config: Qwen3Config;
  /** Dtype of the weights and activations. */
  readonly dtype: FloatDType;
  /** Cache rows: the longest prompt + generation this engine can hold. */
  readonly maxContext: number;
  /**
   * `megakernel` only: whether its decode steps, greedy and sampled with top-k 1–64, screen the LM head in int8
   * (bounds on every logit, bf16 recomputation of the rows that can hold the argmax or the top-k: the same tokens,
   * about half the LM head's bytes).
   */
  readonly lmScreen?: boolean;
  /** Runs `ids` at positions `start…`, fills the cache, and returns the last position's logits (f32, `vocabSize`). */
  logits(ids: readonly number[], start: number): Float32Array;
  /**
   * Runs `ids` at positions `start…` and picks the token that follows the last one with `sampling` (on the
   * engine's device where it has one). `step` is the index of the generated token, mixed into the seed.
   */
  next(ids: readonly number[], start: number, sampling: SamplingParams, step: number): number;
  /** Frees the weights' and cache's memory. Further calls throw. */
  dispose(): void;
  /** Engines built from swappable modules (`layered`) list their variants per module kind. */
  variants?(): Readonly<Record<ModuleKind, readonly string[]>>;
  /** Swaps module implementations; returns a function that restores the previous ones. */
  patch?(spec: PatchSpec): () => void;
}

/** Kinds of module that {@link Engine.patch} can swap. */
export type ModuleKind = 'rmsnorm' | 'mlp' | 'rope' | 'attention';

/** Per module kind, the name of a built-in variant (see {@link Engine.variants}) or a user function. */
export type PatchSpec = Partial<Record<ModuleKind, string | ((...args: never[]) => unknown)>>;

/** One chat message for {@link Qwen3Tokenizer.applyChatTemplate}. */
export interface ChatMessage {
  readonly role: 'system' | 'user' | 'assistant' | 'tool';
  readonly content: string;
}

/** Options of {@link Qwen3Tokenizer.applyChatTemplate}. */
export interface ChatTemplateOptions {
  /** End with the assistant header so the model continues as the assistant (default `true`). */
  readonly addGenerationPrompt?: boolean;
  /** Qwen3's thinking switch (default `true`, as in the model's template); `false` adds an empty think block. */
  readonly enableThinking?: boolean;
}

/** Turns ids into text chunks as they arrive, never splitting a UTF-8 character across chunks. */
export interface TextStream {
  /** Adds one id; returns the text that is now complete (often `''`). */
  push(id: number): string;
  /** Returns whatever is still held back (an incomplete character at the very end becomes U+FFFD). */
  flush(): string;
}

/** The Qwen3 tokenizer and chat template. */
export interface Qwen3Tokenizer {
  readonly vocabSize: number;
  /** Ids that end generation: `<|im_end|>`, `<|endoftext|>` and the config's EOS ids. */
  readonly stopIds: ReadonlySet<number>;
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
  applyChatTemplate(messages: readonly ChatMessage[], options?: ChatTemplateOptions): string;
  createStream(): TextStream;
}
