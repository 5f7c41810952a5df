/**
 * Exact mapping of a request's label selector onto the finite set of series
 * a metric rule reads, shared by providers whose series are identified by
 * several selector labels (CloudWatch dimensions, Cloud Monitoring labels).
 *
 * The mapping is exact or refused, never widened (prometheus-adapter
 * `pkg/naming/metrics_query.go`; the `aws-sqs` provider is the one-label
 * case, with its own {@link SeriesNoun}): a selector names the series
 * through `=`, `==` and `in` on the rule's labels; `!=`, `notin`,
 * `exists`, `!key`, `>` and `<` then narrow that set through apimachinery's
 * own matcher.
 */
import * as z from "../config/zod.ts";
import { matchesLabels, selectorToString, validateLabelKey, validateLabelValue, type Selector } from "../k8s/selector.ts";
import { badRequest, notFound, StatusError } from "../k8s/status.ts";
import type { RuleFinding } from "./types.ts";

/** Config schema of a selector label key a rule maps (apimachinery label-key syntax). */
export const labelKeySchema = z.string().check(
  z.superRefine((key, ctx) => {
    const problem = validateLabelKey(key);
    if (problem !== undefined) ctx.addIssue({ code: "custom", message: `invalid label key: ${problem}` });
  }),
);

/** Config schema of a selector label value a rule lists (apimachinery label-value syntax). */
export const labelValueSchema = z.string().check(
  z.superRefine((value, ctx) => {
    const problem = validateLabelValue(value);
    if (problem !== undefined) ctx.addIssue({ code: "custom", message: `invalid label value: ${problem}` });
  }),
);

/**
 * Config schema of a rule's `onEmpty` (`OnEmpty` of `./series.ts`): what the
 * rule reports when the backend's answer holds no value for a series —
 * `unavailable` (503, the default), `notFound` (404), or `{value}`, a plain
 * decimal the rule's author wrote (e.g. `"0"` for an idle queue whose metric
 * the backend stops reporting). Never 0 unless written here.
 */
export const onEmptySchema = z._default(
  z.union([
    z.enum(["unavailable", "notFound"]),
    z.strictObject({ value: z.string().check(z.regex(/^-?\d+(?:\.\d+)?$/, "must be a plain decimal number such as 0 or 1.5")) }),
  ]),
  "unavailable",
);

/**
 * The advice (`ProviderModule.lintRule`) about a rule's `onEmpty: { value }`
 * on a backend that answers "no datapoint" alike for a series that exists
 * and is idle and for one that does not exist (CloudWatch, Cloud
 * Monitoring): the value is then also served for a misspelt or deleted
 * queue, topic or dimension, so the HPA scales on a made-up number. It is
 * right only for metrics the backend publishes on activity alone (CloudWatch
 * `AWS/SQS` metrics of an idle queue, Pub/Sub's of an idle subscription),
 * and only for series known to exist: an allow-list (`values`) on every
 * mapped label makes any other label value a 404 before the backend is
 * read. No finding when `onEmpty` is not a value, or when the rule maps at
 * least one label and every mapped label has an allow-list.
 *
 * @param onEmpty the rule's `query.onEmpty`
 * @param mappings the rule's label mappings (`dimensionLabels`, `selectorLabels`)
 * @param words how the provider names things: `backend` (e.g. `CloudWatch`),
 *   `field` (the mappings' field, e.g. `dimensionLabels`), `allowList` (one
 *   mapping with an allow-list, as written in YAML)
 * @returns at most one finding, at `query.onEmpty`
 */
export function onEmptyValueFindings(
  onEmpty: "notFound" | "unavailable" | { value: string },
  mappings: Readonly<Record<string, LabelMapping>>,
  words: { backend: string; field: string; allowList: string },
): RuleFinding[] {
  if (typeof onEmpty !== "object") return [];
  const labels = mappedLabels(mappings);
  const open = labels.filter((l) => l.values === undefined).map((l) => l.label);
  if (labels.length > 0 && open.length === 0) return [];
  const which = open.length > 0 ? `the label${open.length > 1 ? "s" : ""} ${open.join(", ")} without an allow-list` : "a rule that maps no label";
  return [
    {
      path: ["query", "onEmpty"],
      message:
        `onEmpty.value ${JSON.stringify(onEmpty.value)} is served for every series ${words.backend} has no datapoint for: with ${which}, also for a name that is misspelt ` +
        `or does not exist, so the HPA scales on a made-up value. It is right only for metrics ${words.backend} publishes on activity alone (e.g. an idle queue's), ` +
        `and only for series that exist: give each label in ${words.field} an allow-list (${words.allowList}) so any other value is a 404; else keep unavailable (the default, 503)`,
    },
  ];
}

/** One selector label a rule understands. */
export interface MappedLabel {
  /** the selector label key */
  label: string;
  /**
   * Allow-list of label values. When set, a value outside it is 404, and a
   * selector that does not name values for this label reads all of them.
   * When absent, the selector must name the values.
   */
  values?: readonly string[];
}

/**
 * How a rule's config maps one selector label to a backend name: the name
 * itself, or an object whose optional `values` allow-list maps each allowed
 * label value to the backend value (CloudWatch `dimensionLabels`, Cloud
 * Monitoring `selectorLabels`).
 */
export type LabelMapping = string | { values?: Readonly<Record<string, string>> | undefined };

/** The {@link MappedLabel}s of a rule's label mappings, in the rule's order. */
export function mappedLabels(mappings: Readonly<Record<string, LabelMapping>>): MappedLabel[] {
  return Object.entries(mappings).map(([label, m]) =>
    typeof m === "string" || m.values === undefined ? { label } : { label, values: Object.keys(m.values) },
  );
}

