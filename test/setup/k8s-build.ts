/**
 * globalSetup of the `e2e-floor` project: build (or find cached) the control
 * plane of the Kubernetes release that project runs against
 * (`EMB_K8S_VERSION` in its `env`; test/k8s/cluster.ts k8sModule) before any
 * test starts, so a cold build (about 10 minutes on 2 cores) is not cut off
 * by the suite's `beforeAll` hook timeout (300 s). Warm: about a second.
 */
import type { TestProject } from "vitest/node";
import { buildControlPlane } from "../k8s/cluster.ts";

export default async function setup(project: TestProject): Promise<void> {
  const version = (project.config.env as Record<string, string> | undefined)?.["EMB_K8S_VERSION"] ?? process.env["EMB_K8S_VERSION"];
  await buildControlPlane({ version, timeoutMs: 60 * 60_000, log: (line) => console.log(`[${project.name}] ${line}`) });
}
