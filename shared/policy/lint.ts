/**
 * `policy lint`: problems a policy loads with but that are almost certainly
 * mistakes. (Problems it cannot load with — schema, patterns, selectors —
 * are the loader's ConfigIssues; the CLI reports both.)
 *
 * - a rule shadowed by earlier rules: the first rule whose metric matches
 *   decides, so a later rule that only matches names an earlier one already
 *   matches never decides. With the bridge config this is exact over the
 *   configured metric names; without it, only an identical or a
 *   match-everything earlier pattern is detected (regular-language
 *   inclusion is not attempted);
 * - a rule whose pattern matches no metric the config defines (a typo, or a
 *   metric that was renamed);
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

/**
 * Lint compiled policies.
 *
 * @param metrics the bridge's metric rules, when the config is known
 * @param bridgeDefault the bridge's `policy.defaultAction`, when known
 * @param unmappable with the config's providers: see {@link LabelMappingCheck}
 * @returns findings, every one a warning
 */
export function lintPolicies(
  policies: readonly CompiledPolicy[],
  metrics: readonly MetricRule[] | undefined,
  bridgeDefault: "Allow" | "Deny" | undefined,
  unmappable?: LabelMappingCheck,
): Finding[] {
  const findings: Finding[] = [];
  const warn = (p: CompiledPolicy, line: number, path: string, message: string) =>
    findings.push({ severity: "warning", source: p.source, line, column: 1, path, message, policy: p.id });
  const keys = metrics?.map((m) => m.key);
  for (const p of policies) {
    p.rules.forEach((rule, i) => {
      const path = `spec.rules[${rule.index}]`;
      const earlier = p.rules.slice(0, i);
      if (keys !== undefined) {
        const matched = keys.filter((k) => rule.pattern.matches(k));
        if (matched.length === 0) {
          warn(p, rule.line, `${path}.metric`, `pattern "${rule.pattern.source}" matches no metric the bridge defines (${keys.join(", ")})`);
        } else {
          const deciders = new Set<number>();
          const covered = matched.every((k) => {
            const first = earlier.find((r) => r.pattern.matches(k));
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
        for (const r of reqs) {
          const refused: string[] = [];
          let reason: string | undefined;
          for (const m of metrics) {
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

/** Whether `earlier` provably matches every name `later` matches (without the metric list). */
function shadows(earlier: CompiledRule, later: CompiledRule): boolean {
  return MATCH_ALL.test(earlier.pattern.source) || earlier.pattern.source === later.pattern.source;
}
