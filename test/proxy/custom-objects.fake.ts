/**
 * What kube-apiserver serves a proxy that answers custom.metrics.k8s.io
 * reads, for the fake Kubernetes API (test/fakes/kube-apiserver.ts
 * `extraRoutes`), in the real wire format:
 *
 * - pods of all namespaces: list (`/api/v1/pods`) and watch, as
 *   `PartialObjectMetadataList` / `PartialObjectMetadata` when the `Accept`
 *   header asks for it (apiserver `pkg/endpoints/handlers/response.go`),
 *   else a full `PodList`; every Accept header is recorded;
 * - discovery: `/api/v1` (pods, services, namespaces, configmaps),
 *   `/apis/networking.k8s.io` (APIGroup, preferred v1) and
 *   `/apis/networking.k8s.io/v1` (ingresses, ingressclasses);
 * - GET of stored objects by path, with a 403 Status for paths listed in
 *   `forbidden` (the proxy's RBAC lacks them) and a 404 Status otherwise.
 */
import type { IncomingMessage, ServerResponse } from "node:http";

type Obj = { apiVersion?: string; kind?: string; metadata: { name: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string>; [k: string]: unknown }; [k: string]: unknown };

/** The pods, objects and switches of the fake. */
export interface CustomObjectsFake {
  /** `namespace/name` → labels */
  pods: Map<string, Record<string, string>>;
  /** object path (`/api/v1/namespaces/ns/services/name`) → object */
  objects: Map<string, Obj>;
  /** object paths answered 403 Forbidden */
  forbidden: Set<string>;
  /** while true, pod lists are left unanswered (an informer that cannot sync) */
  holdPodLists: boolean;
  /** while true, pod lists answer 403 Forbidden (the proxy lacks RBAC to list pods) */
  forbidPodLists: boolean;
  /** every pod list and watch request: whether a watch, and its Accept header */
  podRequests: { watch: boolean; accept: string }[];
  /** every GET of an object or discovery path */
  gets: string[];
  /** add or change a pod (watchers get ADDED/MODIFIED) */
  setPod(namespace: string, name: string, labels: Record<string, string>): void;
  /** delete a pod (watchers get DELETED) */
  deletePod(namespace: string, name: string): void;
  /** the fake API's `extraRoutes` */
  route: (req: IncomingMessage, res: ServerResponse, url: URL) => boolean;
}

const STATUS = (code: number, reason: string, message: string) => ({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, code });

