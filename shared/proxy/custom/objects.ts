/**
 * The described object of a custom.metrics.k8s.io Object read
 * (`…/namespaces/{ns}/{resource}/{name}/{metric}` or, cluster-scoped,
 * `…/{resource}/{name}/{metric}`): read with the proxy's own RBAC and reduced
 * to the bridge's `DescribedObject` (kind, apiVersion, name, namespace,
 * labels, annotations, status; shared/values/custom-read.ts), contract C3.
 *
 * - The group resource as the path writes it (`services`,
 *   `ingresses.networking.k8s.io`) maps to its URL by discovery, as
 *   client-go's RESTMapper does: the core group's `/api/v1`, else
 *   `/apis/{group}` (the APIGroup's `preferredVersion`) then
 *   `/apis/{group}/{version}` (the APIResourceList: the resource's
 *   `namespaced` and `kind`). Answers are cached
 *   ({@link DISCOVERY_CACHE_BOUNDS}: entries and bytes; {@link DISCOVERY_TTL_MS}),
 *   failures are not.
 * - The GET has the configured deadline (ProxyConfig
 *   `customMetrics.objects.timeoutMs`) and body limit (`maxBytes`, at most
 *   64 KiB); discovery calls the same deadline and {@link DISCOVERY_MAX_BYTES}.
 * - Errors are Status: 404 (the API has no such resource, or no such
 *   object; a resource whose scope does not match the path), 403 naming the
 *   proxy's missing RBAC, 500 for an object over the limit, 503 without
 *   Retry-After for a deadline or an unreachable API.
 */
import { BoundedMap } from "../../cache/bounded-map.ts";
import { CUSTOM_GROUP } from "../../k8s/custom-types.ts";
import type { CustomMetricsRead } from "../../k8s/request-path.ts";
import { forbidden, internalError, notFound, StatusError } from "../../k8s/status.ts";
import type { APIGroup, APIResourceList } from "../../k8s/types.ts";
import type { DescribedObject } from "../../values/custom-read.ts";
import { ApiError, ResponseTooLargeError, type KubeClient, type KubeObject } from "../kube/client.ts";

/** Bounds of the group resource → URL cache: entries, bytes (estimated). */
export const DISCOVERY_CACHE_BOUNDS = { maxEntries: 512, maxBytes: 256 * 1024 } as const;
/** How long a resolved group resource is re-used, ms (a CRD installed or removed is seen this late). */
export const DISCOVERY_TTL_MS = 5 * 60_000;
/** Largest discovery answer read (an APIResourceList of a large group), bytes. */
export const DISCOVERY_MAX_BYTES = 1024 * 1024;

/** Where a group resource lives. */
export interface ResolvedResource {
  /** `/api/v1` or `/apis/{group}/{version}` */
  base: string;
  /** the plural resource name (`ingresses`) */
  resource: string;
  namespaced: boolean;
  kind: string;
  /** `v1` or `{group}/{version}` */
  apiVersion: string;
}

/** Options of {@link ObjectReader}. */
export interface ObjectReaderOptions {
  kc: KubeClient;
  /** largest object body, bytes */
  maxBytes: number;
  /** deadline of each call, ms */
  timeoutMs: number;
  now?: () => number;
}

