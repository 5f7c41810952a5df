/**
 * The shapes of label selectors and their error type, after
 * k8s.io/apimachinery (v0.37.2) `pkg/labels/selector.go` (`labels.Requirement`,
 * `labels.Selector`, `labels.Everything`, `labels.Nothing`),
 * `pkg/selection/operator.go` (`selection.Operator`) and
 * `pkg/apis/meta/v1/types.go` (`metav1.LabelSelector`).
 */

/**
 * A requirement operator, spelled like apimachinery's `selection.Operator`
 * (`pkg/selection/operator.go`): `"="`, `"=="`, `"!="`, `"in"`, `"notin"`,
 * `"exists"` (a bare `key`), `"!"` (`!key`), `"gt"` (`key>n`), `"lt"` (`key<n`).
 */
export type Operator = "=" | "==" | "!=" | "in" | "notin" | "exists" | "!" | "gt" | "lt";

/**
 * One condition on one label (`labels.Requirement`, `pkg/labels/selector.go`).
 *
 * `values`: sorted for `in`/`notin` (one or more; `parseSelector` removes
 * duplicates, `fromLabelSelector` keeps them, as apimachinery does); exactly
 * one for `=`, `==`, `!=`, `gt`, `lt` (an integer for `gt`/`lt`); none for
 * `exists` and `!`. Build one with `parseSelector`, `newRequirement` or
 * `fromLabelSelector`, which validate it.
 */
export interface Requirement {
  readonly key: string;
  readonly operator: Operator;
  readonly values: readonly string[];
}

/**
 * A conjunction of requirements (`labels.Selector`, `pkg/labels/selector.go`).
 *
 * `requirements` are sorted by key, as `labels.Parse` and `Selector.Add`
 * leave them. No requirements = `labels.Everything()`: matches every label
 * set. `nothing: true` = `labels.Nothing()` (what a nil `metav1.LabelSelector`
 * becomes): matches no label set, whatever `requirements` says; its string
 * form is `""` like Go's.
 */
export interface Selector {
  readonly requirements: readonly Requirement[];
  readonly nothing?: boolean;
}

/**
 * Thrown for an invalid selector, requirement or `metav1.LabelSelector`.
 *
 * `message` is apimachinery's error text exactly (e.g.
 * `unable to parse requirement: found '', expected: ',' or ')'`), except for
 * the length limit of `parseSelector`, which apimachinery does not have.
 * `position`, when present, is the UTF-16 offset in the parsed text of the
 * token the error is about. Callers answer it as `400 BadRequest`.
 */
export class SelectorError extends Error {
  readonly position?: number;

  constructor(message: string, position?: number) {
    super(message);
    this.name = "SelectorError";
    if (position !== undefined) this.position = position;
  }
}

/** `labels.Everything()`: the selector with no requirements; matches everything. */
export const EVERYTHING: Selector = Object.freeze({ requirements: Object.freeze([]) });

/** `labels.Nothing()`: matches no label set; `selectorToString` gives `""`. */
export const NOTHING: Selector = Object.freeze({ requirements: Object.freeze([]), nothing: true });

/**
 * Longest `labelSelector` the bridge and the proxy accept, in UTF-16 code
 * units (characters): `parseSelector`'s default limit, the bridge's values
 * route (shared/app.ts), the proxy's request intake (proxy/app.ts
 * `checkRequestSize`) and its cluster policy layer (proxy/policy/policies.ts). An
 * HPA's selector is a few dozen characters; apimachinery sets no limit of
 * its own (the request line's size bounds it).
 */
export const MAX_SELECTOR_LENGTH = 4096;
/** `parseSelector`'s default limit on the length of its input: {@link MAX_SELECTOR_LENGTH}. */
export const DEFAULT_MAX_SELECTOR_LENGTH = MAX_SELECTOR_LENGTH;

/**
 * `metav1.LabelSelector` (`pkg/apis/meta/v1/types.go`), e.g. an HPA's
 * `metricSelector`: `matchLabels` entries are `key=value` requirements,
 * `matchExpressions` use `In`, `NotIn`, `Exists`, `DoesNotExist`; all ANDed.
 */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: "In" | "NotIn" | "Exists" | "DoesNotExist"; values?: string[] }[];
}
