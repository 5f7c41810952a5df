/**
 * The proxy's authorization attributes against kube-apiserver's own code.
 *
 * test/proxy-oracle/ is a Go program built from k8s.io/apiserver v0.37.2:
 * its RequestInfoFactory, `filters.GetAuthorizerAttributes`, and the
 * delegated webhook authorizer aggregated API servers use
 * (`authorizerfactory.DelegatingAuthorizerConfig`), which sends a real
 * SubjectAccessReview to a recording endpoint. For thousands of requests
 * (methods × paths × queries × callers) the oracle's request info and
 * review spec must equal what shared/proxy/request-info.ts and
 * authorize.ts compute.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { reviewSpec } from "../../shared/proxy/authz/authorize.ts";
import { requestInfo } from "../../shared/proxy/request-info.ts";
import type { Caller } from "../../shared/identity.ts";
import { goBinary } from "../../infra/tools/go.ts";

const ORACLE_DIR = fileURLToPath(new URL("../proxy-oracle/", import.meta.url));
const V1 = "/apis/external.metrics.k8s.io/v1beta1";

interface Case {
  method: string;
  url: string;
  user: { name: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
}

interface GoRequestInfo {
  IsResourceRequest: boolean;
  Path: string;
  Verb: string;
  APIGroup: string;
  APIVersion: string;
  Namespace: string;
  Resource: string;
  Subresource: string;
  Name: string;
}

interface OracleAnswer {
  requestInfo?: GoRequestInfo;
  review?: unknown;
  error?: string;
}

const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
const PATHS = [
  "/",
  "/apis",
  "/apis/",
  "/apis/external.metrics.k8s.io",
  V1,
  `${V1}/`,
  `${V1}/namespaces`,
  `${V1}/namespaces/team-a`,
  `${V1}/namespaces/team-a/queue_messages_ready`,
  `${V1}/namespaces/team-a/queue_messages_ready/`,
  `${V1}/namespaces/team-a/Queue_Messages_Ready`,
  `${V1}/namespaces/team-a/team%7Cqueue_depth`,
  `${V1}/namespaces/team-a/team|queue_depth`,
  `${V1}/namespaces/team-a/a%2Fb`,
  `${V1}/namespaces/team-a/%71ueue`,
  `${V1}/namespaces/team-a/m/name`,
  `${V1}/namespaces/team-a/m/name/sub`,
  `${V1}/namespaces/team-a/m/name/sub/more`,
  `${V1}/namespaces/team-a/status`,
  `${V1}/namespaces/team-a/finalize`,
  `${V1}/namespaces/team-a/status/x`,
  `${V1}/m`,
  `${V1}/m/n`,
  `${V1}/watch/namespaces/team-a/m`,
  `${V1}/watch/m`,
  `${V1}/watch/m/n/sub`,
  `${V1}/proxy/namespaces/team-a/m/n/x`,
  `${V1}/proxy/m/n`,
  "/api/v1/namespaces/team-a/pods",
  "/api/v1/pods",
  "/api/v1",
  "/api",
  "/metrics",
  "/healthz",
  "/openapi/v2",
  "/apis/metrics.k8s.io/v1beta1/namespaces/x/pods",
  // custom.metrics.k8s.io (issue 26): the shapes the HPA's client sends, and near misses
  "/apis/custom.metrics.k8s.io",
  "/apis/custom.metrics.k8s.io/v1beta2",
  "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/pods/%2A/http_requests",
  "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/pods/*/http_requests",
  "/apis/custom.metrics.k8s.io/v1beta1/namespaces/team-a/ingresses.networking.k8s.io/web/rps",
  "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/metrics/queue_depth",
  "/apis/custom.metrics.k8s.io/v1beta2/nodes/node-1/cpu_load",
  "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/services/frontend/latency/extra",
];
const QUERIES = [
  "",
  "?labelSelector=queue%3Dworker_tasks",
  "?labelSelector=queue+in+%28a%2Cb%29",
  `?labelSelector=${encodeURIComponent("b in (y,x,x),a!=1,c,!d,e>3,f==z,g notin (q),h<7")}`,
  `?labelSelector=${encodeURIComponent("x=1,x=2")}`,
  `?labelSelector=${encodeURIComponent("a in (")}`,
  `?labelSelector=${encodeURIComponent("  ")}`,
  "?labelSelector=",
  "?labelSelector=a%3D1&labelSelector=b%3D2",
  "?watch=true",
  "?watch=1",
  "?watch=0",
  "?watch=false",
  "?watch=FALSE",
  "?watch=yes",
  "?watch=",
  "?watch=true&labelSelector=a%3D1",
  "?fieldSelector=metadata.name%3Dx",
  "?fieldSelector=metadata.name%3D%3Dx",
  "?fieldSelector=metadata.name!%3Dx",
  `?fieldSelector=${encodeURIComponent("b=2,a=1,metadata.name=n")}`,
  `?fieldSelector=${encodeURIComponent("a=x\\,y,b=z\\=w")}`,
  `?fieldSelector=${encodeURIComponent("nonsense")}`,
  `?fieldSelector=${encodeURIComponent("a=b=c")}`,
  `?fieldSelector=${encodeURIComponent("metadata.name=a/b")}`,
  `?fieldSelector=${encodeURIComponent("metadata.name=x")}&labelSelector=${encodeURIComponent("a in (")}`,
  `?fieldSelector=${encodeURIComponent("=")}`,
  "?limit=abc",
];
const USERS: Case["user"][] = [
  { name: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", groups: ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"] },
  { name: "jane", uid: "u-1", groups: ["team,a", "system:authenticated"], extra: { scopes: ["a", "b"], "acme.com/team": ["blue"] } },
  { name: "system:anonymous", groups: ["system:unauthenticated"] },
];

