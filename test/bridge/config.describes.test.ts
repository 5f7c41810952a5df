/**
 * `describes:` metric rules (custom.metrics.k8s.io) in the BridgeConfig
 * loader (shared/config/config.ts): kept apart from the External rules, a
 * name unique per described resource, the identifier's source and the
 * allow-list patterns checked at load with the line and column.
 */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../shared/config/config.ts";
import { ConfigError } from "../../shared/config/yaml.ts";
import "../setup/providers.ts";

const HEAD = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers:
  prom: { type: prometheus, url: "http://127.0.0.1:9" }
metrics:
  - name: queue_ready
    provider: prom
    query: { series: q, selectorLabels: { queue: queue } }
`;

const rule = (describes: string, name = "http_requests") => `  - name: ${name}
    provider: prom
    describes: ${describes}
    query: { series: r, selectorLabels: { pod: pod, namespace: namespace, queue: queue } }
`;

function messages(text: string): string[] {
  try {
    loadConfig(text, "bridge.yaml");
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).issues.map((i) => `${i.line}:${i.column} ${i.path}: ${i.message}`);
  }
  throw new Error("config was accepted");
}

describe("describes: rules", () => {
  it("are kept apart from the External rules, with their file index; one name may be External and custom, and custom for two resources", () => {
    const { config } = loadConfig(
      HEAD + rule("{ resource: pods, objectLabel: pod, namespaceLabel: namespace }") + rule("{ resource: ingresses.networking.k8s.io, objectLabel: queue }") + rule("{ resource: pods, objectLabel: pod }", "queue_ready"),
      "bridge.yaml",
    );
    expect(config.metrics.map((r) => [r.name, r.index])).toEqual([["queue_ready", 0]]);
    expect(config.customMetrics.map((r) => [r.name, r.describes!.resource, r.index])).toEqual([
      ["http_requests", "pods", 1],
      ["http_requests", "ingresses.networking.k8s.io", 2],
      ["queue_ready", "pods", 3],
    ]);
    expect(config.customMetrics[0]!.describes).toMatchObject({ objectLabel: "pod", namespaceLabel: "namespace", identifier: { from: "name" } });
  });

  it("refuses the same custom name twice for one resource, naming the first", () => {
    expect(messages(HEAD + rule("{ resource: pods, objectLabel: pod }") + rule("{ resource: pods, objectLabel: pod }", "HTTP_requests"))).toEqual([
      expect.stringMatching(/^13:\d+ metrics\[2\]\.name: metric "HTTP_requests" for pods is already defined by metrics\[1\]/),
    ]);
  });

  it("reads a status path into its fields and compiles allow patterns case-sensitively, whole", () => {
    const { config } = loadConfig(
      HEAD + rule(`{ resource: queues.sqs.services.k8s.aws, objectLabel: queue, identifier: { from: status, path: status.queueURL }, allow: ['https://sqs\\.[a-z0-9-]+\\.amazonaws\\.com/123456789012/team-a-.*'] }`),
      "bridge.yaml",
    );
    const d = config.customMetrics[0]!.describes!;
    expect(d.identifier).toEqual({ from: "status", path: ["queueURL"] });
    expect(d.allow!.map((p) => p.matches("https://sqs.eu-west-1.amazonaws.com/123456789012/team-a-jobs"))).toEqual([true]);
    expect(d.allow!.map((p) => p.matches("https://SQS.eu-west-1.amazonaws.com/123456789012/team-a-jobs"))).toEqual([false]);
    expect(d.allow!.map((p) => p.matches("x https://sqs.eu-west-1.amazonaws.com/123456789012/team-a-jobs"))).toEqual([false]);
  });

  it("refuses what cannot work, each at its line", () => {
    const bad = [
      ["{ resource: Pods, objectLabel: pod }", /must be a group resource/],
      ["{ resource: pods, objectLabel: pod, identifier: { from: label, key: app } }", /a pods rule identifies its objects by name/],
      ["{ resource: namespaces, objectLabel: namespace, identifier: { from: status, path: status.phase } }", /a namespaces rule identifies its objects by name/],
      ["{ resource: pods, objectLabel: pod, namespaceLabel: pod }", /must differ from objectLabel/],
      ["{ resource: things.example.com, objectLabel: queue, identifier: { from: status, path: spec.url } }", /a field path under status/],
      ["{ resource: things.example.com, objectLabel: queue, allow: ['(?=a)b'] }", /lookaround/],
      ["{ resource: things.example.com, objectLabel: queue, allow: ['a{1001}'] }", /repeat count/],
      ["{ resource: things.example.com }", /objectLabel/],
    ] as const;
    for (const [describes, message] of bad) {
      const found = messages(HEAD + rule(describes));
      expect(found.length, describes).toBe(1);
      expect(found[0], describes).toMatch(/^11:/);
      expect(found[0], describes).toMatch(message);
    }
  });
});
