/**
 * The public names of the label-selector module, a hand-written port of
 * k8s.io/apimachinery (v0.37.2) `pkg/labels/selector.go` and what it calls.
 * Import it through `shared/k8s/selector.ts`; the files here are split by
 * concern:
 *
 * - `types.ts`: `Requirement`, `Selector`, `SelectorError`, `EVERYTHING`,
 *   `NOTHING`, `metav1.LabelSelector`;
 * - `lexer.ts`, `parser.ts`: `labels.Lexer`, `labels.Parser`, `labels.Parse`;
 * - `validation.ts`: label keys and values (`pkg/util/validation`,
 *   `pkg/api/validate/content`) and `field.Error` messages;
 * - `requirement.ts`: `labels.NewRequirement`;
 * - `quote.ts`: Go's `strconv.Quote` (`%q`) and JSON string forms;
 * - `sort.ts`: Go's string order and its `sort.Sort` (pdqsort), so that
 *   requirements sharing a key come out in Go's order;
 * - `format.ts`, `match.ts`: `String()` and `Matches`;
 * - `label-selector.ts`: `metav1.LabelSelectorAsSelector`.
 */

export { fromLabelSelector } from "./label-selector.ts";
export { requirementToString, selectorToString } from "./format.ts";
export { matchesLabels } from "./match.ts";
export { parseSelector } from "./parser.ts";
export { makeRequirement, newRequirement } from "./requirement.ts";
export { goSortByKey } from "./sort.ts";
export { tokenize, type Token, type TokenKind } from "./lexer.ts";
export {
  DEFAULT_MAX_SELECTOR_LENGTH,
  MAX_SELECTOR_LENGTH,
  EVERYTHING,
  NOTHING,
  SelectorError,
  type LabelSelector,
  type Operator,
  type Requirement,
  type Selector,
} from "./types.ts";
export { isDNS1123Subdomain, validateLabelKey, validateLabelValue } from "./validation.ts";
