/**
 * A local fake of the parts of the Kubernetes API the proxy uses, over HTTPS
 * with a generated CA, speaking the real wire format so the proxy's
 * Kubernetes client (shared/proxy/kube/client.ts) talks to it as to kube-apiserver:
 *
 * - ConfigMaps: get, list with `fieldSelector=metadata.name=…`, and watch
 *   (`?watch=true`, newline-delimited `{type, object}` events) — what the
 *   proxy's informer for `kube-system/extension-apiserver-authentication` does;
 * - Secrets: list and watch with `fieldSelector=metadata.name=…` (events on
 *   every create/replace/set), what the proxy's serving-certificate informer does;
 * - Leases (`coordination.k8s.io/v1`): get, create (409 when it exists),
 *   replace (409 on a stale resourceVersion) — leader election;
 * - Secrets: get, create (409 when it exists), replace (409 on a stale
 *   resourceVersion);
 * - TokenReview and SubjectAccessReview (`create`), answered from test-set
 *   tokens and an authorizer function, every review recorded;
 * - APIService get, create, replace.
 * - ExternalMetricPolicy (all namespaces) and ClusterExternalMetricPolicy
 *   (`external-metrics-bridge.io/v1alpha1`): watch from a resourceVersion
 *   (the changes after it are sent first, as the watch cache does), list (paginated with `limit`
 *   and `continue` as kube-apiserver does from etcd: items in key order,
 *   every page of one list a consistent snapshot at the first page's
 *   resourceVersion, `metadata.continue` and `remainingItemCount`; a 410
 *   Expired for a token whose snapshot is gone,
 *   {@link FakeKubeApiServer.expireContinueTokens}), watch, get, and PUT of the
 *   `status` subresource (409 on a stale resourceVersion; spec and generation
 *   kept), what the proxy's cluster policy layer does; 404 for both while
 *   {@link FakeKubeApiServer.policyCrdsInstalled} is false (no CRDs);
 * - `events.k8s.io/v1` Events: create (validated as kube-apiserver's
 *   `ValidateEventCreate` does for that version: eventTime,
 *   reportingController, reportingInstance, action, reason required; note
 *   ≤ 1 KiB; type Normal or Warning; 422 Invalid otherwise), kept in
 *   {@link FakeKubeApiServer.events}.
 *
 * Every request needs `Authorization: Bearer <token>` (the proxy's
 * ServiceAccount token) or a client certificate issued by the fake's CA
 * ({@link FakeKubeApiServer.issueClientCertificate}), else 401 Status. Watches
 * can be expired with a 410 Gone ERROR event, as the watch cache does for a
 * compacted resourceVersion ({@link FakeKubeApiServer.expireWatches}). For connection-reuse and deadline
 * tests it counts TLS handshakes and open connections, and can leave reviews
 * hanging (never answered) to see whether the client cancels them.
 */
import https from "node:https";
import type { AddressInfo } from "node:net";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createCA, issueCertificate, type IssuedCertificate } from "../../shared/proxy/tls/certs.ts";
import type { SubjectAccessReviewSpec, SubjectAccessReviewStatus } from "../../shared/proxy/authz/authorize.ts";
import { closeServer } from "../helpers/http.ts";

