/**
 * The backend contract: what the proxy's {@link Forwarder} (forward.ts) and
 * every kind of backend share — a network client (backends.ts
 * `BackendClient`: `bridge` and `passthrough`) or the bridge in this process
 * (in-process.ts `InProcessBackend`): the request and answer, the error with
 * its kinds, the options, the response limit and the paths a backend is
 * asked. Backends and the forwarder import it; none of them imports another
 * for these.
 */
import type { Registry } from "prom-client";
import type { Caller } from "../../identity.ts";
import { GROUP_VERSION } from "../../k8s/types.ts";
import type { SigningKey } from "../../signing.ts";
import type { ExternalValuesParts } from "../../values/request.ts";
import type { CustomValuesRead } from "../../values/custom-read.ts";
import { CUSTOM_GROUP } from "../../k8s/custom-types.ts";
import type { BackendConfig } from "../config.ts";
import type { LogRecord } from "../log.ts";

/** Largest backend answer read, bytes. */
export const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

/** The discovery path. */
export const DISCOVERY_PATH = `/apis/${GROUP_VERSION}`;
/** The prefix of every values read (`…/namespaces/<ns>/<metric>`): its answers never carry Retry-After. */
export const VALUES_PATH_PREFIX = `${DISCOVERY_PATH}/namespaces/`;
/** The prefix of the custom.metrics.k8s.io paths (`/apis/custom.metrics.k8s.io`). */
export const CUSTOM_GROUP_PATH = `/apis/${CUSTOM_GROUP}`;

/** A custom read's parts as a backend in this process takes them (`CustomValuesRead` without the call's own fields). */
export type CustomReadParts = Omit<CustomValuesRead, "caller" | "signal" | "requestId">;

/** A backend's answer. */
export interface BackendResponse {
  status: number;
  /** lowercase header names */
  headers: Record<string, string>;
  body: Buffer;
}

/** Why a backend call failed. */
export type BackendErrorKind = "timeout" | "connect" | "protocol" | "too-large" | "unsigned" | "aborted";

/** A failed backend call (no HTTP answer to pass on). */
export class BackendError extends Error {
  readonly kind: BackendErrorKind;
  readonly backend: string;
  constructor(backend: string, kind: BackendErrorKind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "BackendError";
    this.backend = backend;
    this.kind = kind;
  }
}

/** What a request to a backend carries. */
export interface BackendRequest {
  /** path and query, e.g. `/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/m?labelSelector=…` */
  pathAndQuery: string;
  /**
   * a values read's typed parts, parsed once by the proxy (shared/k8s/request-path.ts):
   * what `pathAndQuery` names; the in-process bridge reads these (its
   * `readValues`), network backends send `pathAndQuery`. Absent for discovery.
   */
  values?: ExternalValuesParts;
  /**
   * a custom values read's typed parts (the pods or object the proxy
   * resolved included): the in-process bridge reads these (`readCustom`);
   * network backends send `pathAndQuery` (a bridge with `body`, POST)
   */
  custom?: CustomReadParts;
  /**
   * the JSON body of a custom read to a bridge backend (contract C2: `{"pods": […]}`,
   * `{"object": {…}}` or `{}`): sent with POST and signed with
   * `EMB-HMAC-SHA256-3`; absent: GET
   */
  body?: Uint8Array;
  /** the authenticated caller (signed to bridge backends) */
  caller: Caller;
  requestId: string;
  /** cancels the call (the connection is destroyed; rejects with kind `aborted`) */
  signal?: AbortSignal;
}

/** Options shared by all backends. */
export interface BackendClientOptions {
  /** current signing keys (first signs); undefined = none configured */
  signingKeys: () => readonly SigningKey[] | undefined;
  /** clock, ms since the epoch (request signatures, the backends.ts {@link CA_RECHECK_MS} period of a `caFile`) */
  now?: () => number;
  /** the proxy's log (a `caFile` that cannot be re-read; an in-process bridge's warnings and errors) */
  log?: (record: LogRecord) => void;
}

/**
 * What the {@link Forwarder} (forward.ts) calls: a network client
 * ({@link BackendClient}, backends.ts) or the bridge in this process
 * (`in-process.ts` `InProcessBackend`).
 */
export interface Backend {
  readonly name: string;
  readonly config: BackendConfig;
  /** the deadline of one call, ms (`timeoutSeconds`) */
  readonly timeoutMs: number;
  /**
   * Make one call: GET, or POST when `request.body` is set.
   * @throws BackendError (kinds as backends.ts {@link BackendClient.get})
   */
  get(request: BackendRequest): Promise<BackendResponse>;
  /** Release connections (or nothing). */
  close(): void;
}

/** Options of {@link createBackend} (backends.ts). */
export interface CreateBackendOptions extends BackendClientOptions {
  /** environment of an in-process bridge's providers (cloud credentials); default `process.env` */
  env?: Readonly<Record<string, string | undefined>>;
  /**
   * the proxy's Prometheus registry (its `/metrics`): an in-process bridge
   * adds its `emb_bridge_*` families there, once per registry whatever the
   * number of inProcess backends (in-process.ts); network backends ignore it
   */
  registry?: Registry;
}
