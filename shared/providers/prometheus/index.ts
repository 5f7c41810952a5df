/**
 * The `prometheus` provider: a value from any server of the Prometheus HTTP
 * API (Prometheus, Thanos, Mimir, VictoriaMetrics: the `generic` flavour;
 * Google Cloud Managed Service for Prometheus: `gmp`, `./gmp.ts`), read
 * with instant queries (`./api.ts`).
 *
 * A request's selector is mapped exactly onto label sets (one series per
 * set, `../label-mapping.ts`). Reads of one rule shape that arrive together
 * (`shared/batch.ts`) become ONE value query
 * `sum by (<mapped labels>) (<expr>)`, where `<expr>` is
 * `series{<matchers>}` or the admin's template with the matchers in place
 * of `<<.LabelMatchers>>`; the matchers hold the fixed `labels` and, per
 * mapped label, the values of the whole batch (`./promql.ts`: one value
 * `name="v"`, several `name=~"v1|v2"`, each value quoted for RE2 and then
 * for PromQL, so `in (a.b)` never matches `aXb`). The answer is split back
 * by the mapped labels' values: a label set absent from it is the rule's
 * `onEmpty`, two samples for one label set a 503 (never a guess), samples of
 * label sets nobody asked for (the matchers select the product of the
 * batch's values) are ignored.
 *
 * Timestamps: for a `series` rule a second query,
 * `min by (<mapped labels>) (timestamp(<expr>))`, is sent with the first and
 * gives each label set the time of the OLDEST sample summed, so the age the
 * bridge checks against `maxAgeSeconds` is the data's, never the evaluation
 * time (prometheus-adapter stamps the current time). A template's result is
 * a computed value whose sample time is the evaluation time; its freshness
 * is bounded by `lookback_delta` (the rule's `lookbackSeconds`, default its
 * `maxAgeSeconds`): Prometheus selects no sample older than that.
 *
 * Values: `NaN`, `+Inf`, `-Inf` and native histograms are failed reads
 * (503) naming the series; any other value text is read exactly
 * (`parseDecimal`, `e` notation included: `1e+21`, `1e-07`).
 *
 * Deadlines: both queries share one deadline, the batch's signal combined
 * with `timeoutSeconds` (`withCallSignal`, `../../deadline.ts`); when one
 * fails the other is cancelled.
 */
import { BACKEND_LOAD_TIMEOUT_MS, withCallSignal } from "../../deadline.ts";
import { parseDecimal } from "../../k8s/quantity.ts";
import { badRequest, internalError, serviceUnavailable, StatusError } from "../../k8s/status.ts";
import { mappedLabels, mappedValue } from "../label-mapping.ts";
import { providerRefreshAhead } from "../refresh-ahead.ts";
import { emptyOutcome, SeriesProvider, type Outcome, type Reading, type SeriesBackend, type SeriesBatching, type SeriesItem } from "../series.ts";
import type { MetricRule, ProviderModule, RuleFinding, RuntimeEnv } from "../types.ts";
import { instantQuery, prometheusErrorToStatus, type VectorSample } from "./api.ts";
import type { FlavourAccess } from "./flavour.ts";
import { FLAVOURS } from "./flavours.ts";
import { matchersText, parseTemplate, renderTemplate, TemplateError, templateRanges, type QueryTemplate } from "./promql.ts";
import {
  prometheusProviderSchema,
  prometheusQuerySchema,
  setTemplateCheck,
  type PrometheusProviderConfig,
  type PrometheusQuery,
} from "./schema.ts";

// Config validation parses templates fully from now on (line and column of the fault).
setTemplateCheck((text) => {
  try {
    parseTemplate(text);
    return undefined;
  } catch (err) {
    if (err instanceof TemplateError) return { message: err.reason, line: err.line, column: err.column };
    throw err;
  }
});

/** Parsed templates by text: the config's templates, each parsed once. */
const templates = new Map<string, QueryTemplate>();

/**
 * The parsed template of a rule.
 * @throws StatusError 500 naming the rule when the template is not valid (a config validated before this module was loaded)
 */
