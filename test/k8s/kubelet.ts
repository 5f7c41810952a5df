/**
 * A stand-in for the kubelet in the end-to-end suites: the test control
 * plane runs no kubelet and no scheduler (test/k8s/cluster.ts), so the pods a
 * Deployment's ReplicaSet creates stay `Pending`, and the HPA controller
 * ignores Pending pods (k8s.io/kubernetes
 * `pkg/controller/podautoscaler/replica_calculator.go` `groupPods`: a Pods
 * metric with no Running pod fails; an Object `Value` target counts Running
 * and Ready pods, `getReadyPodsCount`). This loop writes what a kubelet would
 * report for each pod of the given namespaces — `phase: Running`, conditions
 * `PodScheduled`, `Initialized`, `ContainersReady` and `Ready` all `True`,
 * each container running and ready —
 * through the pods' `status` subresource (a JSON merge patch as
 * `system:masters`), and keeps the list of the pods it has made Ready, for
 * an exporter that exports a series per pod.
 *
 * An unscheduled pod (no `spec.nodeName`) is deleted at once when its
 * ReplicaSet scales down (pkg/registry/core/pod/strategy.go
 * `CheckGracefulDeleteStrategy`: no node, no grace period), so nothing has to
 * confirm deletions.
 */
import type { ImpersonatingClient } from "./impersonate.ts";

/** What the stand-in knows of one pod: its name and labels. */
export interface ReadyPod {
  name: string;
  labels: Readonly<Record<string, string>>;
}

/** A running stand-in (see the module doc). */
export interface Kubelet {
  /**
   * The pods of `ns` made Running and Ready as of the last pass whose labels
   * include every entry of `labels` (not being deleted), sorted by name.
   */
  readyPods(ns: string, labels: Readonly<Record<string, string>>): string[];
  /** how many status writes it has made */
  readonly writes: number;
  /** the last error of a pass (a failed list or status write), for failure messages; "" when none */
  readonly lastError: string;
  /** stop after the current pass; resolves when it has ended */
  stop(): Promise<void>;
}

interface PodItem {
  metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: string };
  spec: { containers: { name: string; image: string }[] };
  status?: { phase?: string; conditions?: { type: string; status: string }[] };
}

const READY_CONDITIONS = ["PodScheduled", "Initialized", "ContainersReady", "Ready"] as const;

/** Whether the pod already reports what the stand-in writes. */
function isRunningAndReady(pod: PodItem): boolean {
  const conditions = pod.status?.conditions ?? [];
  return pod.status?.phase === "Running" && READY_CONDITIONS.every((type) => conditions.some((c) => c.type === type && c.status === "True"));
}

/**
 * Start the stand-in on `namespaces` (a namespace that does not exist yet
 * is skipped until it does), one pass every `intervalMs` (default 500 ms):
 * list the namespace's pods, write the Running/Ready status of each pod that
 * lacks it.
 *
 * @param client a `system:masters` client of the control plane (test/k8s/impersonate.ts), used without impersonation
 */
export function startKubelet(client: ImpersonatingClient, namespaces: readonly string[], options: { intervalMs?: number } = {}): Kubelet {
  const intervalMs = options.intervalMs ?? 500;
  const ready = new Map<string, ReadyPod[]>();
  let writes = 0;
  let lastError = "";
  let stopped = false;

  const pass = async () => {
    for (const ns of namespaces) {
      const list = await client.request("GET", `/api/v1/namespaces/${ns}/pods?limit=500`);
      if (list.status === 404) continue;
      if (list.status !== 200) throw new Error(`list pods in ${ns}: ${list.status} ${JSON.stringify(list.body).slice(0, 300)}`);
      const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
      const made: ReadyPod[] = [];
      for (const pod of (list.body as { items: PodItem[] }).items) {
        if (pod.metadata.deletionTimestamp !== undefined) continue;
        if (!isRunningAndReady(pod)) {
          const patch = {
            status: {
              phase: "Running",
              startTime: now,
              conditions: READY_CONDITIONS.map((type) => ({ type, status: "True", lastProbeTime: null, lastTransitionTime: now })),
              // what `kubectl get pods` counts in READY
              containerStatuses: pod.spec.containers.map((c) => ({
                name: c.name,
                image: c.image,
                imageID: "",
                ready: true,
                started: true,
                restartCount: 0,
                state: { running: { startedAt: now } },
              })),
            },
          };
          const r = await client.request("PATCH", `/api/v1/namespaces/${ns}/pods/${pod.metadata.name}/status`, { body: patch, contentType: "application/merge-patch+json" });
          if (r.status === 404) continue; // deleted meanwhile
          if (r.status !== 200) throw new Error(`status of pod ${ns}/${pod.metadata.name}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
          writes++;
        }
        made.push({ name: pod.metadata.name, labels: pod.metadata.labels ?? {} });
      }
      ready.set(ns, made);
    }
  };

  const loop = (async () => {
    while (!stopped) {
      try {
        await pass();
      } catch (err) {
        lastError = `${new Date().toISOString()} ${(err as Error).message}`;
      }
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();

  return {
    readyPods: (ns, labels) =>
      (ready.get(ns) ?? [])
        .filter((p) => Object.entries(labels).every(([k, v]) => p.labels[k] === v))
        .map((p) => p.name)
        .sort(),
    get writes() {
      return writes;
    },
    get lastError() {
      return lastError;
    },
    async stop() {
      stopped = true;
      await loop;
    },
  };
}