/** Reads described objects (one per proxy). */
export class ObjectReader {
  readonly #o: ObjectReaderOptions;
  readonly #now: () => number;
  readonly #resolved = new BoundedMap<string, { at: number; value: ResolvedResource }>({
    ...DISCOVERY_CACHE_BOUNDS,
    sizeOf: (key, v) => (key.length + v.value.base.length + v.value.resource.length + v.value.kind.length + v.value.apiVersion.length) * 2 + 128,
  });

  constructor(options: ObjectReaderOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  /** Entries and bytes of the discovery cache. */
  get cacheStats(): { entries: number; bytes: number } {
    return { entries: this.#resolved.size, bytes: this.#resolved.bytes };
  }

  /**
   * The object an Object read describes, reduced to a {@link DescribedObject}.
   *
   * @param read an `object` read (shared/k8s/request-path.ts `customMetricsRead`)
   * @param signal the caller's departure (each call also has its own deadline)
   * @throws StatusError as described in the module doc
   */
  async read(read: CustomMetricsRead, signal?: AbortSignal): Promise<DescribedObject> {
    const where = await this.resolve(read.resource, signal);
    const cluster = read.namespace === "";
    if (where.namespaced === cluster) {
      throw notFound(
        `${read.resource} is ${where.namespaced ? "namespaced" : "cluster-scoped"}: its objects are read ${where.namespaced ? "as …/namespaces/{namespace}/" : "without a namespace, as …/"}${read.resource}/{name}/{metric}`,
        { name: read.name, group: CUSTOM_GROUP, kind: read.resource },
      );
    }
    const path = `${where.base}${cluster ? "" : `/namespaces/${encodeURIComponent(read.namespace)}`}/${where.resource}/${encodeURIComponent(read.name)}`;
    const what = `${read.resource} ${JSON.stringify(read.name)}${cluster ? "" : ` in namespace ${JSON.stringify(read.namespace)}`}`;
    let obj: KubeObject & { status?: unknown };
    try {
      obj = await this.#o.kc.get<KubeObject & { status?: unknown }>(path, { signal: this.#signal(signal), maxBytes: this.#o.maxBytes });
    } catch (err) {
      throw this.#failure(err, what, `get ${where.resource}${where.apiVersion.includes("/") ? ` (${where.apiVersion.split("/")[0]})` : ""}`, read);
    }
    const meta = obj?.metadata ?? {};
    return {
      kind: typeof obj?.kind === "string" && obj.kind !== "" ? obj.kind : where.kind,
      apiVersion: typeof obj?.apiVersion === "string" && obj.apiVersion !== "" ? obj.apiVersion : where.apiVersion,
      name: typeof meta.name === "string" ? meta.name : read.name,
      ...(!cluster ? { namespace: typeof meta.namespace === "string" ? meta.namespace : read.namespace } : {}),
      ...(isStringMap(meta.labels) ? { labels: meta.labels } : {}),
      ...(isStringMap(meta.annotations) ? { annotations: meta.annotations } : {}),
      ...(obj?.status !== undefined ? { status: obj.status } : {}),
    };
  }

  /**
   * Where `groupResource` (`services`, `ingresses.networking.k8s.io`) lives, by discovery (cached).
   *
   * @throws StatusError 404 when the API serves no such resource; 403/503 as {@link read}
   */
  async resolve(groupResource: string, signal?: AbortSignal): Promise<ResolvedResource> {
    const known = this.#resolved.get(groupResource);
    if (known !== undefined && this.#now() - known.at < DISCOVERY_TTL_MS) return known.value;
    const dot = groupResource.indexOf(".");
    const plural = dot < 0 ? groupResource : groupResource.slice(0, dot);
    const group = dot < 0 ? "" : groupResource.slice(dot + 1);
    const missing = () => notFound(`the cluster serves no resource ${JSON.stringify(groupResource)}: no described objects to read`, { name: groupResource, group: CUSTOM_GROUP, kind: groupResource });
    let base: string;
    let apiVersion: string;
    try {
      if (group === "") {
        base = "/api/v1";
        apiVersion = "v1";
      } else {
        const apiGroup = await this.#o.kc.get<APIGroup & KubeObject>(`/apis/${encodeURIComponent(group)}`, { signal: this.#signal(signal), maxBytes: DISCOVERY_MAX_BYTES });
        const gv = apiGroup?.preferredVersion?.groupVersion;
        if (typeof gv !== "string" || !gv.startsWith(`${group}/`)) throw missing();
        base = `/apis/${gv}`;
        apiVersion = gv;
      }
      const list = await this.#o.kc.get<APIResourceList<string> & KubeObject>(base, { signal: this.#signal(signal), maxBytes: DISCOVERY_MAX_BYTES });
      const entry = Array.isArray(list?.resources) ? list.resources.find((r) => r?.name === plural) : undefined;
      if (entry === undefined || typeof entry.kind !== "string") throw missing();
      const value: ResolvedResource = { base, resource: plural, namespaced: entry.namespaced === true, kind: entry.kind, apiVersion };
      this.#resolved.set(groupResource, { at: this.#now(), value });
      return value;
    } catch (err) {
      if (err instanceof StatusError) throw err;
      if (err instanceof ApiError && err.code === 404) throw missing();
      throw this.#failure(err, `the discovery of ${JSON.stringify(groupResource)}`, "get (discovery)", undefined);
    }
  }

  #signal(signal: AbortSignal | undefined): AbortSignal {
    const deadline = AbortSignal.timeout(this.#o.timeoutMs);
    return signal === undefined ? deadline : AbortSignal.any([signal, deadline]);
  }

  /** A failed call as the Status to answer (see the module doc). */
  #failure(err: unknown, what: string, verb: string, read: CustomMetricsRead | undefined): StatusError {
    const details = read !== undefined ? { name: read.name, group: CUSTOM_GROUP, kind: read.resource } : undefined;
    if (err instanceof ApiError) {
      if (err.code === 404) return notFound(`${what} not found`, details);
      if (err.code === 403) {
        return forbidden(
          `the proxy may not read ${what}: its ServiceAccount lacks RBAC "${verb}"; grant it (the chart: customMetrics.objectResources) (${err.status.message ?? "forbidden"})`,
          details,
        );
      }
      return new StatusError(503, `the proxy could not read ${what}: the API answered ${err.code}: ${(err.status.message ?? "").slice(0, 300)}`, details);
    }
    if (err instanceof ResponseTooLargeError) return internalError(`${what} is larger than ${err.limit} bytes: the proxy does not read it (ProxyConfig customMetrics.objects.maxBytes)`, details);
    if ((err as Error)?.name === "TimeoutError") return new StatusError(503, `the proxy could not read ${what} within ${this.#o.timeoutMs} ms; no value is reported`, details);
    return new StatusError(503, `the proxy could not read ${what}: ${(err as Error)?.message ?? String(err)}`, details);
  }
}

function isStringMap(value: unknown): value is Record<string, string> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  for (const v of Object.values(value)) if (typeof v !== "string") return false;
  return true;
}