function templateOf(rule: string, text: string): QueryTemplate {
  let parsed = templates.get(text);
  if (parsed === undefined) {
    try {
      parsed = parseTemplate(text);
    } catch (err) {
      if (err instanceof TemplateError) throw internalError(`metric ${rule}: the template is not valid PromQL (line ${err.line}, column ${err.column}): ${err.reason}`);
      throw err;
    }
    templates.set(text, parsed);
  }
  return parsed;
}

/** What one query pair shares: everything but the selector-mapped label values. */
interface QueryShape {
  series?: string;
  template?: string;
  fixed: Record<string, string>;
  /** the Prometheus labels the selector maps, in rule order */
  names: string[];
  lookbackSeconds: number;
}

/** One series to read: what the batcher collects. */
interface ReadItem extends SeriesItem {
  key: string;
  group: string;
  shape: QueryShape;
  /** the Prometheus value of each of `shape.names` for this series */
  values: string[];
  /** the rule's name, for messages */
  rule: string;
  /** `metric NAME (expr)`, for messages */
  what: string;
  onEmpty: PrometheusQuery["onEmpty"];
}

function labelOf(mapping: PrometheusQuery["selectorLabels"][string]): string {
  return typeof mapping === "string" ? mapping : mapping.label;
}

/** The selected expression of a shape for these per-label values: `series{…}` or the rendered template. */
function expression(shape: QueryShape, rule: string, byLabel: Readonly<Record<string, readonly string[]>>): string {
  const matchers = matchersText(shape.fixed, byLabel);
  return shape.series !== undefined ? `${shape.series}{${matchers}}` : renderTemplate(templateOf(rule, shape.template!), matchers);
}

/** `sum by (a, b) (expr)` and, for series rules, `min by (a, b) (timestamp(expr))`. */
function queries(shape: QueryShape, expr: string): { value: string; age: string | undefined } {
  const by = shape.names.length > 0 ? ` by (${shape.names.join(", ")})` : "";
  return { value: `sum${by} (${expr})`, age: shape.series !== undefined ? `min${by} (timestamp(${expr}))` : undefined };
}

/** The values of each mapped label over a batch, sorted and without repeats. */
function valuesByLabel(items: readonly ReadItem[]): Record<string, string[]> {
  const names = items[0]!.shape.names;
  return Object.fromEntries(names.map((name, i) => [name, [...new Set(items.map((item) => item.values[i]!))].sort()]));
}

/** Samples by the values of `names` (an absent label reads as "", as Prometheus treats it). */
function byLabelValues(samples: readonly VectorSample[], names: readonly string[]): Map<string, VectorSample[]> {
  const out = new Map<string, VectorSample[]>();
  for (const s of samples) {
    const key = JSON.stringify(names.map((n) => s.metric[n] ?? ""));
    const list = out.get(key);
    if (list === undefined) out.set(key, [s]);
    else list.push(s);
  }
  return out;
}

/** A sample's value text is one the bridge refuses to serve (`NaN`, `±Inf`, or no value at all). */
function unservable(value: string | undefined): string | undefined {
  if (value === undefined) return "a native histogram, not a number";
  if (/^[+-]?(?:nan|inf(?:inity)?)$/i.test(value)) return value;
  return undefined;
}

/**
 * The Prometheus part of a `prometheus` provider (`../series.ts` does label
 * resolution, cache, coalescing and batching).
 */
class PrometheusBackend implements SeriesBackend<PrometheusQuery, ReadItem> {
  readonly batching: SeriesBatching;
  /** on in long-lived runtimes unless the config says otherwise (`../refresh-ahead.ts`) */
  readonly refreshAhead;
  private readonly name: string;
  private readonly config: PrometheusProviderConfig;
  private readonly runtime: RuntimeEnv;
  /** where and how the flavour's HTTP API is reached */
  private readonly access: FlavourAccess;
  readonly identity?: (namespace: string) => string;

