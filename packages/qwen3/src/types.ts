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

/**
 * The weights an engine holds, where it holds them. `format` is that of the decoder projections (q/k/v/o/gate/up/
 * down): `'bf16'` for float ones (in the engine's dtype), else `'int8'` (per output channel) or `'int4'` (groups).
 */
export interface WeightInfo {
  readonly format: 'bf16' | 'int8' | 'int4';
  /** Bytes of the decoder projections: codes, scales and zero-point offsets for quantized ones. */
  readonly projectionBytes: number;
  /** Bytes of the rest, in the float dtype: embedding, LM head (once when tied), norms. */
  readonly otherBytes: number;
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
  /**
   * The generation's last step index (its token limit − 1), when it has one: an engine that queues decode steps
   * ahead of the caller (the megakernel's launches) queues none past it, so the work after the last token is not
   * left for the next generation to wait behind. Leaving it out only costs that wait.
   */
  readonly lastStep?: number;
  // The controls below act before temperature / top-k / top-p (`@qk/ops`' applyLogitControls). Only Engine.choose
  // applies them: `next` refuses parameters that set any of them.
  /** Subtracted once from the logit of every token already generated (OpenAI's presence penalty); 0 is off. */
  readonly presencePenalty?: number;
  /** Subtracted per occurrence from the logit of every generated token (OpenAI's frequency penalty); 0 is off. */
  readonly frequencyPenalty?: number;
  /** HF's repetition penalty over the prompt and the generated tokens (> 0); 1 is off. */
  readonly repetitionPenalty?: number;
  /** Min-p in [0, 1]: drop tokens less likely than `minP` × the most likely one (at the temperature); 0 is off. */
  readonly minP?: number;
  /** Token id → value added to its logit. */
  readonly logitBias?: ReadonlyMap<number, number>;
}

/** The tokens of a generation so far: what the penalties count. The arrays only grow while a generation runs. */
export interface TokenHistory {
  /** The whole prompt (cached prefix included). The repetition penalty reads it. */
  readonly prompt: readonly number[];
  /** The generated tokens so far. Every penalty reads them. */
  readonly generated: readonly number[];
}

/** Per-step inputs of {@link Engine.choose} beyond {@link SamplingParams}. */
export interface StepControls {
  readonly history: TokenHistory;
  /**
   * Allowed tokens (a bitset as `TokenConstraint.nextMask()` returns it: token `t` is bit `t & 31` of word `t >>> 5`;
   * missing words allow nothing), or `null` for every token.
   */
  readonly mask: Uint32Array | null;
  /** Report the chosen token's log-probability and this many (0–20) most likely alternatives; `null` reports none. */
  readonly topLogprobs: number | null;
}

/** A token and its log-probability under the model's own distribution (softmax of the raw logits). */
export interface TokenLogprob {
  readonly id: number;
  readonly logprob: number;
}

/** A chosen token, with its log-probability and the most likely alternatives when they were asked for. */
export interface SampledToken {
  readonly id: number;
  /** `log softmax(logits)[id]` over the model's raw logits (before penalties, bias, mask and temperature). */
  readonly logprob?: number;
  /** The most likely tokens at this step, most likely first (ties: lower id first). */
  readonly topLogprobs?: readonly TokenLogprob[];
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
  /** What the engine holds as weights: the decoder projections' format and the bytes of each part. */
  readonly weightInfo?: WeightInfo;
  /** Runs `ids` at positions `start…`, fills the cache, and returns the last position's logits (f32, `vocabSize`). */
  logits(ids: readonly number[], start: number): Float32Array;
  /**
   * Runs `ids` at positions `start…` and picks the token that follows the last one with `sampling` (on the
   * engine's device where it has one). `step` is the index of the generated token, mixed into the seed.
   */
  next(ids: readonly number[], start: number, sampling: SamplingParams, step: number): number;
  /**
   * {@link next} with the sampling controls: penalties, bias and min-p of `sampling`, the allowed-token mask and
   * log-probabilities of `controls`, applied where the engine samples (on its device). Optional: a generation on an
   * engine without it reads {@link logits} and applies the TypeScript reference.
   */
  choose?(
    ids: readonly number[],
    start: number,
    sampling: SamplingParams,
    step: number,
    controls: StepControls,
  ): SampledToken;
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
  /**
   * The text: a string, or OpenAI-style text parts (`[{ type: 'text', text }]`, joined in order). An assistant
   * message that only calls tools may leave it empty (`''` or `null`).
   */
  readonly content: string | readonly ChatContentPart[] | null;
  /** An earlier assistant turn's thinking (`ChatResult.reasoning`), shown to the template as `reasoning_content`. */
  readonly reasoning?: string;
  /** The tool calls of an earlier assistant turn (`ChatResult.toolCalls`). */
  readonly toolCalls?: readonly ToolCall[];
  /** On a `tool` message: the id of the call it answers (kept for the caller; Qwen3's template orders by position). */
  readonly toolCallId?: string;
}

/** One part of a message's content. Qwen3 reads text only. */
export interface ChatContentPart {
  readonly type: 'text';
  readonly text: string;
}

/** A function the model may call, in OpenAI's shape (what Qwen3's template lists in its `<tools>` block). */
export interface ToolDefinition {
  readonly type: 'function';
  readonly function: {
    /** 1–64 letters, digits, `_`, `-` or `.`. */
    readonly name: string;
    readonly description?: string;
    /** A JSON Schema of the arguments object (default: an object with no properties). */
    readonly parameters?: Readonly<Record<string, unknown>>;
  };
}

/** A call of one of the tools, as the model wrote it inside `<tool_call>…</tool_call>`, arguments validated. */
export interface ToolCall {
  /** Unique per call (`call_…`): a `tool` message answering it carries it as `toolCallId`. */
  readonly id: string;
  readonly name: string;
  /** The arguments, valid against the tool's `parameters` schema. */
  readonly arguments: Readonly<Record<string, unknown>>;
}

/** Options of {@link Qwen3Tokenizer.applyChatTemplate}. */
export interface ChatTemplateOptions {
  /** End with the assistant header so the model continues as the assistant (default `true`). */
  readonly addGenerationPrompt?: boolean;
  /** Qwen3's thinking switch (default `true`, as in the model's template); `false` adds an empty think block. */
  readonly enableThinking?: boolean;
  /** Functions the model may call: the template lists them in its system turn. Default none. */
  readonly tools?: readonly ToolDefinition[];
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
