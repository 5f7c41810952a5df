/**
 * Render and validate the proxy's deployment, offline.
 *
 *   node infra/tools/validate.ts            # helm lint, helm template == infra/manifests, kubeconform
 *   node infra/tools/validate.ts --write    # re-render infra/manifests/ from the chart
 *
 * Tools come from the Go module proxy, built once into the tool cache
 * outside the tree (`~/.cache/external-metrics-bridge/tools`, see
 * `go.ts`; reused by fresh clones): `helm` (helm.sh/helm/v4) and `kubeconform`
 * (github.com/yannh/kubeconform). kubeconform's schemas normally come from
 * GitHub; here they are generated from the `k8s.io/kubernetes` module's own
 * OpenAPI document (`api/openapi-spec/swagger.json`, also from the Go module
 * proxy) by `k8s-schemas.ts`, once per Kubernetes version, into
 * `~/.cache/external-metrics-bridge/kubeconform-schemas/`.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { findGo, goEnv, goInstall, toolCacheDir } from "./go.ts";
import { writeKubeconformSchemas } from "./k8s-schemas.ts";

/** Repository root. */
export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
/** Go packages of the tools, pinned. */
export const TOOLS = {
  helm: "helm.sh/helm/v4/cmd/helm@v4.3.1",
  kubeconform: "github.com/yannh/kubeconform/cmd/kubeconform@v0.8.0",
} as const;
/** The Kubernetes version whose OpenAPI document validates the manifests. */
export const KUBERNETES_VERSION = "1.37.1";
/** The chart and what it is rendered into. */
export const CHART = join(ROOT, "infra/helm/external-metrics-bridge");
export const MANIFESTS = join(ROOT, "infra/manifests/external-metrics-bridge.yaml");
/** `helm template` arguments of the rendered manifests. */
export const RENDER_ARGS = ["template", "external-metrics-bridge", CHART, "--namespace", "external-metrics-bridge", "--set", "namespace.create=true", "--include-crds"];
/** First lines of the rendered file. */
export const MANIFESTS_HEADER = `# Rendered from infra/helm/external-metrics-bridge with default values by
#   npm run infra:render   (helm ${RENDER_ARGS.slice(0, 2).join(" ")} … --namespace external-metrics-bridge --set namespace.create=true)
# Do not edit: change the chart and re-render; test/project/infra.test.ts fails when they differ.
`;


/** Environment for tool processes: their state inside the tree, no network but the Go proxy. */
function toolEnv(): NodeJS.ProcessEnv {
  const xdg = join(ROOT, ".xdg");
  return {
    ...goEnv(),
    PATH: [join(ROOT, "node_modules/.bin"), "/usr/local/go/bin", process.env["PATH"] ?? ""].join(delimiter),
    HELM_CACHE_HOME: join(xdg, "cache/helm"),
    HELM_CONFIG_HOME: join(xdg, "config/helm"),
    HELM_DATA_HOME: join(xdg, "data/helm"),
  };
}