  constructor(name: string, config: PrometheusProviderConfig, runtime: RuntimeEnv) {
    this.name = name;
    this.config = config;
    this.runtime = runtime;
    if (config.flavour === "generic") this.access = { url: config.url, headers: () => this.headers(config), maxLookback: true };
    else {
      const make = FLAVOURS[config.flavour];
      if (make === undefined) {
        throw new Error(`provider ${name}: this build holds no "${config.flavour}" flavour (a Worker bundles only the flavours of the config it was built for: node infra/worker/build.ts --config FILE)`);
      }
      this.access = make(name, config, runtime);
      if (this.access.identity !== undefined) this.identity = this.access.identity.bind(this.access);
    }
    this.batching = { maxBatchSize: config.maxBatchSize, windowMs: config.batchWindowSeconds * 1000 };
    this.refreshAhead = providerRefreshAhead(config, runtime);
  }

  labels(rule: MetricRule<PrometheusQuery>) {
    return mappedLabels(rule.query.selectorLabels);
  }

  item(rule: MetricRule<PrometheusQuery>, labels: Readonly<Record<string, string>>): ReadItem {
    const q = rule.query;
    const shape: QueryShape = {
      ...(q.series !== undefined ? { series: q.series } : { template: q.template! }),
      fixed: q.labels,
      names: Object.values(q.selectorLabels).map(labelOf),
      lookbackSeconds: q.lookbackSeconds ?? rule.maxAgeSeconds,
    };
    const values = Object.entries(q.selectorLabels).map(([label, m]) => mappedValue(m, labels[label]!));
    const one = Object.fromEntries(shape.names.map((n, i) => [n, [values[i]!]]));
    const group = JSON.stringify(shape);
    let what: string;
    try {
      what = `metric ${rule.name} (${expression(shape, rule.name, one)})`;
    } catch (err) {
      if (err instanceof StatusError) throw err;
      throw badRequest(`metric ${rule.name}: ${(err as Error).message}`);
    }
    return {
      key: JSON.stringify([group, values]),
      group,
      shape,
      values,
      rule: rule.name,
      what,
      onEmpty: q.onEmpty,
    };
  }

  describe(rule: MetricRule<PrometheusQuery>, items: readonly ReadItem[]): string {
    const shape = items[0]?.shape;
    if (shape === undefined) return `Prometheus instant query at ${this.access.url}`;
    const { value, age } = queries(shape, expression(shape, rule.name, valuesByLabel(items)));
    return (
      `Prometheus instant query at ${this.access.url} (lookback_delta ${shape.lookbackSeconds}s): ${value}` +
      (age !== undefined ? `, with the samples' time from ${age}` : ", stamped with the evaluation time")
    );
  }

  read(items: readonly ReadItem[], signal: AbortSignal): Promise<Outcome<Reading>[]> {
    return this.query(items, signal);
  }

  error(err: unknown, item: ReadItem): StatusError {
    const what = `query for ${item.what}`;
    return this.access.error?.(what, err) ?? prometheusErrorToStatus(`provider ${this.name}: ${what}`, err);
  }

  /**
   * Request headers: `X-Scope-OrgID` and the credentials, read from the
   * environment at every call (a rotated secret is used at once).
   * @throws StatusError 500 naming the variable when a credential is not set
   */
  private headers(config: Extract<PrometheusProviderConfig, { flavour: "generic" }>): Record<string, string> {
    const headers: Record<string, string> = {};
    if (config.tenant !== undefined) headers["X-Scope-OrgID"] = config.tenant;
    const auth = config.auth;
    if (auth === undefined) return headers;
    const secret = (variable: string): string => {
      const value = this.runtime.env[variable];
      if (value === undefined || value === "") {
        throw internalError(`provider ${this.name}: the environment variable ${variable} named by auth is not set; nothing was sent to Prometheus`);
      }
      return value;
    };
    if ("bearerTokenEnv" in auth) {
      headers["authorization"] = `Bearer ${secret(auth.bearerTokenEnv)}`;
    } else {
      const pair = new TextEncoder().encode(`${secret(auth.basicAuth.usernameEnv)}:${secret(auth.basicAuth.passwordEnv)}`);
      headers["authorization"] = `Basic ${btoa(String.fromCharCode(...pair))}`;
    }
    return headers;
  }

