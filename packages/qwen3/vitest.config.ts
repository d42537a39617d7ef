import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    reporters: ['default', 'json'],
    outputFile: { json: 'test-results/vitest.json' },
    testTimeout: 60_000,
    // Hooks load tiny models and tokenizer tables: seconds on a loaded 2-core CI machine, past the 10 s default.
    hookTimeout: 60_000,
  },
});