function cases(): Case[] {
  const out: Case[] = [];
  let u = 0;
  for (const method of METHODS) for (const path of PATHS) for (const query of QUERIES) out.push({ method, url: `https://proxy.invalid${path}${query}`, user: USERS[u++ % USERS.length]! });
  return out;
}

let binary = "";

beforeAll(() => {
  binary = goBinary(ORACLE_DIR, "proxy-oracle", { timeoutMs: 15 * 60_000 });
}, 16 * 60_000);

function ask(list: Case[]): OracleAnswer[] {
  const run = spawnSync(binary, [], { input: list.map((c) => JSON.stringify(c)).join("\n") + "\n", encoding: "utf8", maxBuffer: 1 << 30, timeout: 120_000 });
  if (run.status !== 0) throw new Error(`oracle failed: ${run.stderr}`);
  const lines = run.stdout.split("\n").filter((l) => l !== "");
  expect(lines.length).toBe(list.length);
  return lines.map((l) => JSON.parse(l) as OracleAnswer);
}

/** Ours, in the oracle's shape. */
function ours(c: Case): OracleAnswer {
  let info;
  try {
    info = requestInfo(c.method, new URL(c.url));
  } catch (err) {
    return { error: (err as Error).message };
  }
  const caller: Caller = { user: c.user.name, ...(c.user.uid ? { uid: c.user.uid } : {}), groups: c.user.groups ?? [], extra: c.user.extra ?? {} };
  return {
    requestInfo: {
      IsResourceRequest: info.isResourceRequest,
      Path: info.path,
      Verb: info.verb,
      APIGroup: info.apiGroup,
      APIVersion: info.apiVersion,
      Namespace: info.namespace,
      Resource: info.resource,
      Subresource: info.subresource,
      Name: info.name,
    },
    review: JSON.parse(JSON.stringify(reviewSpec(caller, info))),
  };
}

describe("request attributes against k8s.io/apiserver v0.37.2", () => {
  it("equal the oracle's request info and SubjectAccessReview for every case", () => {
    const list = cases();
    const theirs = ask(list);
    const mismatches: string[] = [];
    list.forEach((c, i) => {
      const expected = theirs[i]!;
      const got = ours(c);
      if (expected.error !== undefined || got.error !== undefined) {
        if ((expected.error === undefined) !== (got.error === undefined)) {
          mismatches.push(`${c.method} ${c.url}: oracle error ${JSON.stringify(expected.error)}, ours ${JSON.stringify(got.error)}`);
        }
        return;
      }
      const info = expected.requestInfo!;
      const picked = {
        IsResourceRequest: info.IsResourceRequest,
        Path: info.Path,
        Verb: info.Verb,
        APIGroup: info.APIGroup,
        APIVersion: info.APIVersion,
        Namespace: info.Namespace,
        Resource: info.Resource,
        Subresource: info.Subresource,
        Name: info.Name,
      };
      const a = JSON.stringify(sortKeys({ info: picked, review: expected.review }));
      const b = JSON.stringify(sortKeys({ info: got.requestInfo, review: got.review }));
      if (a !== b) mismatches.push(`${c.method} ${c.url}\n  oracle: ${a}\n  ours:   ${b}`);
    });
    expect(mismatches.slice(0, 10), `${mismatches.length} of ${list.length} cases differ`).toEqual([]);
    expect(list.length).toBeGreaterThan(5000);
  });
});

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.keys(value as object)
      .sort()
      .map((k) => [k, sortKeys((value as Record<string, unknown>)[k])]),
  );
}