  /** The query pair of a batch of one shape; one outcome per item. */
  private async query(items: readonly ReadItem[], batchSignal: AbortSignal): Promise<Outcome<Reading>[]> {
    const shape = items[0]!.shape;
    const rule = items[0]!.rule;
    const { value, age } = queries(shape, expression(shape, rule, valuesByLabel(items)));
    const key = items[0]!.identity; // a batch is one identity's (its group)
    const access = key !== undefined && this.access.as !== undefined ? this.access.as(key) : this.access;
    const headers = access.headers();
    const limitMs = Math.min(this.config.timeoutSeconds * 1000, BACKEND_LOAD_TIMEOUT_MS);
    const run = (query: string, signal: AbortSignal) =>
      instantQuery({ url: access.url, query, timeoutSeconds: this.config.timeoutSeconds, lookbackSeconds: shape.lookbackSeconds, maxLookback: access.maxLookback, headers, signal, fetch: access.fetch, sign: access.sign?.bind(access) });
    const [values, ages] = await withCallSignal(batchSignal, limitMs, async (callSignal) => {
      // one failure cancels the other query: nobody would use its answer
      const pair = new AbortController();
      const signal = AbortSignal.any([callSignal, pair.signal]);
      try {
        return await Promise.all([run(value, signal), age !== undefined ? run(age, signal) : undefined]);
      } catch (err) {
        pair.abort(err);
        throw err;
      }
    });
    const valueSets = byLabelValues(values, shape.names);
    const ageSets = ages !== undefined ? byLabelValues(ages, shape.names) : undefined;
    const now = this.runtime.now();
    return items.map((item) => this.outcome(item, valueSets, ageSets, now));
  }

  /** The reading of one item from the samples of its label set. */
  private outcome(item: ReadItem, values: Map<string, VectorSample[]>, ages: Map<string, VectorSample[]> | undefined, now: number): Outcome<Reading> {
    const where = `provider ${this.name}: query for ${item.what}`;
    const fail = (message: string): Outcome<Reading> => ({ ok: false, error: serviceUnavailable(`${where}: ${message}; no value is reported`) });
    const key = JSON.stringify(item.values);
    const samples = values.get(key) ?? [];
    if (samples.length === 0) return emptyOutcome(item.onEmpty, `${where}: no series in the answer (lookback_delta ${item.shape.lookbackSeconds}s); no value is reported`, "series", now);
    if (samples.length > 1) return fail(`${samples.length} samples for one label set in the answer`);
    const sample = samples[0]!;
    const bad = unservable(sample.value);
    if (bad !== undefined) return fail(`the value is ${bad}`);
    let decimal;
    try {
      decimal = parseDecimal(sample.value!);
    } catch {
      return fail(`the value ${JSON.stringify(sample.value!.slice(0, 40))} is not a decimal number`);
    }
    let timestamp = sample.time;
    if (ages !== undefined) {
      const stamps = ages.get(key) ?? [];
      if (stamps.length !== 1) return fail(`the timestamp() query returned ${stamps.length} samples for this label set (the series changed between the two queries?)`);
      const seconds = Number(stamps[0]!.value);
      if (stamps[0]!.value === undefined || !Number.isFinite(seconds)) return fail(`the sample time ${JSON.stringify(stamps[0]!.value)} is not a number`);
      timestamp = Math.round(seconds * 1000);
    }
    return { ok: true, value: { value: decimal, timestamp } };
  }
}

/** A `prometheus` provider instance: the series skeleton (`../series.ts`) over one HTTP API. */
export class PrometheusProvider extends SeriesProvider<PrometheusQuery, ReadItem> {
  constructor(name: string, config: PrometheusProviderConfig, runtime: RuntimeEnv) {
    super("prometheus", name, runtime, new PrometheusBackend(name, config, runtime));
  }
}

