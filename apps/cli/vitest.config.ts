import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    reporters: ['default', 'json'],
    outputFile: { json: 'test-results/vitest.json' },
    testTimeout: 60_000,
    // Hooks start servers and load tiny models: seconds on a loaded 2-core CI machine, past the 10 s default.
    hookTimeout: 60_000,
  },
});
