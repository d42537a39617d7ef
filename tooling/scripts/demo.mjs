#!/usr/bin/env node
// The quick-start demonstration until `qk generate` exists: a tiny Qwen3-shaped decoder built from the
// @qk/ops reference ops with seeded random weights, run as prefill + greedy decode with a KV cache, then the
// weight-only INT8/INT4 linears compared with bf16 on one projection. The tokens are meaningless (random
// weights); the point is that every op of the real forward pass runs, typed and checked, on any machine.
import {
  argmax,
  attention,
  embedding,
  fusedAddRmsnorm,
  linear,
  linearInt4,
  linearInt8,
  qkNorm,
  quantizeInt4,
  quantizeInt8,
  rmsnorm,
  rope,
  swiglu,
  Tensor,
} from '@qk/ops';
import { closeness } from '@qk/ops/testing';

const config = {
  vocab: 2048,
  hidden: 256,
  layers: 4,
  heads: 8,
  kvHeads: 4,
  headDim: 32,
  ffn: 768,
  eps: 1e-6,
  theta: 1e6,
};
const dtype = 'bf16';
let seed = 1;
const weight = (shape) => Tensor.randn(shape, { dtype, seed: seed++, std: 0.02 });
const ones = (n) => Tensor.ones([n], dtype);

const { vocab, hidden, heads, kvHeads, headDim, ffn } = config;
const model = {
  embed: Tensor.randn([vocab, hidden], { dtype, seed: seed++ }),
  layers: Array.from({ length: config.layers }, () => ({
    inputNorm: ones(hidden),
    q: weight([heads * headDim, hidden]),
    k: weight([kvHeads * headDim, hidden]),
    v: weight([kvHeads * headDim, hidden]),
    qNorm: ones(headDim),
    kNorm: ones(headDim),
    o: weight([hidden, heads * headDim]),
    postNorm: ones(hidden),
    gate: weight([ffn, hidden]),
    up: weight([ffn, hidden]),
    down: weight([hidden, ffn]),
  })),
  norm: ones(hidden),
  lmHead: weight([vocab, hidden]),
};

/** KV cache per layer: [maxContext, kvHeads, headDim], filled up to `length`. */
const maxContext = 64;
const cache = model.layers.map(() => ({
  k: Tensor.zeros([maxContext, kvHeads, headDim], dtype),
  v: Tensor.zeros([maxContext, kvHeads, headDim], dtype),
}));

function forward(ids, start) {
  const n = ids.length;
  const positions = Array.from({ length: n }, (_, i) => start + i);
  let residual = embedding(ids, model.embed);
  let x = rmsnorm(residual, model.layers[0].inputNorm, { eps: config.eps });
  model.layers.forEach((layer, i) => {
    const q = rope(qkNorm(linear(x, layer.q).reshape([n, heads, headDim]), layer.qNorm), {
      positions,
      theta: config.theta,
    });
    const k = rope(qkNorm(linear(x, layer.k).reshape([n, kvHeads, headDim]), layer.kNorm), {
      positions,
      theta: config.theta,
    });
    const v = linear(x, layer.v).reshape([n, kvHeads, headDim]);
    const row = kvHeads * headDim;
    cache[i].k.data.set(k.data, start * row);
    cache[i].v.data.set(v.data, start * row);
    const ctx = attention(q, cache[i].k.slice(0, start + n), cache[i].v.slice(0, start + n), {
      positionOffset: start,
    });
    const attnOut = linear(ctx.reshape([n, heads * headDim]), layer.o);
    ({ out: x, residual } = fusedAddRmsnorm(attnOut, residual, layer.postNorm, { eps: config.eps }));
    const mlp = linear(swiglu(linear(x, layer.gate), linear(x, layer.up)), layer.down);
    const nextNorm = model.layers[i + 1]?.inputNorm ?? model.norm;
    ({ out: x, residual } = fusedAddRmsnorm(mlp, residual, nextNorm, { eps: config.eps }));
  });
  const logits = linear(x.slice(n - 1), model.lmHead);
  return argmax(logits).item();
}

const prompt = [1, 17, 42, 256, 1999, 7, 613, 88];
console.log(
  `qk demo: a ${config.layers}-layer Qwen3-shaped decoder (hidden ${hidden}, ${heads}/${kvHeads} heads, ffn ${ffn}, vocab ${vocab})`,
);
console.log(
  'built from @qk/ops reference ops in bf16 with seeded random weights; token ids are meaningless.\n',
);
let t0 = performance.now();
let next = forward(prompt, 0);
const prefillMs = performance.now() - t0;
const generated = [next];
t0 = performance.now();
for (let pos = prompt.length; generated.length < 24; pos++) {
  next = forward([next], pos);
  generated.push(next);
}
const decodeMs = performance.now() - t0;
console.log(`prompt ids   : ${prompt.join(' ')}`);
console.log(`greedy ids   : ${generated.join(' ')}`);
console.log(`prefill      : ${prompt.length} tokens in ${prefillMs.toFixed(1)} ms`);
console.log(
  `decode       : ${generated.length - 1} tokens in ${decodeMs.toFixed(1)} ms (${(((generated.length - 1) / decodeMs) * 1000).toFixed(1)} tok/s, CPU reference)\n`,
);

const w = Tensor.randn([1024, 1024], { dtype: 'f32', seed: 99 });
const x = Tensor.randn([4, 1024], { dtype: 'f32', seed: 100 });
const exact = linear(x, w);
const int8 = closeness(linearInt8(x, quantizeInt8(w)), exact);
const int4 = closeness(linearInt4(x, quantizeInt4(w, { groupSize: 128 })), exact);
const bf16 = closeness(linear(x.to('bf16'), w.to('bf16')), exact);
console.log('weight-only quantization on a 1024x1024 projection (relative L2 error vs f32):');
console.log(`  bf16 weights     ${bf16.relL2.toExponential(2)}`);
console.log(`  int8 per-channel ${int8.relL2.toExponential(2)}`);
console.log(`  int4 group-128   ${int4.relL2.toExponential(2)}`);