/** A fresh fake. */
export function customObjectsFake(): CustomObjectsFake {
  let rv = 1000;
  const watchers = new Set<{ res: ServerResponse; partial: boolean }>();
  const podObject = (namespace: string, name: string, labels: Record<string, string>, partial: boolean, resourceVersion: string): Obj => {
    const metadata = { name, namespace, labels, resourceVersion, uid: `uid-${namespace}-${name}`, annotations: { "kubectl.kubernetes.io/last-applied-configuration": "x".repeat(200) } };
    return partial
      ? { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata }
      : { kind: "Pod", apiVersion: "v1", metadata, spec: { containers: [{ name: "app", image: "example" }] }, status: { phase: "Running" } };
  };
  const versions = new Map<string, string>();
  const notify = (type: string, namespace: string, name: string, labels: Record<string, string>) => {
    const version = String(++rv);
    versions.set(`${namespace}/${name}`, version);
    for (const w of watchers) w.res.write(`${JSON.stringify({ type, object: podObject(namespace, name, labels, w.partial, version) })}\n`);
  };
  const send = (res: ServerResponse, code: number, body: unknown) => {
    res.writeHead(code, { "Content-Type": "application/json" });
    res.end(JSON.stringify(body));
  };
  const fake: CustomObjectsFake = {
    pods: new Map(),
    objects: new Map(),
    forbidden: new Set(),
    holdPodLists: false,
    forbidPodLists: false,
    podRequests: [],
    gets: [],
    setPod(namespace, name, labels) {
      fake.pods.set(`${namespace}/${name}`, labels);
      notify(fake.pods.has(`${namespace}/${name}`) ? "MODIFIED" : "ADDED", namespace, name, labels);
    },
    deletePod(namespace, name) {
      const labels = fake.pods.get(`${namespace}/${name}`);
      if (labels === undefined) return;
      fake.pods.delete(`${namespace}/${name}`);
      notify("DELETED", namespace, name, labels);
    },
    route(req, res, url) {
      if (req.method !== "GET") return false;
      const p = url.pathname;
      const accept = String(req.headers.accept ?? "");
      if (p === "/api/v1/pods") {
        const watch = url.searchParams.get("watch") === "1" || url.searchParams.get("watch") === "true";
        fake.podRequests.push({ watch, accept });
        if (watch) {
          res.writeHead(200, { "Content-Type": "application/json", "Transfer-Encoding": "chunked" });
          res.flushHeaders();
          const w = { res, partial: accept.split(",")[0]!.includes("as=PartialObjectMetadata;") };
          watchers.add(w);
          req.on("close", () => watchers.delete(w));
          return true;
        }
        if (fake.holdPodLists) return true; // never answered
        if (fake.forbidPodLists) {
          send(res, 403, STATUS(403, "Forbidden", 'pods is forbidden: User "system:serviceaccount:external-metrics-bridge:proxy" cannot list resource "pods" in API group "" at the cluster scope'));
          return true;
        }
        const partial = accept.split(",")[0]!.includes("as=PartialObjectMetadataList");
        const items = [...fake.pods].map(([key, labels]) => {
          const [namespace, name] = key.split("/") as [string, string];
          return podObject(namespace, name, labels, partial, versions.get(key) ?? "1");
        });
        send(res, 200, partial ? { kind: "PartialObjectMetadataList", apiVersion: "meta.k8s.io/v1", metadata: { resourceVersion: String(rv) }, items } : { kind: "PodList", apiVersion: "v1", metadata: { resourceVersion: String(rv) }, items });
        return true;
      }
      const resource = (name: string, namespaced: boolean, kind: string) => ({ name, singularName: "", namespaced, kind, verbs: ["get", "list", "watch"] });
      if (p === "/api/v1") {
        fake.gets.push(p);
        send(res, 200, {
          kind: "APIResourceList",
          groupVersion: "v1",
          resources: [resource("pods", true, "Pod"), resource("pods/status", true, "Pod"), resource("services", true, "Service"), resource("namespaces", false, "Namespace"), resource("configmaps", true, "ConfigMap")],
        });
        return true;
      }
      if (p === "/apis/networking.k8s.io") {
        fake.gets.push(p);
        const v1 = { groupVersion: "networking.k8s.io/v1", version: "v1" };
        send(res, 200, { kind: "APIGroup", apiVersion: "v1", name: "networking.k8s.io", versions: [v1], preferredVersion: v1 });
        return true;
      }
      if (p === "/apis/networking.k8s.io/v1") {
        fake.gets.push(p);
        send(res, 200, { kind: "APIResourceList", apiVersion: "v1", groupVersion: "networking.k8s.io/v1", resources: [resource("ingresses", true, "Ingress"), resource("ingressclasses", false, "IngressClass")] });
        return true;
      }
      if (/^\/apis\/[^/]+$/.test(p)) {
        fake.gets.push(p);
        send(res, 404, STATUS(404, "NotFound", "the server could not find the requested resource"));
        return true;
      }
      const objectPath = /^\/api\/v1\/(namespaces\/[^/]+\/)?[^/]+\/[^/]+$/.test(p) || /^\/apis\/networking\.k8s\.io\/v1\/(namespaces\/[^/]+\/)?[^/]+\/[^/]+$/.test(p);
      if (!objectPath || p.startsWith("/api/v1/namespaces/kube-system/configmaps")) return false;
      fake.gets.push(p);
      const name = p.slice(p.lastIndexOf("/") + 1);
      if (fake.forbidden.has(p)) {
        send(res, 403, STATUS(403, "Forbidden", `objects "${name}" is forbidden: User "system:serviceaccount:external-metrics-bridge:proxy" cannot get resource`));
        return true;
      }
      const obj = fake.objects.get(p);
      if (obj === undefined) send(res, 404, STATUS(404, "NotFound", `"${name}" not found`));
      else send(res, 200, obj);
      return true;
    },
  };
  return fake;
}
