// Device measurement (v12): the megakernel engine's decode loop without the tokenizer or the event loop, per-token
// host deltas, against bench decode's figure. Usage: node steptime.mjs [positions] [tokens]
import * as cudaCore from '@qk/cuda-core';
import { useCudaBackend } from '@qk/ops';
import { PRESETS } from '/work/main/packages/qwen3/src/config.ts';
import { randomWeights } from '/work/main/packages/qwen3/src/checkpoint/random.ts';
import { createEngine } from '/work/main/packages/qwen3/src/engine/index.ts';

useCudaBackend(cudaCore);
const positions = (process.argv[2] ?? '1,128,1024').split(',').map(Number);
const tokens = Number(process.argv[3] ?? 256);
const config = PRESETS['0.6b'];
const weights = await randomWeights(config, { dtype: 'bf16', device: 'cuda', seed: 0 });
const engine = createEngine('megakernel', config, weights, { maxContext: 4096, vocabLimit: 151669 });
const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 } as any;
const out: any = {};
for (const p of positions) {
  for (let run = 0; run < 3; run++) {
    const prompt = Array.from({ length: p }, (_, i) => (i * 7919 + 13) % 150000);
    let token = engine.next(prompt, 0, greedy, 0);
    const t: number[] = [performance.now()];
    for (let i = 1; i < tokens; i++) {
      token = engine.next([token], p + i - 1, greedy, i);
      t.push(performance.now());
    }
    const d = t.slice(1).map((x, i) => (x - t[i]!) * 1000);
    const sorted = [...d].sort((a, b) => a - b);
    const mean = (t[t.length - 1]! - t[0]!) * 1000 / (tokens - 1);
    out[`${p}-${run}`] = { mean, p10: sorted[Math.floor(d.length * 0.1)], p50: sorted[Math.floor(d.length * 0.5)], p90: sorted[Math.floor(d.length * 0.9)], max: sorted[d.length - 1], first16: d.slice(0, 16).map((x) => Math.round(x)) };
    const buckets: string[] = [];
    for (let i = 0; i + 32 <= d.length; i += 32) buckets.push(`${p + i + 1}:${Math.round(d.slice(i, i + 32).reduce((x, y) => x + y, 0) / 32)}`);
    console.log(`  by position (mean of 32): ${buckets.join(' ')}`);
    console.log(`pos ${p} run ${run}: mean ${mean.toFixed(1)} µs/token, p10 ${sorted[Math.floor(d.length * 0.1)]!.toFixed(1)} p50 ${sorted[Math.floor(d.length * 0.5)]!.toFixed(1)} p90 ${sorted[Math.floor(d.length * 0.9)]!.toFixed(1)}; first: ${d.slice(0, 12).map((x) => Math.round(x)).join(' ')}`);
  }
}
console.log(JSON.stringify(out));
engine.dispose();
