import { defineConfig } from "vitest/config";

/** Suites that run a real runtime or process: workerd, the Lambda artifact, the proxy over TLS, npm scripts, the CLI, helm and kubeconform, a real Prometheus (`*.real.test.ts`). */
const INTEGRATION = [
  "test/**/*.worker.test.ts",
  "test/**/*.lambda.test.ts",
  "test/**/*.contract.test.ts",
  "test/**/*.runtimes.test.ts",
  "test/proxy/*.test.ts",
  "test/runtimes/build.test.ts",
  "test/project/demo.test.ts",
  "test/project/first-hour.test.ts",
  "test/project/cli.test.ts",
  "test/project/docs.commands.test.ts",
  "test/project/infra.test.ts",
  "test/**/*.real.test.ts",
  "test/tier/dynamodb-tier.artifact.test.ts",
];
/** Suites that compare with the real Kubernetes Go code (k8s.io/apimachinery, k8s.io/apiserver). */
const ORACLES = ["test/**/*.oracle.test.ts"];
/** Suites that start a real control plane (etcd, kube-apiserver, kube-controller-manager). */
const E2E = ["test/**/*.e2e.test.ts"];

/**
 * Five projects (`npx vitest run --project <name>` runs one):
 * - `unit`: in-process suites (fakes on 127.0.0.1 included), files in parallel;
 * - `integration`: {@link INTEGRATION}; its `globalSetup` builds the Worker
 *   bundle the runtime suites share (`test/setup/worker-bundle.ts`, cached
 *   outside the tree by content);
 * - `oracles`: {@link ORACLES}, against Go binaries cached by content
 *   (infra/tools/go.ts);
 * - `e2e`: {@link E2E}, each of which starts its own control plane, one file
 *   at a time and after everything else, so a control plane never shares the
 *   machine's cores with other suites (against the newest Kubernetes
 *   release, or the one `EMB_K8S_VERSION` names: test/k8s/cluster.ts);
 * - `e2e-floor`: test/e2e/k8s.e2e.test.ts, k8s.scale-to-zero.e2e.test.ts
 *   and k8s.custom-metrics.e2e.test.ts again with `EMB_K8S_VERSION=v1.30`,
 *   the oldest minor the chart claims (the scale-to-zero suite turns the
 *   HPAScaleToZero gate on there), in the same sequential group.
 *
 * Ordering, as vitest 5.1 really does it (`groupSpecs` in its runner,
 * checked with timestamps): a project with `fileParallelism: false` and
 * `groupOrder` 0 goes into a sequential group that runs after every numbered
 * group — so the other projects are group 1 and e2e stays at 0. (With
 * e2e at 1 and the others at 0, e2e ran first.)
 */
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 300_000,
    pool: "forks",
    // provider implementations are loaded on demand (shared/providers/registry.ts); tests build bridges synchronously
    setupFiles: ["test/setup/providers.ts"],
    reporters: ["default", "json"],
    outputFile: { json: ".cache/vitest-report.json" },
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/**/*.test.ts", "shared/**/*.test.ts", "functions/**/*.test.ts"],
          exclude: ["**/node_modules/**", ...INTEGRATION, ...ORACLES, ...E2E],
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: {
          name: "integration",
          include: INTEGRATION,
          exclude: ["**/node_modules/**", ...ORACLES, ...E2E],
          // the Worker bundle, built by wrangler once per content of its sources (not once per file)
          globalSetup: ["test/setup/worker-bundle.ts"],
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: {
          name: "oracles",
          include: ORACLES,
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: {
          name: "e2e",
          include: E2E,
          fileParallelism: false,
          sequence: { groupOrder: 0 },
        },
      },
      {
        // The core scaling e2e, scale to zero and custom metrics again on the oldest
        // Kubernetes minor the chart claims (Chart.yaml kubeVersion;
        // docs/compatibility.md). Same sequential group as e2e: one control
        // plane at a time.
        extends: true,
        test: {
          name: "e2e-floor",
          include: ["test/e2e/k8s.e2e.test.ts", "test/e2e/k8s.scale-to-zero.e2e.test.ts", "test/e2e/k8s.custom-metrics.e2e.test.ts"],
          env: { EMB_K8S_VERSION: "v1.30" },
          globalSetup: ["test/setup/k8s-build.ts"],
          fileParallelism: false,
          sequence: { groupOrder: 0 },
        },
      },
    ],
  },
});
