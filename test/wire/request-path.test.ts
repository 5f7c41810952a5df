/**
 * The one request path parser (shared/k8s/request-path.ts): what it
 * refuses, what real clients send that it reads, the RequestInfo-shaped parts
 * and the canonical spellings it rebuilds. Go's own escaping is checked
 * against net/url in test/wire/request-path.oracle.test.ts.
 */
import { describe, expect, it } from "vitest";
import {
  canonicalQuery,
  customMetricsPath,
  customMetricsRead,
  escapePathSegment,
  escapeQueryComponent,
  externalMetricsPath,
  externalMetricsRead,
  isDNS1123Label,
  parseRequestPath,
  parseRequestTarget,
} from "../../shared/k8s/request-path.ts";
import { StatusError } from "../../shared/k8s/status.ts";
import { requestInfo } from "../../shared/proxy/request-info.ts";

const V1 = "/apis/external.metrics.k8s.io/v1beta1";

/** The StatusError code `fn` throws, or "ok". */
function outcome(fn: () => unknown): number | "ok" {
  try {
    fn();
    return "ok";
  } catch (err) {
    if (err instanceof StatusError) return err.code;
    throw err;
  }
}

describe("parseRequestPath refuses", () => {
  const refused: [string, string, RegExp][] = [
    ["an encoded unreserved letter", `${V1}/namespaces/%74eam-b/m`, /encodes "t", which must be written as is/],
    ["two encoded letters", `${V1}/namespaces/%74%65am-b/m`, /encodes "t"/],
    ["an encoded hyphen, uppercase hex", `${V1}/namespaces/team%2Db/m`, /namespace "team%2Db": "%2D" encodes "-"/],
    ["an encoded hyphen, lowercase hex", `${V1}/namespaces/team%2db/m`, /lowercase hex/],
    ["an encoded digit", `${V1}/namespaces/team-%31/m`, /encodes "1"/],
    ["an encoded tilde", `${V1}/namespaces/team-b/a%7Eb`, /encodes "~"/],
    ["an encoded underscore", `${V1}/namespaces/team-b/queue%5Fdepth`, /encodes "_"/],
    ["an encoded slash", `${V1}/namespaces/team-b%2Fqueue_messages_ready/secret_depth`, /encoded "\/"/],
    ["an encoded slash, lowercase", `${V1}/namespaces/team-b%2fm/x`, /lowercase hex/],
    ["an encoded dot-dot", `${V1}/namespaces/team-a/%2E%2E/team-b/m`, /encodes "\."/],
    ["an encoded dot", `${V1}/namespaces/team-b/%2E`, /encodes "\."/],
    ["a dot-dot segment", `${V1}/namespaces/team-a/../team-b/m`, /may not be "\.\."/],
    ["a dot segment", `${V1}/namespaces/team-b/./m`, /may not be "\."/],
    ["a double slash", `${V1}/namespaces//team-b/m`, /empty path segment/],
    ["a leading double slash", `//apis/external.metrics.k8s.io/v1beta1`, /empty path segment/],
    ["two trailing slashes", `${V1}//`, /empty path segment/],
    ["an invalid escape", `${V1}/namespaces/team-b/%zz`, /not a percent-encoded byte/],
    ["a truncated escape", `${V1}/namespaces/team-b/m%4`, /not a percent-encoded byte/],
    ["an encoded percent", `${V1}/namespaces/team-b/m%25`, /may not contain "%"/],
    ["bytes that are not UTF-8", `${V1}/namespaces/team-b/m%FF`, /metric name "m%FF": its bytes are not UTF-8/],
    ["an encoded control character", `${V1}/namespaces/team-b/m%00`, /control character/],
    ["a raw backslash", `${V1}/namespaces/team-b/a\\b`, /must be percent-encoded/],
    ["a raw non-ASCII character", `${V1}/namespaces/team-b/\u00e9`, /must be percent-encoded/],
    ["an uppercase namespace", `${V1}/namespaces/Team-B/m`, /DNS-1123 label/],
    ["a namespace ending in a hyphen", `${V1}/namespaces/team-/m`, /DNS-1123 label/],
    ["a namespace of 64 characters", `${V1}/namespaces/${"a".repeat(64)}/m`, /DNS-1123 label/],
    ["a namespace with an underscore", `${V1}/namespaces/team_b/m`, /DNS-1123 label/],
    ["a namespace with an encoded colon", `${V1}/namespaces/team%3Ab/m`, /DNS-1123 label/],
    ["watch with nothing after it", `${V1}/watch`, /unable to determine kind and namespace/],
    ["no leading slash", "apis", /starts with "\/"/],
    ["a bad custom metrics object name, named so", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2a/rps", /name "%2a": .*lowercase hex/],
    ["a bad custom metrics metric, named so", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/r%70s", /metric name "r%70s": "%70" encodes "p"/],
    ["a bad namespace metric, named so", "/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/metrics/r%2fs", /metric name "r%2fs": .*lowercase hex/],
    ["a bad segment outside the parts, named so", "/apis/external.metrics.k8s.io/v1beta1/namespaces/a/m/x/y/%2E%2E", /path segment "%2E%2E"/],
  ];
  for (const [what, path, message] of refused) {
    it(`${what}: ${path.slice(V1.length) || path} → 400`, () => {
      let error: unknown;
      try {
        parseRequestPath(path);
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(StatusError);
      expect((error as StatusError).code).toBe(400);
      expect((error as StatusError).message).toMatch(message);
    });
  }
});

describe("parseRequestPath reads what real clients send", () => {
  it("the HPA's custom metrics read: the `*` object name as %2A", () => {
    const p = parseRequestPath("/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/rps");
    expect(p.segments).toEqual(["apis", "custom.metrics.k8s.io", "v1beta2", "namespaces", "default", "pods", "*", "rps"]);
    expect(p.resource).toMatchObject({ isResourceRequest: true, apiGroup: "custom.metrics.k8s.io", apiVersion: "v1beta2", namespace: "default", resource: "pods", name: "*", subresource: "rps" });
    expect(p.canonical).toBe("/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/rps");
    // the unescaped form means the same and has the same canonical spelling
    expect(parseRequestPath("/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/rps").canonical).toBe(p.canonical);
  });

  it("the custom metrics shapes: an object's metric and a namespace metric", () => {
    expect(parseRequestPath("/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/services/web/rps").resource).toMatchObject({ resource: "services", name: "web", subresource: "rps" });
    expect(parseRequestPath("/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/metrics/rps").resource).toMatchObject({ namespace: "default", resource: "metrics", name: "rps" });
  });

  const names: [string, string, string][] = [
    ["a plain name", "queue_messages_ready", "queue_messages_ready"],
    ["`|` escaped (Go, client-go)", "team%7Cqueue_depth", "team|queue_depth"],
    ["`|` raw (curl)", "team|queue_depth", "team|queue_depth"],
    ["`\\|` escaped", "custom.googleapis.com%5C%7Cdepth", "custom.googleapis.com\\|depth"],
    ["`:` raw (Go leaves it)", "job:rate5m", "job:rate5m"],
    ["`:` escaped (encodeURIComponent)", "job%3Arate5m", "job:rate5m"],
    ["`,` and `;` escaped (url.PathEscape)", "a%2Cb%3Bc", "a,b;c"],
    ["`,` and `;` raw (URL.EscapedPath)", "a,b;c", "a,b;c"],
    ["`*` `(` `)` `!` `'` escaped", "%2A%28%29%21%27", "*()!'"],
    ["UTF-8 bytes", "caf%C3%A9", "café"],
    ["a name with dots", "a.b..c", "a.b..c"],
  ];
  for (const [what, raw, decoded] of names) {
    it(`${what}: ${raw}`, () => {
      const p = parseRequestPath(`${V1}/namespaces/team-b/${raw}`);
      expect(externalMetricsRead(p)).toEqual({ namespace: "team-b", metric: decoded });
      expect(p.segments[5]).toBe(decoded);
      // the canonical spelling reads back to the same parts
      expect(parseRequestPath(p.canonical).segments).toEqual(p.segments);
    });
  }
});

describe("DNS-1123 labels (validation.IsDNS1123Label)", () => {
  const cases: [string, boolean][] = [
    ["a", true],
    ["0", true],
    ["team-b", true],
    ["a-1-b", true],
    ["a".repeat(63), true],
    ["a".repeat(64), false],
    ["", false],
    ["-a", false],
    ["a-", false],
    ["A", false],
    ["a.b", false],
    ["a_b", false],
    ["a b", false],
  ];
  for (const [label, valid] of cases) it(`${JSON.stringify(label.length > 10 ? `${label.slice(0, 5)}…(${label.length})` : label)} → ${valid}`, () => expect(isDNS1123Label(label)).toBe(valid));

  it("a 63-character namespace reads, 64 does not", () => {
    expect(outcome(() => parseRequestPath(`${V1}/namespaces/${"a".repeat(63)}/m`))).toBe("ok");
    expect(outcome(() => parseRequestPath(`${V1}/namespaces/${"a".repeat(64)}/m`))).toBe(400);
  });
});

describe("the parts (apiserver RequestInfo shape)", () => {
  it("an external metrics read", () => {
    const p = parseRequestPath(`${V1}/namespaces/team-b/queue_messages_ready`);
    expect(p.resource).toEqual({
      isResourceRequest: true,
      apiPrefix: "apis",
      apiGroup: "external.metrics.k8s.io",
      apiVersion: "v1beta1",
      verbPrefix: "",
      namespace: "team-b",
      resource: "queue_messages_ready",
      name: "",
      subresource: "",
      parts: ["queue_messages_ready"],
    });
    expect(p.path).toBe(`${V1}/namespaces/team-b/queue_messages_ready`);
    expect(p.trailingSlash).toBe(false);
  });

  it("non-resource paths, the root and one trailing slash", () => {
    expect(parseRequestPath("/").segments).toEqual([]);
    expect(parseRequestPath("/healthz").resource.isResourceRequest).toBe(false);
    const discovery = parseRequestPath(`${V1}/`);
    expect(discovery).toMatchObject({ trailingSlash: true, path: `${V1}/`, canonical: `${V1}/` });
  });

  it("a request's attributes from the parsed target equal apiserver's port for canonical paths", () => {
    for (const target of [`${V1}/namespaces/team-b/queue_messages_ready?labelSelector=queue%3Dci_jobs`, `${V1}/namespaces/team-b/team%7Cdepth`, `${V1}/watch/namespaces/a/m`, `${V1}`, "/api/v1/namespaces/a/pods/p/log"]) {
      const parsed = requestInfo("GET", parseRequestTarget(target));
      const port = requestInfo("GET", new URL(`https://x${target}`));
      expect(parsed, target).toEqual(port);
    }
  });
});

describe("the External Metrics values route", () => {
  it("is exactly namespaces/{ns}/{metric}", () => {
    expect(externalMetricsRead(parseRequestPath(`${V1}/namespaces/a/m`))).toEqual({ namespace: "a", metric: "m" });
    for (const path of [`${V1}/namespaces/a/m/extra`, `${V1}/namespaces/a/m/`, `${V1}/namespaces/a`, `${V1}/m`, `${V1}/watch/namespaces/a/m`, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/a/m", "/apis/external.metrics.k8s.io/v1/namespaces/a/m"]) {
      expect(externalMetricsRead(parseRequestPath(path)), path).toBeUndefined();
    }
  });

  it("is rebuilt canonically from its parts", () => {
    expect(externalMetricsPath({ namespace: "team-b", metric: "team|queue*depth" })).toBe(`${V1}/namespaces/team-b/team%7Cqueue%2Adepth`);
  });
});

describe("the Custom Metrics values routes", () => {
  const CM = "/apis/custom.metrics.k8s.io";
  // every shape k8s.io/metrics v0.37.1's client sends (test/wire/custom-metrics.oracle.test.ts records them), both versions
  const shapes: [string, object][] = [
    ["/namespaces/default/pods/%2A/rps", { shape: "selected", namespace: "default", resource: "pods", name: "*", metric: "rps" }],
    ["/namespaces/default/pods/*/rps", { shape: "selected", namespace: "default", resource: "pods", name: "*", metric: "rps" }],
    ["/namespaces/default/pods/web-0/rps", { shape: "object", namespace: "default", resource: "pods", name: "web-0", metric: "rps" }],
    ["/namespaces/team-a/deployments.apps/web/requests.per.second", { shape: "object", namespace: "team-a", resource: "deployments.apps", name: "web", metric: "requests.per.second" }],
    ["/namespaces/team-a/targetgroupbindings.elbv2.k8s.aws/tg.1/RequestCountPerTarget", { shape: "object", namespace: "team-a", resource: "targetgroupbindings.elbv2.k8s.aws", name: "tg.1", metric: "RequestCountPerTarget" }],
    ["/namespaces/team-a/metrics/queue_depth", { shape: "namespace", namespace: "team-a", resource: "namespaces", name: "team-a", metric: "queue_depth" }],
    ["/nodes/node-1/cpu_temp", { shape: "object", namespace: "", resource: "nodes", name: "node-1", metric: "cpu_temp" }],
    ["/clusterthings.networking.gke.io/%2A/lb_rate", { shape: "selected", namespace: "", resource: "clusterthings.networking.gke.io", name: "*", metric: "lb_rate" }],
    ["/namespaces/a/pods/%2A/job:rate5m%7Cx%2C", { shape: "selected", namespace: "a", resource: "pods", name: "*", metric: "job:rate5m|x," }],
  ];
  for (const version of ["v1beta2", "v1beta1"] as const) {
    for (const [tail, parts] of shapes) {
      it(`${version}${tail}`, () => {
        const p = parseRequestPath(`${CM}/${version}${tail}`);
        const read = customMetricsRead(p);
        expect(read).toEqual({ version, ...parts });
        // rebuilt canonically: the spelling the Go client sends (`*` as %2A), which reads back to the same parts
        const canonical = customMetricsPath(read!);
        expect(canonical).toBe(p.canonical);
        expect(customMetricsRead(parseRequestPath(canonical))).toEqual(read);
      });
    }
  }

  it("the RequestInfo parts carry resource, name and the metric as subresource (namespace metrics: resource metrics, name the metric)", () => {
    expect(parseRequestPath(`${CM}/v1beta2/namespaces/default/pods/%2A/rps`).resource).toMatchObject({ namespace: "default", resource: "pods", name: "*", subresource: "rps" });
    expect(parseRequestPath(`${CM}/v1beta2/nodes/n1/rps`).resource).toMatchObject({ namespace: "", resource: "nodes", name: "n1", subresource: "rps" });
    expect(parseRequestPath(`${CM}/v1beta1/namespaces/default/metrics/rps`).resource).toMatchObject({ namespace: "default", resource: "metrics", name: "rps", subresource: "" });
    for (const target of [`${CM}/v1beta2/namespaces/default/pods/%2A/rps?labelSelector=app%3Dweb&metricLabelSelector=verb+in+%28GET%29`, `${CM}/v1beta1/nodes/n1/rps`, `${CM}/v1beta2/namespaces/a/metrics/m`]) {
      expect(requestInfo("GET", parseRequestTarget(target)), target).toEqual(requestInfo("GET", new URL(`https://x${target}`)));
    }
  });

  it("refuses metric names with `/`, `%`, `?` and non-canonical encodings, as for External (400)", () => {
    const refused: [string, RegExp][] = [
      [`${CM}/v1beta2/namespaces/a/pods/%2A/a%2Fb`, /encoded "\/"/],
      [`${CM}/v1beta2/namespaces/a/pods/%2A/a%25b`, /may not contain "%"/],
      [`${CM}/v1beta2/namespaces/a/pods/%2A/a%3Fb`, /metric name "a\?b": a custom metric name may not contain "\?"/],
      [`${CM}/v1beta1/namespaces/a/metrics/a%3Fb`, /may not contain "\?"/],
      [`${CM}/v1beta2/nodes/n1/a%3F`, /may not contain "\?"/],
      [`${CM}/v1beta2/namespaces/a/pods/%2a/rps`, /lowercase hex/],
      [`${CM}/v1beta2/namespaces/a/pods/%2A/r%70s`, /encodes "p"/],
      [`${CM}/v1beta2/namespaces/a/pod%73/%2A/rps`, /resource "pod%73": "%73" encodes "s"/],
      [`${CM}/v1beta2/namespaces/a/pods/%2A/..`, /may not be "\.\."/],
      [`${CM}/v1beta2/namespaces/a/Pods/%2A/rps`, /resource "Pods": not a group resource/],
      [`${CM}/v1beta2/namespaces/a/pods%2C/%2A/rps`, /resource "pods,": not a group resource/],
      [`${CM}/v1beta2/namespaces/Team/pods/%2A/rps`, /DNS-1123 label/],
    ];
    for (const [path, message] of refused) {
      let error: unknown;
      try {
        customMetricsRead(parseRequestPath(path));
      } catch (err) {
        error = err;
      }
      expect(error, path).toBeInstanceOf(StatusError);
      expect((error as StatusError).code, path).toBe(400);
      expect((error as StatusError).message, path).toMatch(message);
    }
  });

  it("other paths are not a values read (404 by the route)", () => {
    for (const path of [
      `${CM}/v1beta2`,
      `${CM}/v1beta2/`,
      `${CM}/v1beta2/namespaces/a/pods/%2A/rps/`,
      `${CM}/v1beta2/namespaces/a/pods/%2A/rps/x`,
      `${CM}/v1beta2/namespaces/a/pods/%2A`,
      `${CM}/v1beta2/namespaces/a/metrics`,
      `${CM}/v1beta2/namespaces/a/namespaces/b/m`,
      `${CM}/v1beta2/namespaces/a/m`,
      `${CM}/v1beta2/nodes/n1`,
      `${CM}/v1/namespaces/a/pods/%2A/rps`,
      `${CM}/v1beta3/namespaces/a/pods/%2A/rps`,
      `${V1}/namespaces/a/pods/%2A/rps`,
      "/apis/custom.metrics.k8s.io.evil/v1beta2/namespaces/a/pods/%2A/rps",
    ]) {
      expect(customMetricsRead(parseRequestPath(path)), path).toBeUndefined();
    }
  });
});

describe("parseRequestTarget", () => {
  it("splits the raw query off before decoding the path, and reads an absolute-form target", () => {
    const t = parseRequestTarget(`${V1}/namespaces/a/m?labelSelector=queue%3Dci_jobs%2Fx`);
    expect(t.path.segments[5]).toBe("m");
    expect(t.rawQuery).toBe("labelSelector=queue%3Dci_jobs%2Fx");
    expect(t.query.get("labelSelector")).toBe("queue=ci_jobs/x");
    expect(parseRequestTarget(`https://proxy:443${V1}/namespaces/a/m?x=1`).path.path).toBe(`${V1}/namespaces/a/m`);
    expect(outcome(() => parseRequestTarget(`${V1}/namespaces/a/m#frag`))).toBe(400);
    expect(outcome(() => parseRequestTarget("*"))).toBe(400);
  });

  it("the canonical query is client-go's url.Values.Encode spelling, in the order received", () => {
    expect(canonicalQuery(new URLSearchParams("labelSelector=queue%3Dci_jobs"))).toBe("?labelSelector=queue%3Dci_jobs");
    expect(canonicalQuery(new URLSearchParams("labelSelector=queue in (a,b)&x=*"))).toBe("?labelSelector=queue+in+%28a%2Cb%29&x=%2A");
    expect(canonicalQuery(new URLSearchParams(""))).toBe("");
    expect(escapeQueryComponent("a b~c")).toBe("a+b~c");
  });

  it("a target's canonical query is canonicalQuery of its parameters, whether or not it was already canonical", () => {
    const alphabet = ["a", "Z", "0", "-", "~", "+", "=", "&", "%3D", "%3d", "%41", "%20", "%2A", "%C3%A9", "%", "!", "*", " "];
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    const raws = ["labelSelector=queue%3Dci_jobs", "labelSelector=queue=ci_jobs", "a=1&&b=2", "a=1&", "=x", "a", "a=", "x=%2a", "x=%41"];
    for (let i = 0; i < 3000; i++) raws.push(Array.from({ length: 1 + (next() % 12) }, () => alphabet[next() % alphabet.length]).join(""));
    for (const raw of raws) {
      const target = parseRequestTarget(`${V1}/namespaces/a/m?${raw}`);
      expect(target.canonicalQuery, raw).toBe(canonicalQuery(new URLSearchParams(raw)));
    }
  });

  it("escapePathSegment is url.PathEscape", () => {
    expect(escapePathSegment("a-b_c.d~e")).toBe("a-b_c.d~e");
    expect(escapePathSegment("$&+:=@")).toBe("$&+:=@");
    expect(escapePathSegment("*|,;/? é")).toBe("%2A%7C%2C%3B%2F%3F%20%C3%A9");
  });
});
