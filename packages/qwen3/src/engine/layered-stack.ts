/**
 * The layered kernels that both GPU engines run on: the Qwen3 forward pass as one CUDA kernel per module over the
 * weights and KV cache on the GPU, driven from TypeScript. The `layered` engine decodes with it; the `megakernel`
 * engine prefills with it, and decodes with it from its hand-off position on.
 *
 * A prompt runs as one prefill (GEMMs and the flash prefill kernel over all its tokens); each decode step after it is a
 * CUDA graph captured once and replayed, so no JS-to-native crossing sits between its kernels, and each kernel is a
 * programmatic dependent launch of the one before (it is scheduled, and starts pulling its weights into L2, while
 * that one finishes). The step reads its token id, position and cache length from a small device tensor that the
 * host rewrites before each replay, which is what lets one graph serve many positions. Its attention is sized for a
 * bucket of cache rows (a power of two ≥ 256 holding the position, at most `maxContext`): the split-KV kernel cuts
 * that many rows into chunks, so a short context does not pay for merging the chunks of the whole cache. One graph
 * is captured per bucket reached, on first use (measured on an H100, Qwen3-0.6B at position 128: 1,056 µs per
 * step attending over a 4,353-row cache, 1,024 µs over a 256-row bucket).
 *
 * With the built-in fused modules a decode layer is seven kernels: QKV GEMV (with the residual add and RMSNorm
 * folded in), QK-norm + RoPE + KV append, attention (chunks and merge), O GEMV, gate/up GEMV (add + RMSNorm in
 * front, SwiGLU behind), down GEMV. Patching any of RMSNorm, MLP or RoPE to another variant runs the modules
 * one by one instead.
 *
 * The KV cache is one `[maxContext, kvHeads, headDim]` tensor for K and one for V per layer (row = position), the
 * layout the decode kernels and the megakernel read. The q/k/v and gate/up projections are stored fused
 * (`[q;k;v]`, `[gate;up]`).
 *
 * With `quantized` layers (INT8, INT4, AWQ/GPTQ repacked) the projections stay quantized on the GPU and run through
 * `linearInt8` / `linearInt4` in prefill and decode alike; a decode step then runs nine kernels per layer instead of
 * seven, still one captured graph (projections.ts says how the fused steps map onto quantized ones). The megakernel
 * streams bf16 weights only and refuses them.
 */
import {
  attentionWorkspace,
  CudaGraph,
  embedding,
  type FloatDType,
  linear,
  QkOutOfMemoryError,
  qkNormRopeAppend,
  rmsnormLinear,
  sample,
  scatterRows,
  Tensor,
} from '@qk/ops';
import { disposeQuantizedLayers, type QuantizedLayer } from '../quant/quantize.js';
import type { EngineName, PatchSpec, Qwen3Config, Qwen3Weights, WeightInfo } from '../types.js';
import { engineOutOfMemory, prefillOutOfMemory } from './common.js';
import type { DecodeLane } from './decode-queue.js';
import type { LayeredSettings } from './layered-options.js';
import { defaultModules, type Modules, resolvePatch } from './modules.js';
import {
  buildLayerProjections,
  type LayerProjections,
  normProject,
  project,
  projectionTensors,
  weightInfo,
} from './projections.js';

type T = Tensor<FloatDType>;

/** A decoder layer: its projections (float or quantized; q|k|v and gate|up fused, with views), norms and cache. */
export interface Layer extends LayerProjections {
  inputNorm: T;
  qNorm: T;
  kNorm: T;
  postNorm: T;
  kCache: T;
  vCache: T;
}

/** Every tensor a layer holds, views included. */
function layerTensors(l: Layer): Tensor[] {
  const { qkv, q, k, v, o, gateUp, gate, up, down, ...rest } = l;
  return [...[qkv, q, k, v, o, gateUp, gate, up, down].flatMap(projectionTensors), ...Object.values(rest)];
}

/**
 * `f`'s result, with every tensor it passed through `view` disposed when `f` returns or throws: a view keeps its
 * storage alive until disposed, and one left to the garbage collector holds GPU memory it cannot see.
 */
