import { defineConfig } from 'vitest/config';

export default defineConfig({
  // The bin and its bundle loader are CommonJS TypeScript (src/*.cts); Vite's default leaves .cts untransformed.
  oxc: { include: /\.(m?ts|cts|[jt]sx)$/ },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    // Above startHttpBroker's own 30 s wait for "serving", so a slow start fails with its stderr, not a bare hook timeout.
    hookTimeout: 45_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
