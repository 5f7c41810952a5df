/**
 * `policy lint`: problems a policy loads with but that are almost certainly
 * mistakes. (Problems it cannot load with — schema, patterns, selectors —
 * are the loader's ConfigIssues; the CLI reports both.)
 *
 * - a rule shadowed by earlier rules: the first rule whose metric matches
 *   (for the resource read: `resources:`) decides, so a later rule that only
 *   matches names an earlier one already matches, for every resource it
 *   names, never decides. With the bridge config this is exact over the
 *   configured metric names (External rules for `external`, the `describes:`
 *   rules of each custom resource); without it, only an identical or a
 *   match-everything earlier pattern over the same resources is detected
 *   (regular-language inclusion is not attempted);
 * - a rule whose pattern matches no metric the config defines for its
 *   resources (a typo, or a metric that was renamed);
 * - with the bridge config: a `resources` entry no metric rule of the config
 *   serves (no `describes.resource` names it; `external` with no External
 *   rule): the rule grants nothing there;
 * - a rule whose selector matches no label set (it denies everything but
 *   unsatisfiable requests; write `deny: true`);
 * - a cluster-scoped policy without subjects whose defaultAction is Allow:
 *   it applies to every request, so the bridge's `policy.defaultAction`
 *   never applies and a namespace without a policy of its own is governed by
 *   this one alone;
 * - a rule whose selector only excludes values (`queue notin (a,b)`,
 *   `queue!=a`, `!queue`): it grants every other series of the metrics it
 *   matches, including series that appear later — name what it allows
 *   (`queue in (…)`) instead;
 * - with the bridge config and its providers: a rule whose selector has a
 *   requirement on a label a metric rule it matches cannot map (the
 *   provider's `plan` refuses it, `shared/providers/label-mapping.ts`).
 *   Every request the rule allows for that metric must imply that
 *   requirement, and the bridge answers every such request 400, so the
 *   rule grants nothing for that metric.
 */
import type { ConfigIssue } from "../config/yaml.ts";
import { requirementToString, type Requirement, type Selector } from "../k8s/selector.ts";
import type { MetricRule } from "../providers/types.ts";
import type { CompiledPolicy, CompiledRule } from "./evaluate.ts";
import { isSatisfiable } from "./subset.ts";
import { coversResource, EVERY_CUSTOM_RESOURCE, EXTERNAL_RESOURCE } from "./schema.ts";

/** A lint finding; loader problems are `error`s, the checks here `warning`s. */
export interface Finding extends ConfigIssue {
  severity: "error" | "warning";
  /** the policy id, when the finding is about one */
  policy?: string;
}

/** Patterns that match every (non-empty) metric name, written the usual ways. */
const MATCH_ALL = /^\^?\(*(\?:)?\.[*+]\)*\$?$/;

/** Operators that only exclude: a selector made of these alone bounds nothing. */
const EXCLUDING: ReadonlySet<string> = new Set(["notin", "!=", "!"]);

/**
 * Why a metric rule cannot map a selector made of one requirement, or
 * undefined when it can (or when the requirement is refused for another
 * reason than its label). The CLI answers from the provider's `plan`.
 */
export type LabelMappingCheck = (rule: MetricRule, selector: Selector) => string | undefined;

/** The metric rules a config serves for one `resources` entry: External rules for `external`, else the `describes:` rules of that resource. */
function rulesOfResource(resource: string, metrics: readonly MetricRule[], customMetrics: readonly MetricRule[]): readonly MetricRule[] {
  if (resource === EXTERNAL_RESOURCE) return metrics;
  return resource === EVERY_CUSTOM_RESOURCE ? customMetrics : customMetrics.filter((m) => m.describes?.resource === resource);
}

/**
 * Lint compiled policies.
 *
 * @param metrics the bridge's External metric rules, when the config is known
 * @param bridgeDefault the bridge's `policy.defaultAction`, when known
 * @param unmappable with the config's providers: see {@link LabelMappingCheck}
 * @param customMetrics the bridge's custom.metrics.k8s.io rules (`BridgeConfig.customMetrics`), when the config is known
 * @returns findings, every one a warning
 */
