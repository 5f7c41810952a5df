import { defineConfig } from "vitest/config";

/**
 * Two projects, run one after the other (`sequence.groupOrder`):
 * - `unit`: every suite but the real-Kubernetes ones, files in parallel;
 *   its `globalSetup` builds the Worker bundle the runtime suites share
 *   (`test/setup/worker-bundle.ts`, cached outside the tree by content);
 * - `e2e`: `*.e2e.test.ts`, each of which starts its own control plane
 *   (etcd, kube-apiserver, kube-controller-manager), one file at a time and
 *   last, so two control planes never share the machine's cores.
 */
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 300_000,
    pool: "forks",
    reporters: ["default", "json"],
    outputFile: { json: ".cache/vitest-report.json" },
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/**/*.test.ts", "shared/**/*.test.ts", "functions/**/*.test.ts"],
          exclude: ["**/node_modules/**", "test/**/*.e2e.test.ts"],
          // the Worker bundle, built by wrangler once per content of its sources (not once per file)
          globalSetup: ["test/setup/worker-bundle.ts"],
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "e2e",
          include: ["test/**/*.e2e.test.ts"],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