function run(cmd: string, args: readonly string[], options: { cwd?: string; input?: string; timeoutMs?: number } = {}) {
  const r = spawnSync(cmd, args, {
    cwd: options.cwd ?? ROOT,
    env: toolEnv(),
    encoding: "utf8",
    maxBuffer: 256 << 20,
    timeout: options.timeoutMs ?? 120_000,
    ...(options.input !== undefined ? { input: options.input } : {}),
  });
  if (r.error) throw new Error(`${cmd} ${args.join(" ")}: ${r.error.message}`);
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

export { findGo };

/**
 * The path of a tool, built with `go install` into the tool cache outside
 * the tree (infra/tools/go.ts) when missing: helm takes a few minutes on 2
 * cores the first time; later runs, fresh clones included, reuse it.
 */
export function ensureTool(name: keyof typeof TOOLS): string {
  return goInstall(TOOLS[name], name);
}

/**
 * The kubeconform schema location for {@link KUBERNETES_VERSION}, generating
 * the schemas from the k8s.io/kubernetes module when they are not cached.
 *
 * @returns a `-schema-location` template ending in `.json`
 */
export function ensureSchemas(): string {
  const dir = join(toolCacheDir(), "kubeconform-schemas", `v${KUBERNETES_VERSION}-standalone-strict`);
  const done = join(dir, ".complete");
  if (!existsSync(done)) {
    const scratch = join(toolCacheDir(), "go-scratch");
    mkdirSync(scratch, { recursive: true });
    const r = run(findGo(), ["mod", "download", "-json", `k8s.io/kubernetes@v${KUBERNETES_VERSION}`], { cwd: scratch, timeoutMs: 10 * 60_000 });
    const info = JSON.parse(r.stdout || "{}") as { Dir?: string; Error?: string };
    if (r.status !== 0 || !info.Dir) throw new Error(`go mod download k8s.io/kubernetes@v${KUBERNETES_VERSION} failed: ${info.Error ?? r.stderr}`);
    rmSync(dir, { recursive: true, force: true });
    const count = writeKubeconformSchemas(join(info.Dir, "api/openapi-spec/swagger.json"), dir);
    writeFileSync(done, `${count} schemas from k8s.io/kubernetes@v${KUBERNETES_VERSION} api/openapi-spec/swagger.json\n`);
  }
  return join(dir, "{{ .ResourceKind }}{{ .KindSuffix }}.json");
}

/** `helm lint` of the chart (strict). */
export function helmLint(values: string[] = []): { ok: boolean; output: string } {
  const r = run(ensureTool("helm"), ["lint", "--strict", CHART, ...values.flatMap((v) => ["--values", v])]);
  return { ok: r.status === 0, output: r.stdout + r.stderr };
}

/**
 * `helm template` of the chart.
 *
 * @param args extra arguments (e.g. `--set`, `--values`)
 * @throws Error with helm's message when rendering fails
 */
export function helmTemplate(args: string[] = []): string {
  const r = run(ensureTool("helm"), [...RENDER_ARGS, ...args]);
  if (r.status !== 0) throw new Error(`helm template failed:\n${r.stderr}`);
  return r.stdout;
}

/** What kubeconform said about one resource. */
export interface KubeconformResult {
  filename: string;
  kind: string;
  name: string;
  version: string;
  status: "statusValid" | "statusInvalid" | "statusError" | "statusSkipped" | "statusEmpty";
  msg: string;
}

/**
 * Validate manifests with kubeconform (strict: unknown fields fail; a kind
 * without a schema fails).
 *
 * @param files YAML files, or `-` with `input` on stdin
 * @param schemaLocations further `-schema-location`s, tried after the
 *   Kubernetes schemas (e.g. the policy CRDs' schemas, `crd-schemas.ts`)
 */
export function kubeconform(files: string[], input?: string, schemaLocations: readonly string[] = []): { ok: boolean; resources: KubeconformResult[]; summary: unknown } {
  const args = [
    "-strict",
    "-summary",
    "-verbose",
    "-output",
    "json",
    "-kubernetes-version",
    KUBERNETES_VERSION,
    "-schema-location",
    ensureSchemas(),
    ...schemaLocations.flatMap((l) => ["-schema-location", l]),
    ...files,
  ];
  const r = run(ensureTool("kubeconform"), args, input !== undefined ? { input } : {});
  let parsed: { resources?: KubeconformResult[]; summary?: unknown };
  try {
    parsed = JSON.parse(r.stdout) as typeof parsed;
  } catch {
    throw new Error(`kubeconform did not answer JSON (exit ${r.status}):\n${r.stdout}${r.stderr}`);
  }
  return { ok: r.status === 0, resources: parsed.resources ?? [], summary: parsed.summary };
}

/** The manifests file content for a render. */
export function manifestsFile(rendered: string): string {
  return MANIFESTS_HEADER + rendered;
}

function main(argv: string[]): number {
  if (argv.includes("--write")) {
    mkdirSync(join(ROOT, "infra/manifests"), { recursive: true });
    writeFileSync(MANIFESTS, manifestsFile(helmTemplate()));
    console.log(`wrote ${MANIFESTS}`);
    return 0;
  }
  let failed = false;
  const lint = helmLint();
  console.log(`helm lint: ${lint.ok ? "ok" : "FAILED"}`);
  if (!lint.ok) {
    console.log(lint.output);
    failed = true;
  }
  const rendered = manifestsFile(helmTemplate());
  const same = existsSync(MANIFESTS) && readFileSync(MANIFESTS, "utf8") === rendered;
  console.log(`infra/manifests matches helm template: ${same ? "yes" : "NO (run npm run infra:render)"}`);
  if (!same) failed = true;
  const result = kubeconform([MANIFESTS, join(ROOT, "infra/examples/rbac")]);
  for (const r of result.resources.filter((x) => x.kind !== "")) console.log(`kubeconform: ${r.status.replace("status", "")} ${r.kind}/${r.name}${r.msg ? `: ${r.msg}` : ""}`);
  console.log(`kubeconform (Kubernetes ${KUBERNETES_VERSION}, strict): ${result.ok ? "ok" : "FAILED"}`);
  if (!result.ok) failed = true;
  return failed ? 1 : 0;
}

if (import.meta.main) process.exit(main(process.argv.slice(2)));