export function lintPolicies(
  policies: readonly CompiledPolicy[],
  metrics: readonly MetricRule[] | undefined,
  bridgeDefault: "Allow" | "Deny" | undefined,
  unmappable?: LabelMappingCheck,
  customMetrics: readonly MetricRule[] = [],
): Finding[] {
  const findings: Finding[] = [];
  const warn = (p: CompiledPolicy, line: number, path: string, message: string) =>
    findings.push({ severity: "warning", source: p.source, line, column: 1, path, message, policy: p.id });
  for (const p of policies) {
    p.rules.forEach((rule, i) => {
      const path = `spec.rules[${rule.index}]`;
      const earlier = p.rules.slice(0, i);
      if (metrics !== undefined) {
        // (resource, metric key) pairs the rule may decide, over the resources the config serves
        const pairs: { resource: string; key: string }[] = [];
        const served: string[] = [];
        rule.resources.forEach((resource, j) => {
          const of = rulesOfResource(resource, metrics, customMetrics);
          if (of.length === 0) {
            warn(
              p,
              rule.line,
              `${path}.resources[${j}]`,
              resource === EXTERNAL_RESOURCE
                ? "resource external: the bridge config defines no External metric, so the rule grants nothing there"
                : resource === EVERY_CUSTOM_RESOURCE
                  ? "resource *: the bridge config has no describes: rule, so the rule grants nothing there"
                  : `resource "${resource}": no metric rule of the bridge config describes it (describes.resource), so the rule grants nothing there`,
            );
            return;
          }
          for (const m of of) {
            served.push(m.key);
            if (rule.pattern.matches(m.key)) pairs.push({ resource: resource === EVERY_CUSTOM_RESOURCE ? m.describes!.resource : resource, key: m.key });
          }
        });
        const keys = [...new Set(served)];
        const matched = [...new Set(pairs.map((x) => x.key))];
        if (keys.length === 0) {
          // every resource entry was reported above
        } else if (matched.length === 0) {
          warn(p, rule.line, `${path}.metric`, `pattern "${rule.pattern.source}" matches no metric the bridge defines${rule.resources.length === 1 && rule.resources[0] === EXTERNAL_RESOURCE ? "" : ` for ${rule.resources.join(", ")}`} (${keys.join(", ")})`);
        } else {
          const deciders = new Set<number>();
          const covered = pairs.every(({ resource, key: k }) => {
            const first = earlier.find((r) => coversResource(r.resources, resource) && r.pattern.matches(k));
            if (first !== undefined) deciders.add(first.index);
            return first !== undefined;
          });
          if (covered) {
            warn(
              p,
              rule.line,
              path,
              `rule never decides: every metric it matches (${matched.join(", ")}) is matched first by ` +
                [...deciders].map((d) => `rules[${d}]`).join(", "),
            );
          }
        }
      } else {
        const shadow = earlier.find((r) => shadows(r, rule));
        if (shadow !== undefined) warn(p, rule.line, path, `rule never decides: rules[${shadow.index}] ("${shadow.pattern.source}") matches every name it matches`);
      }
      if (rule.selector !== undefined && !isSatisfiable(rule.selector)) {
        warn(p, rule.line, `${path}.selector`, "selector matches no label set, so the rule denies every request; write deny: true");
      }
      const reqs: readonly Requirement[] = rule.selector?.requirements ?? [];
      if (reqs.length > 0 && reqs.every((r) => EXCLUDING.has(r.operator))) {
        warn(
          p,
          rule.line,
          `${path}.selector`,
          `selector "${rule.selectorText}" only excludes values, so it grants every other series of the metrics it matches, ` +
            "including series created later; name the allowed values (key in (a,b)) instead",
        );
      }
      if (unmappable !== undefined && metrics !== undefined && rule.selector !== undefined) {
        const ruleMetrics = [...new Set(rule.resources.flatMap((resource) => rulesOfResource(resource, metrics, customMetrics)))];
        for (const r of reqs) {
          const refused: string[] = [];
          let reason: string | undefined;
          for (const m of ruleMetrics) {
            if (!rule.pattern.matches(m.key)) continue;
            const why = unmappable(m, { requirements: [r] });
            if (why !== undefined) {
              refused.push(m.name);
              reason ??= why;
            }
          }
          if (refused.length > 0) {
            warn(
              p,
              rule.line,
              `${path}.selector`,
              `requirement "${requirementToString(r)}" is on a label the metric rule cannot map (${refused.join(", ")}): ` +
                `every read this rule allows of ${refused.length === 1 ? "it" : "them"} is answered 400, so it grants nothing there (${reason})`,
            );
          }
        }
      }
    });
    if (p.namespace === undefined && p.subjects === undefined && p.defaultAction === "Allow" && bridgeDefault !== "Allow") {
      warn(
        p,
        p.line,
        "spec.defaultAction",
        "a cluster-scoped policy without subjects applies to every request, so with defaultAction Allow the bridge's " +
          "policy.defaultAction never applies: a namespace without a policy of its own may read what this policy does not deny",
      );
    }
  }
  return findings;
}

/** Whether `earlier` provably matches every name `later` matches, for every resource `later` names (without the metric list). */
function shadows(earlier: CompiledRule, later: CompiledRule): boolean {
  if (!later.resources.every((r) => coversResource(earlier.resources, r))) return false;
  return MATCH_ALL.test(earlier.pattern.source) || earlier.pattern.source === later.pattern.source;
}