export function withViews<R>(f: (view: <X extends Tensor>(t: X) => X) => R): R {
  const views: Tensor[] = [];
  try {
    return f((t) => {
      views.push(t);
      return t;
    });
  } finally {
    for (const v of views) v.dispose();
  }
}

/** The one element of a result tensor, which is then freed (not left to the garbage collector's finalizer). */
export function itemOf(t: Tensor): number {
  try {
    return t.item();
  } finally {
    t.dispose();
  }
}

/** Decode-step buffers: everything a captured step reads or writes, allocated once. */
interface StepBuffers {
  /** i32 `[3]`: token id, its position, the cache length after it (position + 1); views below. */
  state: Tensor<'i32'>;
  id: Tensor<'i32'>;
  position: Tensor<'i32'>;
  length: Tensor<'i32'>;
  /** The residual stream; `residualAlt` is its other half in the fused step (see decodeFused). */
  residual: T;
  residualAlt: T;
  x: T;
  qkv: T;
  q: T;
  k: T;
  attn: T;
  o: T;
  /** SwiGLU activations `[1, ffn]` (fused step). */
  h: T;
  mlp: T;
  logits: T;
  next: Tensor<'i32'>;
}

/** The layered kernels over one model's weights and KV cache (see the module header). */
export interface LayeredStack extends LayeredSettings {
  readonly config: Qwen3Config;
  readonly dtype: FloatDType;
  readonly embed: T;
  readonly norm: T;
  readonly lmHead: T;
  readonly layers: readonly Layer[];
  readonly weightInfo: WeightInfo;
  /** The stack's float weights by the cpu engine's names for them (a quantized projection: its scales). */
  namedWeights(): Generator<readonly [string, Tensor]>;
  /** The greedy token of a `[1, vocab]` logits row, −1 where the row is refused (NaN or +∞, or all −∞). */
  greedyToken(logits: T): number;
  /**
   * Queues one decode step of `id` at `position` through its bucket's captured graph (capturing it on first use);
   * returns its logits `[1, vocab]` (the step's buffer) and its greedy token on the device.
   */
  decode(id: number, position: number): { readonly logits: T; readonly next: Tensor<'i32'> };
  /**
   * Decode steps in the captured graph, as the decode queue runs them: one greedy step at a time, queued ahead only
   * when its bucket's graph is already captured.
   */
  readonly decodeLane: DecodeLane;
  /**
   * Prefill of `ids` at `start…`, at most `prefillChunk` tokens per pass: fills the cache; returns the last
   * position's logits `[1, vocab]` (a new tensor). Out of memory, throws the prefill's own error.
   */
  prefill(ids: readonly number[], start: number): T;
  /**
   * One prefill pass over `ids` at `start…` (a chunk of a prompt of `promptTokens` tokens) that returns nothing. Out
   * of memory, throws the prefill's own error.
   */
  prefillPart(ids: readonly number[], start: number, promptTokens: number): void;
  /** Swaps module implementations (see {@link Engine.patch}); returns what puts the previous ones back. */
  patch(spec: PatchSpec): () => void;
  /** Frees the captured graphs (the next decode step of each bucket captures its graph again). */
  releaseGraphs(): void;
  /**
   * For an engine whose making failed after the stack was made: frees what the stack allocated (not the caller's
   * weights) and throws `e`, an out-of-memory as the engine's own error.
   */
  fail(e: unknown): never;
  /** Frees the step buffers, the layers and the weights (after {@link releaseGraphs}). */
  dispose(): void;
}

/**
 * Builds the layered kernels' state over `weights` (which it takes ownership of) for engine `name`: the fused
 * projections, the KV cache and the attention workspace. Frees what it allocated when that fails; an out-of-memory
 * becomes the engine's own error (what to make smaller).
 */