/**
 * Advice about a valid `prometheus` rule (`ProviderModule.lintRule`):
 *
 * - `onEmpty: { value }`: the value is served whenever the answer has no
 *   series for a label set — also when the exporter is down, the scrape
 *   fails, the metric was renamed or `labels` has a typo — so a broken
 *   pipeline reads as that value (KEDA's Prometheus scaler answers 0 this
 *   way by default). Right only when the exporter drops a series exactly
 *   when its value is the one written (e.g. an exporter that stops
 *   reporting an empty queue);
 * - a template's range selector or subquery whose range is longer than
 *   `maxAgeSeconds`: a range reads `[t - range, t]` whatever
 *   `lookback_delta` is (Prometheus `promql/engine.go`), and a template's
 *   answer carries the evaluation time, so samples up to the range old
 *   feed a value the bridge cannot see as stale;
 * - a template rule with `lookbackSeconds` longer than `maxAgeSeconds`: its
 *   instant selectors may read samples that old, with the same blindness.
 *
 * @returns findings with paths inside the rule (`query.onEmpty`, `query.template`, `query.lookbackSeconds`)
 * @throws StatusError 500 when the template is not valid PromQL (as `checkRule`)
 */
export function lintPrometheusRule(rule: MetricRule<PrometheusQuery>): RuleFinding[] {
  const q = rule.query;
  const out: RuleFinding[] = [];
  if (typeof q.onEmpty === "object") {
    out.push({
      path: ["query", "onEmpty"],
      message:
        `onEmpty.value ${JSON.stringify(q.onEmpty.value)} is served whenever Prometheus answers no series for a label set: also when the exporter is down, ` +
        "its scrape fails, the metric is renamed or a label is misspelt, so the HPA scales on a made-up value; keep it only when the exporter drops " +
        `a series exactly when its value is ${q.onEmpty.value} (e.g. an empty queue), else use unavailable (the default)`,
    });
  }
  if (q.template === undefined) return out;
  const stale = `and a template's answer carries the evaluation time, so maxAgeSeconds cannot catch stale samples`;
  for (const range of templateRanges(templateOf(rule.name, q.template))) {
    if (range.seconds === undefined || range.seconds <= rule.maxAgeSeconds) continue;
    out.push({
      path: ["query", "template"],
      message:
        `template line ${range.line}, column ${range.column}: the range [${range.text}] (${range.seconds} s) is longer than maxAgeSeconds (${rule.maxAgeSeconds} s): ` +
        `the value may be computed from samples up to ${range.seconds} s old (a range is not bounded by lookback_delta), ${stale}; ` +
        `shorten the range to at most ${rule.maxAgeSeconds} s or raise maxAgeSeconds to the age you accept`,
    });
  }
  if (q.lookbackSeconds !== undefined && q.lookbackSeconds > rule.maxAgeSeconds) {
    out.push({
      path: ["query", "lookbackSeconds"],
      message:
        `lookbackSeconds (${q.lookbackSeconds} s) is longer than maxAgeSeconds (${rule.maxAgeSeconds} s): the template may read samples up to ${q.lookbackSeconds} s old, ${stale}; ` +
        "leave lookbackSeconds out (it defaults to maxAgeSeconds) or raise maxAgeSeconds",
    });
  }
  return out;
}

/** The `prometheus` provider module. */
export const prometheusModule: ProviderModule<PrometheusProviderConfig, PrometheusQuery> = {
  type: "prometheus",
  providerSchema: prometheusProviderSchema,
  querySchema: prometheusQuerySchema,
  create: (name, config, runtime) => new PrometheusProvider(name, config, runtime),
  // A config validated before this module loaded (Node, Lambda) had its templates checked for the placeholder only.
  checkRule: (rule) => {
    if (rule.query.template !== undefined) templateOf(rule.name, rule.query.template);
  },
  lintRule: lintPrometheusRule,
};

/** This module under the name every provider folder's `index.ts` exports it (`../provider-list.ts`). */
export { prometheusModule as providerModule };
