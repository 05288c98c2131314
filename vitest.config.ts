import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 60_000,
    // Two cores: suites that start real servers must not all start at once.
    maxWorkers: 2,
    reporters: process.env.CI ? ['default'] : ['default'],
  },
});
