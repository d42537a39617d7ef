import { defineConfig } from 'tsup';

export default defineConfig({
  entry: { index: 'src/index.ts' },
  format: ['esm', 'cjs'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'node20',
  shims: true,
  external: ['@qk/ops', '@qk/cuda-core', '@huggingface/tokenizers', '@huggingface/jinja'],
});
