/**
 * Reading and waiting on an HPA and its scale target in the end-to-end
 * suites (test/e2e/k8s*.e2e.test.ts): the Deployment's `spec.replicas` (what
 * the HPA controller writes through the scale subresource), the HPA's status
 * and conditions, all read with kubectl as admin.
 */
import { expect } from "vitest";
import { waitFor, type ControlPlane } from "./cluster.ts";
import type { Condition } from "./shipped.ts";

/** The part of an autoscaling/v2 HorizontalPodAutoscaler the suites read. */
export interface Hpa {
  status: { currentReplicas?: number; desiredReplicas?: number; conditions?: Condition[]; currentMetrics?: unknown[] };
}

/** ceil(value / target) clamped to [min, max]: what an AverageValue HPA wants (k8s.io/kubernetes pkg/controller/podautoscaler/replica_calculator.go GetExternalPerPodMetricReplicas). */
export function expectedReplicas(value: number, target: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, Math.ceil(value / target)));
}

/** The condition `type` of an HPA's status, if present. */
export const condition = (hpa: Hpa, type: string): Condition | undefined => hpa.status.conditions?.find((c) => c.type === type);

/** Probes of Deployment/HPA pairs of one name (default `worker`) on a control plane. */
export interface WorkloadProbe {
  /** `kubectl get <args> -o json`, parsed */
  kubectlJson<T>(args: string[]): Promise<T>;
  /** the Deployment's `spec.replicas` */
  replicasOf(ns: string): Promise<number>;
  /** the HPA */
  hpaOf(ns: string): Promise<Hpa>;
  /** wait (default 90 s, polled every second) until the Deployment has exactly `replicas`; the failure message shows the HPA's status and `context()` */
  waitForReplicas(ns: string, replicas: number, timeoutMs?: number): Promise<void>;
  /** assert, every second for `seconds`, that the Deployment stays at `replicas` */
  expectReplicasHeld(ns: string, replicas: number, seconds: number): Promise<void>;
}

/**
 * Probes for the Deployment and HPA named `name` in any namespace of `cp`.
 * @param context component logs for failure messages
 */
export function workloadProbe(cp: Pick<ControlPlane, "kubectlOk">, context: () => string, name = "worker"): WorkloadProbe {
  const kubectlJson = async <T>(args: string[]): Promise<T> => JSON.parse(await cp.kubectlOk([...args, "-o", "json"])) as T;
  const replicasOf = async (ns: string) => (await kubectlJson<{ spec: { replicas: number } }>(["-n", ns, "get", "deployment", name])).spec.replicas;
  const hpaOf = (ns: string) => kubectlJson<Hpa>(["-n", ns, "get", "hpa", name]);
  return {
    kubectlJson,
    replicasOf,
    hpaOf,
    async waitForReplicas(ns, replicas, timeoutMs = 90_000) {
      let last = "";
      await waitFor(
        `deployment ${ns}/${name} at ${replicas} replicas`,
        async () => {
          const [current, hpa] = [await replicasOf(ns), await hpaOf(ns)];
          last = `spec.replicas=${current}, hpa.status=${JSON.stringify(hpa.status)}`;
          return current === replicas;
        },
        { timeoutMs, intervalMs: 1000, context: () => `${last}\n${context()}` },
      );
    },
    async expectReplicasHeld(ns, replicas, seconds) {
      const until = Date.now() + seconds * 1000;
      while (Date.now() < until) {
        expect(await replicasOf(ns), `deployment ${ns}/${name} must stay at ${replicas}`).toBe(replicas);
        await new Promise((r) => setTimeout(r, 1000));
      }
    },
  };
}