/** A TokenReview's user. */
export interface FakeUser {
  username: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

type KubeObject = { apiVersion?: string; kind?: string; metadata: { name: string; namespace?: string; resourceVersion?: string; [k: string]: unknown }; [k: string]: unknown };

/** The running fake. */
export interface FakeKubeApiServer {
  url: string;
  /** CA of its serving certificate */
  caPem: string;
  /** the bearer token clients must present */
  token: string;
  /** bearer tokens TokenReview accepts */
  tokens: Map<string, FakeUser>;
  /** decides SubjectAccessReviews (default: deny everything) */
  authorize: (spec: SubjectAccessReviewSpec) => SubjectAccessReviewStatus;
  /** every review received, oldest first */
  reviews: { tokenReviews: string[]; subjectAccessReviews: SubjectAccessReviewSpec[] };
  /** the APIServices stored, by name */
  apiServices: Map<string, KubeObject>;
  /** the ValidatingWebhookConfigurations stored, by name (GET and PUT only; tests put them here) */
  webhookConfigurations: Map<string, KubeObject>;
  /** HorizontalPodAutoscalers (autoscaling/v2) served by list, all namespaces or one; by `namespace/name` */
  hpas: Map<string, KubeObject>;
  /** every write of an APIService: method and name */
  apiServiceWrites: { method: string; name: string }[];
  /** make these endpoints answer 500 (e.g. `"subjectaccessreviews"`) */
  failing: Set<string>;
  /** make these endpoints (`"tokenreviews"`, `"subjectaccessreviews"`, `"configmaps"` lists, `"apiservices"`) never answer: the request is read and left open */
  hanging: Set<string>;
  /** requests left hanging so far, and how many of them the client has since cancelled (connection closed) */
  hung: { started: number; closedByClient: number };
  /** TLS connections (completed handshakes) accepted since the start */
  tlsConnections(): number;
  /** TLS connections open now */
  openConnections(): number;
  /** the Leases stored, by `namespace/name` */
  leases: Map<string, KubeObject>;
  /** extra bearer tokens accepted besides `token` (one per proxy replica, to tell writers apart) */
  clientTokens: Set<string>;
  /** every write of a Secret, Lease, APIService or policy status, with the bearer token that made it, oldest first */
  writes: { resource: "secrets" | "leases" | "apiservices" | "externalmetricpolicies/status" | "clusterexternalmetricpolicies/status"; method: string; name: string; by: string }[];
  /** the Events created (`events.k8s.io/v1`), oldest first, with the bearer token that wrote each */
  events: { event: KubeObject; by: string }[];
  /** make the snapshots of every paginated list in progress expire: their `continue` tokens answer 410 Expired */
  expireContinueTokens(): void;
  /** called before each page of a policy list is answered (after its snapshot is taken) with the request's `limit` and `continue` */
  onPolicyListPage?: (page: { resource: string; limit?: number; continue?: string }) => void;
  /** whether the policy CRDs are installed (default true); false: their paths answer 404 */
  policyCrdsInstalled: boolean;
  /** the policy objects stored, by `kind/namespace/name` (`namespace` empty for ClusterExternalMetricPolicy) */
  policies: Map<string, KubeObject>;
  /** store a policy object as `kubectl apply` would (generation bumped when the spec changes; status kept); watchers get ADDED/MODIFIED */
  applyPolicy(obj: { kind: "ExternalMetricPolicy" | "ClusterExternalMetricPolicy"; metadata: { name: string; namespace?: string }; spec: unknown }): KubeObject;
  /** delete a policy object (watchers get DELETED) */
  deletePolicy(kind: "ExternalMetricPolicy" | "ClusterExternalMetricPolicy", namespace: string | undefined, name: string): void;
  /** end every open watch stream (as an API server restart or a load balancer timeout would) */
  endWatches(): void;
  /** hold back Secret watch events (a lagging watch) until the returned function releases them, in order */
  holdSecretEvents(): () => void;
  /** store a Secret as an administrator would (watchers get ADDED/MODIFIED) */
  setSecret(namespace: string, name: string, secret: { type?: string; data: Record<string, string>; metadata?: Record<string, unknown> }): void;
  /** delete a Secret as an administrator would (watchers get DELETED) */
  deleteSecret(namespace: string, name: string): void;
  setConfigMap(namespace: string, name: string, data: Record<string, string>): void;
  deleteConfigMap(namespace: string, name: string): void;
  getSecret(namespace: string, name: string): KubeObject | undefined;
  /** open watch connections */
  watchers(): number;
  /** every request's credential, oldest first: the bearer token, or `cert:<CN>` for a client certificate */
  credentials: string[];
  /** every list (GET of a collection without watch) and watch request: resource, and the watch's resourceVersion */
  listsAndWatches: { resource: string; watch: boolean; resourceVersion?: string; limit?: number; continue?: string }[];
  /** a client certificate (PEM) signed by the fake's CA with CN=`user`; requests presenting it are authenticated */
  issueClientCertificate(user: string): Promise<{ certPem: string; keyPem: string }>;
  /** send every open watch an ERROR event with a 410 Gone Status (resourceVersion too old) and end it */
  expireWatches(): void;
  /**
   * Extra endpoints a suite serves itself (e.g. pods and described objects
   * for custom metrics: test/proxy/custom-objects.fake.ts): asked after
   * authentication, before the fake's own endpoints; true when it answered.
   */
  extraRoutes?: (req: IncomingMessage, res: ServerResponse, url: URL) => boolean;
  close(): Promise<void>;
}

/**
 * Start the fake on 127.0.0.1 (a random port).
 */
export async function startFakeKubeApiServer(): Promise<FakeKubeApiServer> {
  const ca = await createCA("fake-kube-apiserver-ca");
  const serving: IssuedCertificate = await issueCertificate(ca, {
    commonName: "kube-apiserver",
    dnsNames: ["localhost"],
    ipAddresses: ["127.0.0.1"],
    usages: ["serverAuth"],
  });
  const token = `admin-${crypto.randomUUID()}`;
  let rv = 100;
  const nextRV = () => String(++rv);
  const configMaps = new Map<string, KubeObject>();
  const secrets = new Map<string, KubeObject>();
  let heldSecretEvents: { type: string; obj: KubeObject }[] | undefined;
  const watches = new Set<{ namespace: string; name?: string; kind?: string; res: ServerResponse }>();
  const policyWatches = new Set<{ kind: string; namespace: string | undefined; res: ServerResponse }>();
  const policyKey = (kind: string, namespace: string | undefined, name: string) => `${kind}/${kind === "ClusterExternalMetricPolicy" ? "" : (namespace ?? "")}/${name}`;
  /** the last policy events, oldest first: a watch from a resourceVersion gets those after it first (the watch cache's history) */
  const policyHistory: { rv: number; type: string; obj: KubeObject }[] = [];
  function notifyPolicy(type: string, obj: KubeObject) {
    policyHistory.push({ rv: Number(obj.metadata.resourceVersion), type, obj });
    if (policyHistory.length > 10_000) policyHistory.shift();
    for (const w of policyWatches) if (w.kind === obj.kind && (w.namespace === undefined || w.namespace === obj.metadata.namespace)) w.res.write(`${JSON.stringify({ type, object: obj })}\n`);
  }
  /** snapshots of paginated policy lists in progress, by id (what etcd's MVCC gives kube-apiserver) */
  const listSnapshots = new Map<string, { rv: string; items: KubeObject[] }>();
  let listIds = 0;
  let handshakes = 0;
  const sockets = new Set<import("node:tls").TLSSocket>();

  const fake: FakeKubeApiServer = {
    url: "",
    caPem: ca.certPem,
    token,
    tokens: new Map(),
    authorize: () => ({ allowed: false, reason: "no RBAC rule matched (fake)" }),
    reviews: { tokenReviews: [], subjectAccessReviews: [] },
    apiServices: new Map(),
    webhookConfigurations: new Map(),
    hpas: new Map(),
    apiServiceWrites: [],
    failing: new Set(),
    hanging: new Set(),
    hung: { started: 0, closedByClient: 0 },
    tlsConnections: () => handshakes,
    openConnections: () => sockets.size,
    leases: new Map(),
    clientTokens: new Set(),
    writes: [],
    holdSecretEvents() {
      const held: { type: string; obj: KubeObject }[] = [];
      heldSecretEvents = held;
      return () => {
        if (heldSecretEvents === held) heldSecretEvents = undefined;
        for (const e of held) notify(e.type, e.obj);
      };
    },
    endWatches() {
      for (const w of watches) w.res.end();
      watches.clear();
      for (const w of policyWatches) w.res.end();
      policyWatches.clear();
    },
    policyCrdsInstalled: true,
    events: [],
    expireContinueTokens() {
      listSnapshots.clear();
    },
    policies: new Map(),
    applyPolicy(input) {
      const cluster = input.kind === "ClusterExternalMetricPolicy";
      const key = policyKey(input.kind, input.metadata.namespace, input.metadata.name);
      const old = fake.policies.get(key);
      const sameSpec = old !== undefined && JSON.stringify(old["spec"]) === JSON.stringify(input.spec);
      const generation = old === undefined ? 1 : sameSpec ? (old.metadata["generation"] as number) : (old.metadata["generation"] as number) + 1;
      const obj: KubeObject = {
        apiVersion: "external-metrics-bridge.io/v1alpha1",
        kind: input.kind,
        metadata: { ...input.metadata, ...(cluster ? { namespace: undefined } : {}), uid: (old?.metadata["uid"] as string | undefined) ?? crypto.randomUUID(), generation, resourceVersion: nextRV() },
        spec: input.spec,
        ...(old?.["status"] !== undefined ? { status: old["status"] } : {}),
      };
      if (cluster) delete obj.metadata.namespace;
      fake.policies.set(key, obj);
      notifyPolicy(old === undefined ? "ADDED" : "MODIFIED", obj);
      return obj;
    },
    deletePolicy(kind, namespace, name) {
      const key = policyKey(kind, namespace, name);
      const obj = fake.policies.get(key);
      if (obj === undefined) return;
      fake.policies.delete(key);
      notifyPolicy("DELETED", { ...obj, metadata: { ...obj.metadata, resourceVersion: nextRV() } });
    },
    setSecret(namespace, name, secret) {
      const key = `${namespace}/${name}`;
      const type = secrets.has(key) ? "MODIFIED" : "ADDED";
      const obj: KubeObject = { apiVersion: "v1", kind: "Secret", type: secret.type ?? "kubernetes.io/tls", data: secret.data, metadata: { ...(secret.metadata ?? {}), name, namespace, resourceVersion: nextRV() } };
      secrets.set(key, obj);
      notify(type, obj);
    },
    deleteSecret(namespace, name) {
      const key = `${namespace}/${name}`;
      const obj = secrets.get(key);
      if (obj === undefined) return;
      secrets.delete(key);
      notify("DELETED", { ...obj, metadata: { ...obj.metadata, resourceVersion: nextRV() } });
    },
    setConfigMap(namespace, name, data) {
      const key = `${namespace}/${name}`;
      const type = configMaps.has(key) ? "MODIFIED" : "ADDED";
      const obj: KubeObject = { apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace, resourceVersion: nextRV() }, data };
      configMaps.set(key, obj);
      notify(type, obj);
    },
    deleteConfigMap(namespace, name) {
      const key = `${namespace}/${name}`;
      const obj = configMaps.get(key);
      if (obj === undefined) return;
      configMaps.delete(key);
      notify("DELETED", { ...obj, metadata: { ...obj.metadata, resourceVersion: nextRV() } });
    },
    getSecret: (namespace, name) => secrets.get(`${namespace}/${name}`),
    watchers: () => watches.size,
    credentials: [],
    listsAndWatches: [],
    issueClientCertificate: async (user) => {
      const issued = await issueCertificate(ca, { commonName: user, usages: ["clientAuth"] });
      return { certPem: issued.certPem, keyPem: issued.keyPem };
    },
    expireWatches() {
      const gone = { type: "ERROR", object: status(410, "Expired", "too old resource version: 1 (100)") };
      for (const w of watches) w.res.end(`${JSON.stringify(gone)}\n`);
      watches.clear();
      for (const w of policyWatches) w.res.end(`${JSON.stringify(gone)}\n`);
      policyWatches.clear();
    },
    close: async () => {
      for (const w of watches) w.res.end();
      watches.clear();
      for (const w of policyWatches) w.res.end();
      policyWatches.clear();
      for (const socket of sockets) socket.destroy(); // hanging requests too
      await closeServer(server);
    },
  };