/** The backend value for a selector label value: its `values` entry, else the label value itself. */
export function mappedValue(mapping: LabelMapping, value: string): string {
  return typeof mapping === "string" ? value : (mapping.values?.[value] ?? value);
}

/** Most series one request may name (bounded work per request). */
export const MAX_SERIES_PER_REQUEST = 100;

/**
 * How the messages of {@link resolveLabelSets} name a series when its
 * provider's series are named objects: `aws-sqs` passes
 * `{ one: "queue", many: "queues", placeholder: "NAME" }` and its messages
 * read "matches no queue", "must name the queues with queue=NAME …",
 * `queue "x" is not served` (details `kind: "queue"`). Without it a series
 * is a "series" and a value a "VALUE".
 */
export interface SeriesNoun {
  one: string;
  many: string;
  placeholder: string;
}

/**
 * The 400 of a selector requirement on a label the rule does not map (not a
 * bad value of a mapped label): a custom metric rule whose `objectLabel` or
 * `namespaceLabel` gets this at start-up cannot work for any object
 * (shared/values/custom-read.ts `checkMapping`), while a value refused by a
 * label's allow-list or format only concerns that value.
 */
export class UnmappedRequirement extends StatusError {
  constructor(message: string) {
    super(400, message);
  }
}

/**
 * The label sets (one per series, each giving a value to every mapped label)
 * that `selector` identifies for a rule, sorted by their values in label order.
 * A rule that maps no label reads one series, `{}`, and accepts only an
 * empty selector.
 *
 * @param metric the rule name, for messages
 * @param labels the labels the rule understands, in the rule's order
 * @param maxSeries most series one request may name; more than 16 × this
 *   many candidates (before `!=`/`notin` narrow them) is refused without
 *   building them
 * @param noun the words of the messages (see {@link SeriesNoun})
 * @throws StatusError 400 when a requirement is on another label (naming it),
 *   when a label without allow-list is not named by `=`/`in`, when the
 *   selector matches no series or names more than {@link MAX_SERIES_PER_REQUEST};
 *   404 when a value is outside a label's allow-list
 */
export function resolveLabelSets(
  metric: string,
  selector: Selector,
  labels: readonly MappedLabel[],
  maxSeries = MAX_SERIES_PER_REQUEST,
  noun?: SeriesNoun,
): Record<string, string>[] {
  const known = new Set(labels.map((l) => l.label));
  const many = noun?.many ?? "series";
  const understood =
    labels.length === 0
      ? "this rule understands no selector labels"
      : noun !== undefined && labels.length === 1
        ? `this rule understands only the label "${labels[0]!.label}"`
        : `this rule understands only the labels ${labels.map((l) => `"${l.label}"`).join(", ")}`;
  for (const r of selector.requirements) {
    if (!known.has(r.key)) {
      throw new UnmappedRequirement(`metric ${metric}: selector requirement "${selectorToString({ requirements: [r] })}" cannot be mapped: ${understood}`);
    }
  }
  const choices: string[][] = [];
  let count = 1;
  for (const mapped of labels) {
    let candidates: Set<string> | undefined;
    for (const r of selector.requirements) {
      if (r.key !== mapped.label || !(r.operator === "=" || r.operator === "==" || r.operator === "in")) continue;
      const values = new Set(r.values);
      candidates = candidates === undefined ? values : new Set([...candidates].filter((v) => values.has(v)));
    }
    if (candidates === undefined) {
      if (mapped.values === undefined) {
        throw badRequest(
          noun !== undefined
            ? `metric ${metric}: the selector must name the ${noun.many} with ${mapped.label}=${noun.placeholder} or ` +
                `${mapped.label} in (A,B); this rule has no ${noun.many} allow-list to choose from`
            : `metric ${metric}: the selector must name the "${mapped.label}" values with ${mapped.label}=VALUE or ${mapped.label} in (A,B); ` +
                `this rule has no allow-list of ${mapped.label} values to choose from`,
        );
      }
      candidates = new Set(mapped.values);
    }
    const sorted = [...candidates].sort();
    choices.push(sorted);
    count *= sorted.length;
    if (count > maxSeries * 16) break; // the product is refused below; stop before building it
  }
  if (count > maxSeries * 16) {
    throw badRequest(`metric ${metric}: selector names more than ${maxSeries} ${many}; at most ${maxSeries} per request`);
  }
  let sets: Record<string, string>[] = [{}];
  labels.forEach((mapped, i) => {
    sets = sets.flatMap((set) => choices[i]!.map((v) => ({ ...set, [mapped.label]: v })));
  });
  const chosen = sets.filter((set) => matchesLabels(selector, set));
  if (chosen.length === 0) {
    throw badRequest(`metric ${metric}: selector "${selectorToString(selector)}" matches no ${noun?.one ?? "series of this rule"}`);
  }
  if (chosen.length > maxSeries) {
    throw badRequest(`metric ${metric}: selector names ${chosen.length} ${many}; at most ${maxSeries} per request`);
  }
  for (const mapped of labels) {
    if (mapped.values === undefined) continue;
    const allowed = new Set(mapped.values);
    const outside = [...new Set(chosen.map((s) => s[mapped.label]!).filter((v) => !allowed.has(v)))];
    if (outside.length > 0) {
      const kind = noun?.one ?? mapped.label;
      throw notFound(`metric ${metric}: ${kind} ${outside.map((v) => JSON.stringify(v)).join(", ")} is not served by this rule`, {
        name: outside[0],
        kind,
      });
    }
  }
  return chosen;
}
