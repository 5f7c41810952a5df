import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "shared/**/*.test.ts", "functions/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 300_000,
    pool: "forks",
    reporters: ["default", "json"],
    outputFile: { json: ".cache/vitest-report.json" },
  },
});
