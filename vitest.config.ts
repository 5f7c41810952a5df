import { defineConfig } from "vitest/config";

/**
 * Two projects, run one after the other (`sequence.groupOrder`):
 * - `unit`: every suite but the real-Kubernetes ones, files in parallel;
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
