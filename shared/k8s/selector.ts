/**
 * Kubernetes label selectors, written by hand to behave exactly like
 * k8s.io/apimachinery (checked against v0.37.2):
 *
 * - `pkg/labels/selector.go`: the lexer, the parser (`labels.Parse`),
 *   `NewRequirement`, `Requirement.String`, `Requirement.Matches`.
 * - `pkg/api/validate/content/kube.go`, `dns.go`, `errors.go` (re-exported by
 *   `pkg/util/validation/validation.go` as `IsQualifiedName` and
 *   `IsValidLabelValue`): label key and value validation and its messages.
 * - `pkg/apis/meta/v1/helpers.go`: `LabelSelectorAsSelector`.
 * - `pkg/util/validation/field/errors.go`, `path.go` and `pkg/util/errors`:
 *   how the error messages are put together.
 * - Go's `sort.Sort` (`src/sort/zsortinterface.go`): the order that
 *   requirements with equal keys end up in (the sort is not stable).
 *
 * Error messages are byte-for-byte apimachinery's, so a `SelectorError`'s
 * `message` can go straight into a `400 BadRequest` Status.
 * `test/wire/selector.oracle.test.ts` checks all of this against the real Go code.
 *
 * This is the public module every importer uses; the implementation lives
 * in `shared/k8s/selector/`, one file per concern (see its `index.ts`).
 */

export * from "./selector/index.ts";
