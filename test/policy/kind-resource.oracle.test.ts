/**
 * check-hpa's group resource of an Object metric's describedObject
 * (shared/policy/check-hpa.ts `guessGroupResource`) against the Go function
 * it ports, apimachinery's `meta.UnsafeGuessKindToResource` with
 * `schema.FromAPIVersionAndKind` (k8s.io/apimachinery
 * `pkg/api/meta/restmapper.go`), run through the oracle of test/oracle
 * (op `guessResource`): the cases of restmapper_test.go's
 * `TestKindToResource` and `TestRESTMapperResourceSingularizer`, the kinds an
 * HPA describes, odd apiVersions, and generated kinds.
 */
import { beforeAll, describe, expect, it } from "vitest";
import fc from "fast-check";
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { goBinary } from "../../infra/tools/go.ts";
import { guessGroupResource } from "../../shared/policy/check-hpa.ts";
import { fcRuns } from "../helpers/fc.ts";

const ORACLE_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "oracle");
let oracle = "";

/** The Go answers for [apiVersion, kind] pairs, in order. */
function goGuess(pairs: readonly (readonly [string, string])[]): string[] {
  const input = pairs.map(([apiVersion, kind]) => JSON.stringify({ op: "guessResource", input: apiVersion, kind })).join("\n") + "\n";
  const run = spawnSync(oracle, [], { input, encoding: "utf8", maxBuffer: 1 << 28, timeout: 120_000 });
  if (run.status !== 0) throw new Error(`oracle failed (${run.status ?? run.signal}): ${run.stderr}`);
  const lines = run.stdout.split("\n").filter((l) => l.length > 0);
  expect(lines).toHaveLength(pairs.length);
  return lines.map((l) => {
    const a = JSON.parse(l) as { ok: boolean; string?: string; protocolError?: string };
    if (a.protocolError !== undefined) throw new Error(a.protocolError);
    return a.string ?? "";
  });
}

beforeAll(() => {
  oracle = goBinary(ORACLE_DIR, "selector-oracle");
}, 20 * 60_000);

// [apiVersion, kind, expected]: restmapper_test.go's tables (version-less there), then kinds HPAs describe
const CASES: [string, string, string][] = [
  ["", "Pod", "pods"],
  ["", "ReplicationController", "replicationcontrollers"],
  ["", "ImageRepository", "imagerepositories"],
  ["", "miss", "misses"],
  ["", "lowercase", "lowercases"],
  ["tgroup/test", "Status", "statuses.tgroup"],
  ["v1", "Namespace", "namespaces"],
  ["v1", "Service", "services"],
  ["v1", "Endpoints", "endpoints"],
  ["discovery.k8s.io/v1", "EndpointSlice", "endpointslices.discovery.k8s.io"],
  ["networking.k8s.io/v1", "Ingress", "ingresses.networking.k8s.io"],
  ["networking.k8s.io/v1", "NetworkPolicy", "networkpolicies.networking.k8s.io"],
  ["apps/v1", "Deployment", "deployments.apps"],
  ["elbv2.k8s.aws/v1beta1", "TargetGroupBinding", "targetgroupbindings.elbv2.k8s.aws"],
  ["sqs.services.k8s.aws/v1alpha1", "Queue", "queues.sqs.services.k8s.aws"],
  ["a/b/c", "Widget", "widgets"],
  ["/", "Widget", "widgets"],
  ["/v1", "Widget", "widgets"],
  ["g/", "Box", "boxs.g"],
  ["v1", "", ""],
];

describe("guessGroupResource (apimachinery UnsafeGuessKindToResource)", () => {
  it("answers the table as the Go function does, and as the table says", () => {
    const go = goGuess(CASES.map(([v, k]) => [v, k] as const));
    expect(CASES.map(([v, k]) => guessGroupResource(v, k))).toEqual(go);
    expect(go).toEqual(CASES.map(([, , want]) => want));
  });

  it("agrees with the Go function on generated kinds and apiVersions", () => {
    const kind = fc.stringMatching(/^[A-Za-z][A-Za-z0-9]{0,20}(s|y|S|Y|endpoints|Endpoints)?$/);
    const apiVersion = fc.oneof(
      fc.constantFrom("", "v1", "apps/v1", "/", "a/b/c", "x.example.com/v1beta1"),
      fc.stringMatching(/^[a-z0-9./]{0,20}$/),
    );
    const pairs = fc.sample(fc.tuple(apiVersion, kind), fcRuns(2000).numRuns ?? 2000);
    const go = goGuess(pairs);
    const mismatches = pairs.flatMap((p, i) => (guessGroupResource(p[0], p[1]) === go[i] ? [] : [`${JSON.stringify(p)}: go ${go[i]}, ts ${guessGroupResource(p[0], p[1])}`]));
    expect(mismatches).toEqual([]);
  });
});