export function createLayeredStack(
  op: string,
  name: EngineName,
  config: Qwen3Config,
  weights: Qwen3Weights,
  settings: LayeredSettings,
  quantized: readonly QuantizedLayer[] | undefined,
): LayeredStack {
  const { maxContext, prefillChunk, vocabLimit } = settings;
  const { hiddenSize: hidden, numHeads: H, numKvHeads: KV, headDim: D, vocabSize } = config;
  const dtype = weights.embed.dtype;
  const eps = config.rmsNormEps;
  const theta = config.ropeTheta;

  const target = { device: 'cuda' as const, dtype, shared: new Map<string, T>() };
  const { embed, norm, lmHead } = weights;
  const layers: Layer[] = [];
  /** What this stack allocated so far: freed when making the rest fails (the caller frees the weights it gave). */
  const own = new Set<Tensor>();
  function fail(e: unknown): never {
    for (const t of own) t.dispose();
    for (const t of target.shared.values()) t.dispose();
    if (!(e instanceof QkOutOfMemoryError)) throw e;
    const cacheBytes = 2 * config.numLayers * maxContext * KV * D * (dtype === 'f32' ? 4 : 2);
    throw engineOutOfMemory(op, name, e, { maxContext, bytes: cacheBytes });
  }
  let workspace: Tensor<'u8'>;
  try {
    for (const [i, w] of weights.layers.entries()) {
      const projections = buildLayerProjections(w, quantized?.[i], target);
      // Float layers: the fused q|k|v and gate|up are copies (o and down stay the caller's); quantized: all copies.
      // Their views hold the memory too (a view retains its buffer), so they go with them.
      const { o, down, ...fused } = projections;
      const made = quantized === undefined ? Object.values(fused) : Object.values(projections);
      for (const t of made.flatMap(projectionTensors)) own.add(t);
      const kCache = Tensor.empty([maxContext, KV, D], dtype, 'cuda');
      own.add(kCache);
      const vCache = Tensor.empty([maxContext, KV, D], dtype, 'cuda');
      own.add(vCache);
      layers.push({
        ...projections,
        inputNorm: w.inputNorm,
        qNorm: w.qNorm,
        kNorm: w.kNorm,
        postNorm: w.postNorm,
        kCache,
        vCache,
      });
    }
    workspace = attentionWorkspace(H, D, maxContext);
    own.add(workspace);
  } catch (e) {
    fail(e);
  }
  // The stack now holds device copies of the quantized projections.
  if (quantized !== undefined) disposeQuantizedLayers(quantized);

  let table = defaultModules();
  let step: StepBuffers | null = null;
  /** Captured decode steps by bucket of cache rows (see {@link decodeRows}). */
  const graphs = new Map<number, CudaGraph>();
  /** The cache rows the decode step being run or captured attends over. */
  let stepRows = maxContext;

  function* namedWeights(): Generator<readonly [string, Tensor]> {
    yield ['embed', embed];
    for (const [i, l] of layers.entries()) {
      for (const key of ['inputNorm', 'qNorm', 'kNorm', 'postNorm'] as const)
        yield [`layers[${i}].${key}`, l[key]];
      for (const key of ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const) {
        for (const t of projectionTensors(l[key])) yield [`layers[${i}].${key}`, t];
      }
    }
    yield ['norm', norm];
    yield ['lmHead', lmHead];
  }

  const greedyToken = (logits: T): number =>
    withViews((view) =>
      itemOf(
        sample(view(view(logits.reshape([vocabSize])).slice(0, vocabLimit)), {
          temperature: 0,
          checkIds: false,
        }),
      ),
    );

  /** QK-norm + RoPE of one q|k|v projection's q and k heads into `q`, k and v appended at `positions`. */
  function appendAttentionInputs(layer: Layer, qkv: T, positions: Tensor<'i32'>, q: T): void {
    qkNormRopeAppend(qkv, layer.qNorm, layer.kNorm, {
      qHeads: H,
      kvHeads: KV,
      positions,
      theta,
      eps,
      out: q,
      kCache: layer.kCache,
      vCache: layer.vCache,
    });
  }

  /**
   * The layers over `tokens` tokens already embedded in `b.residual`, ending with the final norm in `b.x`. A
   * decode step (`kvLength` set) attends over the whole cache up to the device-side length; a prefill over the
   * rows `0 … start + tokens − 1`.
   */
  function runLayers(
    m: Modules,
    b: Pick<StepBuffers, 'position' | 'residual' | 'x' | 'q' | 'k' | 'attn' | 'o' | 'mlp'> & {
      qkv: T | null;
    },
    tokens: number,
    start: number,
    kvLength: Tensor<'i32'> | null,
  ): void {
    const rows = kvLength === null ? start + tokens : stepRows;
    m.rmsnorm({
      x: b.residual,
      residual: null,
      weight: layers[0]!.inputNorm,
      eps,
      out: b.x,
      residualOut: b.residual,
    });
    // Each layer's views and per-call projections are disposed when the layer ends: a view keeps its storage alive
    // until disposed, and one left to the garbage collector would hold a prefill buffer's GPU memory long after the
    // prefill (the queued kernels still run: the allocator reuses freed blocks in stream order).
    layers.forEach((layer, i) => {
      withViews((own) => {
        if (table.names.rope === 'fused') {
          // One projection over the fused [q; k; v] weight, then one kernel: QK-norm + RoPE of q and k, k and v
          // appended to the cache.
          const qkv = project(b.x, layer.qkv, tokens === 1 ? b.qkv! : undefined);
          appendAttentionInputs(layer, qkv, b.position, b.q);
          if (tokens > 1) qkv.dispose();
        } else {
          // One token: one GEMV over the fused [q; k; v] weight, then views of its output. Several: three GEMMs.
          let qIn: T;
          let kIn: T;
          let vIn: T;
          if (tokens === 1) {
            project(b.x, layer.qkv, b.qkv!);
            const heads = b.qkv!.reshape([H + 2 * KV, D]);
            own(heads);
            qIn = own(own(heads.slice(0, H)).reshape([1, H, D]));
            kIn = own(own(heads.slice(H, H + KV)).reshape([1, KV, D]));
            vIn = own(own(heads.slice(H + KV)).reshape([1, KV, D]));
          } else {
            // The projections' own tensors as well as their views.
            qIn = own(own(project(b.x, layer.q)).reshape([tokens, H, D]));
            kIn = own(own(project(b.x, layer.k)).reshape([tokens, KV, D]));
            vIn = own(own(project(b.x, layer.v)).reshape([tokens, KV, D]));
          }
          m.rope({ x: qIn, normWeight: layer.qNorm, positions: b.position, theta, eps, out: b.q });
          m.rope({ x: kIn, normWeight: layer.kNorm, positions: b.position, theta, eps, out: b.k });
          scatterRows(layer.kCache, b.k, b.position);
          scatterRows(layer.vCache, vIn, b.position);
        }
        m.attention({
          q: b.q,
          k: own(layer.kCache.slice(0, rows)),
          v: own(layer.vCache.slice(0, rows)),
          kvLength,
          positionOffset: start,
          workspace,
          out: b.attn,
        });
        project(own(b.attn.reshape([tokens, H * D])), layer.o, b.o);
        m.rmsnorm({
          x: b.o,
          residual: b.residual,
          weight: layer.postNorm,
          eps,
          out: b.x,
          residualOut: b.residual,
        });
        m.mlp({ x: b.x, gateUp: layer.gateUp, gate: layer.gate, up: layer.up, down: layer.down, out: b.mlp });
        const nextNorm = layers[i + 1]?.inputNorm ?? norm;
        m.rmsnorm({
          x: b.mlp,
          residual: b.residual,
          weight: nextNorm,
          eps,
          out: b.x,
          residualOut: b.residual,
        });
      });
    });
  }

  /** Whether the decode step can run {@link decodeFused}: the built-in fused RMSNorm, MLP and RoPE. */
  function fullyFused(): boolean {
    const { names } = table;
    return names.rmsnorm === 'fused' && names.mlp === 'fused' && names.rope === 'fused';
  }

  /**
   * The decode step with every RMSNorm folded into the GEMV after it (seven kernels per layer): the GEMV blocks
   * normalise the 1-row input themselves, and the residual add rides along, written once by one block. The add's
   * output cannot overwrite the input every block is still reading, so the residual stream alternates between
   * `residual` (embedding row; the sum before each layer's QKV) and `residualAlt` (the sum before each MLP).
   */
  function decodeFused(b: StepBuffers): void {
    const m = table.modules;
    layers.forEach((layer, i) => {
      // `b.x` is free in this step: a quantized projection normalises its input into it (see normProject).
      if (i === 0) normProject(b.residual, layer.inputNorm, layer.qkv, { eps, out: b.qkv, normed: b.x });
      else {
        normProject(b.mlp, layer.inputNorm, layer.qkv, {
          eps,
          residual: b.residualAlt,
          residualOut: b.residual,
          out: b.qkv,
          normed: b.x,
        });
      }
      appendAttentionInputs(layer, b.qkv, b.position, b.q);
      withViews((view) => {
        m.attention({
          q: b.q,
          k: view(layer.kCache.slice(0, stepRows)),
          v: view(layer.vCache.slice(0, stepRows)),
          kvLength: b.length,
          positionOffset: 0,
          workspace,
          out: b.attn,
        });
        project(view(b.attn.reshape([1, H * D])), layer.o, b.o);
      });
      normProject(b.o, layer.postNorm, layer.gateUp, {
        eps,
        residual: b.residual,
        residualOut: b.residualAlt,
        glu: true,
        out: b.h,
        normed: b.x,
      });
      project(b.h, layer.down, b.mlp);
    });
    rmsnormLinear(b.mlp, norm, lmHead, { eps, residual: b.residualAlt, out: b.logits });
  }

  function stepBuffers(): StepBuffers {
    if (step !== null) return step;
    const state = Tensor.empty([3], 'i32', 'cuda');
    const logits = Tensor.empty([1, vocabSize], dtype, 'cuda');
    step = {
      state,
      id: state.slice(0, 1),
      position: state.slice(1, 2),
      length: state.slice(2, 3),
      residual: Tensor.empty([1, hidden], dtype, 'cuda'),
      residualAlt: Tensor.empty([1, hidden], dtype, 'cuda'),
      x: Tensor.empty([1, hidden], dtype, 'cuda'),
      qkv: Tensor.empty([1, (H + 2 * KV) * D], dtype, 'cuda'),
      q: Tensor.empty([1, H, D], dtype, 'cuda'),
      k: Tensor.empty([1, KV, D], dtype, 'cuda'),
      attn: Tensor.empty([1, H, D], dtype, 'cuda'),
      o: Tensor.empty([1, hidden], dtype, 'cuda'),
      h: Tensor.empty([1, config.intermediateSize], dtype, 'cuda'),
      mlp: Tensor.empty([1, hidden], dtype, 'cuda'),
      logits,
      next: Tensor.empty([], 'i32', 'cuda'),
    };
    return step;
  }

  /** The decode step on the step buffers: embed `state.id`, the layers, LM head, argmax into `next`. */
  function decodeStep(): void {
    const b = stepBuffers();
    embedding(b.id, embed, { out: b.residual });
    if (fullyFused()) decodeFused(b);
    else {
      runLayers(table.modules, b, 1, 0, b.length);
      linear(b.x, lmHead, { out: b.logits });
    }
    // `sample`'s greedy path is the argmax kernel that also refuses the row (id −1) when it holds NaN or +∞: the
    // same read of the logits, so the non-finite check is free (see nonfinite.ts).
    withViews((view) =>
      sample(view(view(b.logits.reshape([vocabSize])).slice(0, vocabLimit)), {
        temperature: 0,
        out: b.next,
        checkIds: false,
      }),
    );
  }

  /** The cache rows a decode step at `position` attends over: a power of two ≥ 256 above it, at most maxContext. */
  function decodeRows(position: number): number {
    let rows = 256;
    while (rows <= position) rows *= 2;
    return Math.min(rows, maxContext);
  }

  /** Runs one decode step at `position` through its bucket's captured graph (capturing it on first use). */
  function decode(id: number, position: number): StepBuffers {
    const b = stepBuffers();
    b.state.copyFrom(Tensor.fromStorage(Int32Array.of(id, position, position + 1), [3], 'i32'));
    stepRows = decodeRows(position);
    const graph = graphs.get(stepRows);
    if (graph === undefined) {
      decodeStep(); // eager first: warms the allocator's cache and any lazily built kernel state
      graphs.set(stepRows, CudaGraph.capture(decodeStep));
    } else {
      graph.replay();
    }
    return b;
  }

  /** `run()`, with a device out-of-memory turned into the prefill's own error (what to make smaller). */
  function prefillOrExplain<R>(run: () => R, tokens: number): R {
    try {
      return run();
    } catch (e) {
      if (!(e instanceof QkOutOfMemoryError)) throw e;
      throw prefillOutOfMemory(op, e, { tokens, chunk: prefillChunk });
    }
  }

  /** One prefill pass over `ids` at `start…`; with `logits`, returns the last position's logits (a new tensor). */
  function prefillPass(ids: readonly number[], start: number, logits: boolean): T | null {
    const n = ids.length;
    const positions = Tensor.fromStorage(
      Int32Array.from(ids, (_, i) => start + i),
      [n],
      'i32',
    ).to('cuda');
    const residual = embedding(ids, embed);
    const buffers = {
      position: positions,
      residual,
      x: Tensor.empty([n, hidden], dtype, 'cuda'),
      q: Tensor.empty([n, H, D], dtype, 'cuda'),
      k: Tensor.empty([n, KV, D], dtype, 'cuda'),
      attn: Tensor.empty([n, H, D], dtype, 'cuda'),
      o: Tensor.empty([n, hidden], dtype, 'cuda'),
      mlp: Tensor.empty([n, hidden], dtype, 'cuda'),
    };
    try {
      runLayers(table.modules, { ...buffers, qkv: null }, n, start, null);
      return logits ? withViews((view) => linear(view(buffers.x.slice(n - 1)), lmHead)) : null;
    } finally {
      for (const t of Object.values(buffers)) t.dispose();
    }
  }

  function prefill(ids: readonly number[], start: number): T {
    const n = ids.length;
    for (let c = 0; c + prefillChunk < n; c += prefillChunk) {
      prefillPass(ids.slice(c, c + prefillChunk), start + c, false);
    }
    const last = Math.floor((n - 1) / prefillChunk) * prefillChunk;
    return prefillPass(ids.slice(last), start + last, true)!;
  }

  function releaseGraphs(): void {
    for (const g of graphs.values()) g.dispose();
    graphs.clear();
  }

  return {
    config,
    dtype,
    maxContext,
    prefillChunk,
    vocabLimit,
    embed,
    norm,
    lmHead,
    layers,
    weightInfo: weightInfo(layers, [
      embed,
      lmHead,
      norm,
      ...layers.flatMap((l) => [l.inputNorm, l.qNorm, l.kNorm, l.postNorm]),
    ]),
    namedWeights,
    greedyToken,
    decode,
    decodeLane: {
      queue(id, position) {
        decode(id, position);
        return 1;
      },
      token: () => stepBuffers().next.item(),
      runsAhead: (position, draw) => draw === null && graphs.has(decodeRows(position)),
    },
    prefill: (ids, start) => prefillOrExplain(() => prefill(ids, start), ids.length),
    prefillPart(ids, start, promptTokens) {
      prefillOrExplain(() => prefillPass(ids, start, false), promptTokens);
    },
    patch(spec) {
      const previous = table;
      table = resolvePatch(table, spec);
      releaseGraphs();
      return () => {
        table = previous;
        releaseGraphs();
      };
    },
    releaseGraphs,
    fail,
    dispose() {
      if (step !== null) for (const t of Object.values(step)) t.dispose();
      const seen = new Set<Tensor>();
      for (const l of layers) for (const t of layerTensors(l)) seen.add(t);
      for (const t of [embed, norm, lmHead, workspace]) seen.add(t);
      for (const t of seen) t.dispose();
    },
  };
}