  function notify(type: string, obj: KubeObject) {
    if (heldSecretEvents !== undefined && obj.kind === "Secret") return void heldSecretEvents.push({ type, obj });
    for (const w of watches) {
      if (w.namespace !== obj.metadata.namespace) continue;
      if (w.name !== undefined && w.name !== obj.metadata.name) continue;
      if ((w.kind ?? "ConfigMap") !== (obj.kind ?? "ConfigMap")) continue;
      w.res.write(`${JSON.stringify({ type, object: obj })}\n`);
    }
  }

  // Client certificates are asked for (not required) and verified against the fake's CA, as kube-apiserver's --client-ca-file.
  const server = https.createServer({ cert: serving.certPem, key: serving.keyPem, requestCert: true, rejectUnauthorized: false, ca: [ca.certPem] }, (req, res) => {
    handle(req, res).catch((err) => send(res, 500, status(500, "InternalError", String(err))));
  });
  server.on("secureConnection", (socket) => {
    handshakes++;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });

  /** Leave the request unanswered; count it closed when the client cancels it. */
  function hang(req: IncomingMessage) {
    fake.hung.started++;
    req.socket.on("close", () => fake.hung.closedByClient++);
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const tlsSocket = req.socket as import("node:tls").TLSSocket;
    const peer = tlsSocket.authorized ? tlsSocket.getPeerCertificate() : undefined;
    const certUser = peer?.subject?.CN !== undefined ? `cert:${String(peer.subject.CN)}` : undefined;
    const bearer = (req.headers.authorization ?? "").replace(/^Bearer /, "");
    fake.credentials.push(req.headers.authorization !== undefined ? bearer : (certUser ?? ""));
    if (bearer !== token && !fake.clientTokens.has(bearer) && !(req.headers.authorization === undefined && certUser !== undefined)) {
      return send(res, 401, status(401, "Unauthorized", "Unauthorized"));
    }
    const url = new URL(req.url ?? "/", "https://fake");
    if (fake.extraRoutes?.(req, res, url) === true) return;
    const collection = p_collection(url.pathname);
    if (req.method === "GET" && collection !== undefined) {
      const watching = url.searchParams.get("watch") === "true" || url.searchParams.get("watch") === "1";
      fake.listsAndWatches.push({ resource: collection, watch: watching, ...(watching ? { resourceVersion: url.searchParams.get("resourceVersion") ?? "" } : {}) });
    }
    const body = req.method === "POST" || req.method === "PUT" ? await readJson(req) : undefined;
    const p = url.pathname;
    let m: RegExpMatchArray | null;

    if ((m = p.match(/^\/api\/v1\/namespaces\/([^/]+)\/configmaps$/)) && req.method === "GET") {
      const namespace = m[1]!;
      const name = fieldName(url.searchParams.get("fieldSelector"));
      if (url.searchParams.get("watch") === "true" || url.searchParams.get("watch") === "1") {
        res.writeHead(200, { "Content-Type": "application/json", "Transfer-Encoding": "chunked" });
        res.flushHeaders();
        const w = { namespace, ...(name !== undefined ? { name } : {}), res };
        watches.add(w);
        req.on("close", () => watches.delete(w));
        return;
      }
      if (fake.hanging.has("configmaps")) return hang(req);
      const items = [...configMaps.values()].filter((c) => c.metadata.namespace === namespace && (name === undefined || c.metadata.name === name));
      return send(res, 200, { apiVersion: "v1", kind: "ConfigMapList", metadata: { resourceVersion: String(rv) }, items });
    }
    if ((m = p.match(/^\/api\/v1\/namespaces\/([^/]+)\/configmaps\/([^/]+)$/)) && req.method === "GET") {
      const obj = configMaps.get(`${m[1]}/${m[2]}`);
      return obj ? send(res, 200, obj) : send(res, 404, status(404, "NotFound", `configmaps "${m[2]}" not found`));
    }
    if ((m = p.match(/^\/api\/v1\/namespaces\/([^/]+)\/secrets$/)) && req.method === "GET") {
      const namespace = m[1]!;
      const name = fieldName(url.searchParams.get("fieldSelector"));
      if (url.searchParams.get("watch") === "true" || url.searchParams.get("watch") === "1") {
        if (fake.failing.has("secrets-watch")) return send(res, 500, status(500, "InternalError", "secret watches are failing (fake)"));
        res.writeHead(200, { "Content-Type": "application/json", "Transfer-Encoding": "chunked" });
        res.flushHeaders();
        const w = { namespace, kind: "Secret", ...(name !== undefined ? { name } : {}), res };
        watches.add(w);
        req.on("close", () => watches.delete(w));
        return;
      }
      const items = [...secrets.values()].filter((c) => c.metadata.namespace === namespace && (name === undefined || c.metadata.name === name));
      return send(res, 200, { apiVersion: "v1", kind: "SecretList", metadata: { resourceVersion: String(rv) }, items });
    }
    if ((m = p.match(/^\/apis\/coordination\.k8s\.io\/v1\/namespaces\/([^/]+)\/leases(?:\/([^/]+))?$/))) {
      const namespace = m[1]!;
      if (fake.failing.has("leases")) return send(res, 500, status(500, "InternalError", "leases are failing (fake)"));
      if (req.method === "GET" && m[2]) {
        const obj = fake.leases.get(`${namespace}/${m[2]}`);
        return obj ? send(res, 200, obj) : send(res, 404, status(404, "NotFound", `leases.coordination.k8s.io "${m[2]}" not found`));
      }
      if (req.method === "POST" && !m[2]) {
        const obj = body as KubeObject;
        const key = `${namespace}/${obj.metadata.name}`;
        if (fake.leases.has(key)) return send(res, 409, status(409, "AlreadyExists", `leases.coordination.k8s.io "${obj.metadata.name}" already exists`));
        const stored = { ...obj, metadata: { ...obj.metadata, namespace, resourceVersion: nextRV() } };
        fake.leases.set(key, stored);
        fake.writes.push({ resource: "leases", method: "POST", name: obj.metadata.name, by: bearer });
        return send(res, 201, stored);
      }
      if (req.method === "PUT" && m[2]) {
        const obj = body as KubeObject;
        const key = `${namespace}/${m[2]}`;
        const current = fake.leases.get(key);
        if (!current) return send(res, 404, status(404, "NotFound", `leases.coordination.k8s.io "${m[2]}" not found`));
        if (obj.metadata.resourceVersion !== current.metadata.resourceVersion) return send(res, 409, status(409, "Conflict", "the object has been modified"));
        const stored = { ...obj, metadata: { ...obj.metadata, namespace, resourceVersion: nextRV() } };
        fake.leases.set(key, stored);
        fake.writes.push({ resource: "leases", method: "PUT", name: m[2], by: bearer });
        return send(res, 200, stored);
      }
    }
    if ((m = p.match(/^\/api\/v1\/namespaces\/([^/]+)\/secrets(?:\/([^/]+))?$/))) {
      const namespace = m[1]!;
      if (req.method === "GET" && m[2]) {
        const obj = secrets.get(`${namespace}/${m[2]}`);
        return obj ? send(res, 200, obj) : send(res, 404, status(404, "NotFound", `secrets "${m[2]}" not found`));
      }
      if (req.method === "POST" && !m[2]) {
        const obj = body as KubeObject;
        const key = `${namespace}/${obj.metadata.name}`;
        if (secrets.has(key)) return send(res, 409, status(409, "AlreadyExists", `secrets "${obj.metadata.name}" already exists`));
        const stored = { ...obj, metadata: { ...obj.metadata, namespace, resourceVersion: nextRV() } };
        secrets.set(key, stored);
        fake.writes.push({ resource: "secrets", method: "POST", name: obj.metadata.name, by: bearer });
        notify("ADDED", stored);
        return send(res, 201, stored);
      }
      if (req.method === "PUT" && m[2]) {
        const obj = body as KubeObject;
        const key = `${namespace}/${m[2]}`;
        const current = secrets.get(key);
        if (!current) return send(res, 404, status(404, "NotFound", `secrets "${m[2]}" not found`));
        if (obj.metadata.resourceVersion !== current.metadata.resourceVersion) return send(res, 409, status(409, "Conflict", "the object has been modified"));
        const stored = { ...obj, metadata: { ...obj.metadata, namespace, resourceVersion: nextRV() } };
        secrets.set(key, stored);
        fake.writes.push({ resource: "secrets", method: "PUT", name: m[2], by: bearer });
        notify("MODIFIED", stored);
        return send(res, 200, stored);
      }
    }
    if ((m = p.match(/^\/apis\/external-metrics-bridge\.io\/v1alpha1\/(?:namespaces\/([^/]+)\/)?(externalmetricpolicies|clusterexternalmetricpolicies)(?:\/([^/]+)(?:\/(status))?)?$/))) {
      const [, namespace, plural, name, sub] = m;
      const kind = plural === "externalmetricpolicies" ? "ExternalMetricPolicy" : "ClusterExternalMetricPolicy";
      if (!fake.policyCrdsInstalled) return send(res, 404, status(404, "NotFound", "the server could not find the requested resource"));
      if (fake.failing.has(plural!)) return send(res, 500, status(500, "InternalError", `${plural} are failing (fake)`));
      if (req.method === "GET" && name === undefined) {
        const watching = url.searchParams.get("watch") === "true" || url.searchParams.get("watch") === "1";
        const limitParam = url.searchParams.get("limit");
        const limit = limitParam !== null && /^\d+$/.test(limitParam) && Number(limitParam) > 0 ? Number(limitParam) : undefined;
        const token = url.searchParams.get("continue") ?? undefined;
        fake.listsAndWatches.push({
          resource: plural!,
          watch: watching,
          ...(watching ? { resourceVersion: url.searchParams.get("resourceVersion") ?? "" } : {}),
          ...(limit !== undefined ? { limit } : {}),
          ...(token ? { continue: token } : {}),
        });
        if (watching) {
          res.writeHead(200, { "Content-Type": "application/json", "Transfer-Encoding": "chunked" });
          res.flushHeaders();
          const from = Number(url.searchParams.get("resourceVersion") ?? "");
          if (Number.isInteger(from) && from > 0) {
            for (const e of policyHistory) if (e.rv > from && e.obj.kind === kind && (namespace === undefined || e.obj.metadata.namespace === namespace)) res.write(`${JSON.stringify({ type: e.type, object: e.obj })}\n`);
          }
          const w = { kind, namespace, res };
          policyWatches.add(w);
          req.on("close", () => policyWatches.delete(w));
          return;
        }
        // Paginated as kube-apiserver reads etcd (staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go GetList):
        // keys in order, every page of one list at the first page's resourceVersion, the continue token
        // naming where the next page starts; a token whose revision was compacted is a 410 Expired.
        let snapshot: { rv: string; items: KubeObject[] };
        let start = 0;
        let id: string;
        if (token) {
          let decoded: { id?: string; start?: number } = {};
          try {
            decoded = JSON.parse(Buffer.from(token, "base64").toString("utf8")) as { id?: string; start?: number };
          } catch {
            return send(res, 400, status(400, "BadRequest", "continue key is not valid: illegal base64 data"));
          }
          const known = listSnapshots.get(String(decoded.id));
          if (known === undefined) {
            return send(
              res,
              410,
              status(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
              ),
            );
          }
          snapshot = known;
          start = Number(decoded.start ?? 0);
          id = String(decoded.id);
        } else {
          const items = [...fake.policies.values()]
            .filter((o) => o.kind === kind && (namespace === undefined || o.metadata.namespace === namespace))
            .sort((a, b) => (etcdKey(a) < etcdKey(b) ? -1 : etcdKey(a) > etcdKey(b) ? 1 : 0));
          snapshot = { rv: String(rv), items };
          id = String(++listIds);
          if (limit !== undefined && items.length > limit) listSnapshots.set(id, snapshot);
        }
        fake.onPolicyListPage?.({ resource: plural!, ...(limit !== undefined ? { limit } : {}), ...(token ? { continue: token } : {}) });
        if (token && !listSnapshots.has(id)) return send(res, 410, status(410, "Expired", "The provided continue parameter is too old to display a consistent list result."));
        const end = limit === undefined ? snapshot.items.length : Math.min(snapshot.items.length, start + limit);
        const page = snapshot.items.slice(start, end);
        const more = end < snapshot.items.length;
        if (!more) listSnapshots.delete(id);
        const metadata = {
          resourceVersion: snapshot.rv,
          ...(more ? { continue: Buffer.from(JSON.stringify({ v: "meta.k8s.io/v1", rv: Number(snapshot.rv), id, start: end })).toString("base64"), remainingItemCount: snapshot.items.length - end } : {}),
        };
        return send(res, 200, { apiVersion: "external-metrics-bridge.io/v1alpha1", kind: `${kind}List`, metadata, items: page });
      }
      const key = policyKey(kind, namespace, name ?? "");
      const current = fake.policies.get(key);
      if (current === undefined) return send(res, 404, status(404, "NotFound", `${plural}.external-metrics-bridge.io "${name}" not found`));
      if (req.method === "GET" && sub === undefined) return send(res, 200, current);
      if (req.method === "PUT" && sub === "status") {
        const obj = body as KubeObject;
        if (obj.metadata.resourceVersion !== current.metadata.resourceVersion) return send(res, 409, status(409, "Conflict", "the object has been modified; please apply your changes to the latest version and try again"));
        // The status subresource changes only status (apiextensions-apiserver statusStrategy.PrepareForUpdate).
        const stored: KubeObject = { ...current, status: obj["status"], metadata: { ...current.metadata, resourceVersion: nextRV() } };
        fake.policies.set(key, stored);
        fake.writes.push({ resource: `${plural as "externalmetricpolicies" | "clusterexternalmetricpolicies"}/status`, method: "PUT", name: name!, by: bearer });
        notifyPolicy("MODIFIED", stored);
        return send(res, 200, stored);
      }
    }
    if ((m = p.match(/^\/apis\/events\.k8s\.io\/v1\/namespaces\/([^/]+)\/events$/)) && req.method === "POST") {
      if (fake.failing.has("events")) return send(res, 500, status(500, "InternalError", "events are failing (fake)"));
      const event = body as KubeObject & Record<string, unknown>;
      // k8s.io/kubernetes pkg/apis/core/validation/events.go ValidateEventCreate (events.k8s.io/v1)
      const problems: string[] = [];
      for (const field of ["eventTime", "reportingController", "reportingInstance", "action", "reason"]) {
        if (typeof event[field] !== "string" || event[field] === "") problems.push(`${field}: Required value`);
      }
      for (const field of ["reportingInstance", "action", "reason"]) {
        if (typeof event[field] === "string" && (event[field] as string).length > 128) problems.push(`${field}: Too long: may not be more than 128 bytes`);
      }
      if (typeof event["note"] === "string" && Buffer.byteLength(event["note"] as string) > 1024) problems.push("note: Too long: may not be more than 1024 bytes");
      if (event["type"] !== "Normal" && event["type"] !== "Warning") problems.push(`type: Unsupported value: ${JSON.stringify(event["type"])}`);
      if (event.metadata?.namespace !== undefined && event.metadata.namespace !== m[1]) problems.push("metadata.namespace: does not match the namespace of the path");
      if (!event.metadata?.name) problems.push("metadata.name: Required value");
      if (problems.length > 0) return send(res, 422, status(422, "Invalid", `Event.events.k8s.io "${event.metadata?.name ?? ""}" is invalid: ${problems.join(", ")}`));
      const stored = { ...event, metadata: { ...event.metadata, namespace: m[1]!, resourceVersion: nextRV() } };
      fake.events.push({ event: stored, by: bearer });
      return send(res, 201, stored);
    }
    if (p === "/apis/authentication.k8s.io/v1/tokenreviews" && req.method === "POST") {
      if (fake.failing.has("tokenreviews")) return send(res, 500, status(500, "InternalError", "tokenreviews are failing (fake)"));
      if (fake.hanging.has("tokenreviews")) return hang(req);
      const spec = (body as { spec: { token: string } }).spec;
      fake.reviews.tokenReviews.push(spec.token);
      const user = fake.tokens.get(spec.token);
      return send(res, 201, {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenReview",
        metadata: {},
        spec,
        status: user ? { authenticated: true, user } : { authenticated: false, error: "token not found (fake)" },
      });
    }
    if (p === "/apis/authorization.k8s.io/v1/subjectaccessreviews" && req.method === "POST") {
      if (fake.failing.has("subjectaccessreviews")) return send(res, 500, status(500, "InternalError", "subjectaccessreviews are failing (fake)"));
      if (fake.hanging.has("subjectaccessreviews")) return hang(req);
      const spec = (body as { spec: SubjectAccessReviewSpec }).spec;
      fake.reviews.subjectAccessReviews.push(spec);
      return send(res, 201, { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", metadata: {}, spec, status: fake.authorize(spec) });
    }
    if ((m = p.match(/^\/apis\/apiregistration\.k8s\.io\/v1\/apiservices(?:\/([^/]+))?$/))) {
      if (fake.failing.has("apiservices")) return send(res, 500, status(500, "InternalError", "apiservices are failing (fake)"));
      if (fake.hanging.has("apiservices")) return hang(req);
      if (req.method === "GET" && m[1]) {
        const obj = fake.apiServices.get(m[1]);
        return obj ? send(res, 200, obj) : send(res, 404, status(404, "NotFound", `apiservices.apiregistration.k8s.io "${m[1]}" not found`));
      }
      if (req.method === "POST" && !m[1]) {
        const obj = body as KubeObject;
        if (fake.apiServices.has(obj.metadata.name)) return send(res, 409, status(409, "AlreadyExists", "already exists"));
        const stored = { ...obj, metadata: { ...obj.metadata, resourceVersion: nextRV() } };
        fake.apiServices.set(obj.metadata.name, stored);
        fake.apiServiceWrites.push({ method: "POST", name: obj.metadata.name });
        fake.writes.push({ resource: "apiservices", method: "POST", name: obj.metadata.name, by: bearer });
        return send(res, 201, stored);
      }
      if (req.method === "PUT" && m[1]) {
        const obj = body as KubeObject;
        const current = fake.apiServices.get(m[1]);
        if (!current) return send(res, 404, status(404, "NotFound", "not found"));
        if (obj.metadata.resourceVersion !== current.metadata.resourceVersion) return send(res, 409, status(409, "Conflict", "the object has been modified"));
        const stored = { ...obj, metadata: { ...obj.metadata, resourceVersion: nextRV() } };
        fake.apiServices.set(m[1], stored);
        fake.apiServiceWrites.push({ method: "PUT", name: m[1] });
        fake.writes.push({ resource: "apiservices", method: "PUT", name: m[1], by: bearer });
        return send(res, 200, stored);
      }
    }
    if ((m = p.match(/^\/apis\/autoscaling\/v2\/(?:namespaces\/([^/]+)\/)?horizontalpodautoscalers$/)) && req.method === "GET") {
      const namespace = m[1];
      fake.listsAndWatches.push({ resource: "horizontalpodautoscalers", watch: false });
      // list items of a built-in kind carry no apiVersion/kind (the List does)
      const items = [...fake.hpas.values()].filter((o) => namespace === undefined || o.metadata.namespace === namespace).map(({ apiVersion: _a, kind: _k, ...o }) => o);
      return send(res, 200, { apiVersion: "autoscaling/v2", kind: "HorizontalPodAutoscalerList", metadata: { resourceVersion: String(rv) }, items });
    }
    if ((m = p.match(/^\/apis\/admissionregistration\.k8s\.io\/v1\/validatingwebhookconfigurations\/([^/]+)$/))) {
      const current = fake.webhookConfigurations.get(m[1]!);
      if (!current) return send(res, 404, status(404, "NotFound", `validatingwebhookconfigurations.admissionregistration.k8s.io "${m[1]}" not found`));
      if (req.method === "GET") return send(res, 200, current);
      if (req.method === "PUT") {
        const obj = body as KubeObject;
        if (obj.metadata.resourceVersion !== current.metadata.resourceVersion) return send(res, 409, status(409, "Conflict", "the object has been modified"));
        const stored = { ...obj, metadata: { ...obj.metadata, resourceVersion: nextRV() } };
        fake.webhookConfigurations.set(m[1]!, stored);
        return send(res, 200, stored);
      }
    }
    return send(res, 404, status(404, "NotFound", `the server could not find the requested resource (${req.method} ${p})`));
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}

/** The key an object is stored under in etcd, below its resource's prefix: `namespace/name`, or `name` (the order of a list). */
function etcdKey(obj: KubeObject): string {
  return obj.metadata.namespace !== undefined ? `${obj.metadata.namespace}/${obj.metadata.name}` : obj.metadata.name;
}

/** `configmaps` / `secrets` for a namespaced collection path of those, else undefined. */
function p_collection(path: string): string | undefined {
  return path.match(/^\/api\/v1\/namespaces\/[^/]+\/(configmaps|secrets)$/)?.[1];
}

function fieldName(selector: string | null): string | undefined {
  const m = selector?.match(/^metadata\.name==?(.+)$/);
  return m?.[1];
}

function status(code: number, reason: string, message: string) {
  return { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, code };
}

function send(res: ServerResponse, code: number, body: unknown) {
  if (res.headersSent) return void res.end();
  res.writeHead(code, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

/**
 * An authorizer in the spirit of RBAC for tests: allow when a rule's subject,
 * verb and resource (or non-resource path) match.
 */
export interface FakeRule {
  users?: string[];
  groups?: string[];
  /** restrict to one namespace (a Role); omitted = cluster-wide (a ClusterRole) */
  namespace?: string;
  verbs: string[];
  apiGroups?: string[];
  /** resource names (here: metric names); `*` = all */
  resources?: string[];
  nonResourceURLs?: string[];
}

/** Build an authorize function from rules. */
export function rbac(rules: FakeRule[]): (spec: SubjectAccessReviewSpec) => SubjectAccessReviewStatus {
  return (spec) => {
    for (const rule of rules) {
      const subject = (rule.users?.includes(spec.user ?? "") ?? false) || (rule.groups?.some((g) => spec.groups?.includes(g)) ?? false);
      if (!subject) continue;
      const ra = spec.resourceAttributes;
      if (ra !== undefined) {
        if (rule.resources === undefined) continue;
        if (rule.namespace !== undefined && rule.namespace !== ra.namespace) continue;
        if (!rule.verbs.includes("*") && !rule.verbs.includes(ra.verb ?? "")) continue;
        if (!(rule.apiGroups ?? []).includes("*") && !(rule.apiGroups ?? []).includes(ra.group ?? "")) continue;
        if (!rule.resources.includes("*") && !rule.resources.includes(ra.resource ?? "")) continue;
        return { allowed: true, reason: "allowed by fake RBAC" };
      }
      const nr = spec.nonResourceAttributes;
      if (nr !== undefined && rule.nonResourceURLs !== undefined) {
        if (!rule.verbs.includes("*") && !rule.verbs.includes(nr.verb)) continue;
        if (rule.nonResourceURLs.includes("*") || rule.nonResourceURLs.includes(nr.path)) return { allowed: true, reason: "allowed by fake RBAC" };
      }
    }
    return { allowed: false, reason: "no RBAC rule matched (fake)" };
  };
}
