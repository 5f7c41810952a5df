/**
 * The policy in the request path: the `authenticate` and `authorize` hooks
 * of `createBridgeApp` (`shared/app.ts`) built from `BridgeConfig.policy`.
 *
 * The values read (shared/values/read.ts) calls `authorize` after it parsed the selector and found the
 * metric rule, and before any backend call; a Deny is thrown as
 * `403 Forbidden`, worded like apimachinery's `NewForbidden`
 * (`pkg/api/errors/errors.go`: `<resource> "<name>" is forbidden: <reason>`).
 */
import type { AuthorizationRequest } from "../values/request.ts";
import type { CustomAuthorizationRequest } from "../values/custom-read.ts";
import { CUSTOM_GROUP } from "../k8s/custom-types.ts";
import type { LogRecord } from "../observability/log.ts";
import type { BridgeConfig } from "../config/config.ts";
import { ANONYMOUS, type Caller } from "../identity.ts";
import { EXTERNAL_METRICS_GROUP, forbidden } from "../k8s/status.ts";
import { PolicySet, type Decision, type PolicyRequest } from "./evaluate.ts";
import { IMPLICIT_DENY_NOTE } from "./load.ts";

/** apimachinery's `NewForbidden` wording (`<group resource> "<name>" is forbidden: <reason>`) for a denied read of `groupResource`. */
function forbiddenText(groupResource: string, request: { caller: Caller; namespace: string; metric: string }, decision: Decision): string {
  return (
    `${groupResource} ${JSON.stringify(request.metric)} is forbidden: ` +
    `user ${JSON.stringify(request.caller.user)} may not read it in namespace ${JSON.stringify(request.namespace)}: ${decision.message}`
  );
}

/** The 403 message for a denied decision. */
export function forbiddenMessage(request: { caller: Caller; namespace: string; metric: string }, decision: Decision): string {
  return forbiddenText(`externalmetrics.${EXTERNAL_METRICS_GROUP}`, request, decision);
}

/**
 * An `authorize` hook enforcing `policies`.
 *
 * @throws StatusError 403 naming the policy, rule index and reason
 */
export function policyAuthorizer(policies: PolicySet): (request: AuthorizationRequest) => void {
  return (request) =>
    enforce(policies, { caller: request.caller, namespace: request.namespace, metric: request.metric, selector: request.selector }, EXTERNAL_METRICS_GROUP, "externalmetrics");
}

/**
 * Decide `request` with `policies`: return on Allow, throw the 403 of a
 * denied read of `<kind>.<group>` (apimachinery's `NewForbidden` wording,
 * details `{ name: metric, group, kind }`) on Deny.
 */
function enforce(policies: PolicySet, request: PolicyRequest, group: string, kind: string): void {
  const decision = policies.evaluate(request);
  if (decision.decision === "Allow") return;
  throw forbidden(forbiddenText(`${kind}.${group}`, request, decision), { name: request.metric, group, kind });
}

/**
 * An `authorizeCustom` hook enforcing `policies` on custom.metrics.k8s.io
 * reads (`shared/values/custom-read.ts` calls it before any provider read):
 * the request's `resource` picks the rules (`resources:`), its `selector`
 * is the parsed `metricLabelSelector`, and a policy without a rule naming
 * the resource denies (evaluate.ts, reason `no-rule-for-resource`). For a
 * cluster-scoped object (`namespace` "") only cluster-scoped policies apply.
 *
 * @throws StatusError 403, details `{ name: metric, group: custom.metrics.k8s.io, kind: resource }`
 */
export function customPolicyAuthorizer(policies: PolicySet): (request: CustomAuthorizationRequest) => void {
  return (request) =>
    enforce(
      policies,
      { caller: request.caller, namespace: request.namespace, metric: request.metric, selector: request.selector, resource: request.resource },
      CUSTOM_GROUP,
      request.resource,
    );
}

/**
 * The hooks for a config: every request's caller is the configured local
 * identity (the in-cluster proxy's signature verifier replaces it: pass it
 * in the options after these) and the policies decide. A config without a
 * `policy:` section denies every read (fail closed); so does a hand-built
 * `BridgeConfig` without `policy`.
 */
export function policyHooks(config: BridgeConfig): PolicyHooks {
  const policy = config.policy;
  if (policy === undefined) {
    const denyAll = new PolicySet([], "Deny", IMPLICIT_DENY_NOTE);
    return { authenticate: () => ANONYMOUS, authorize: policyAuthorizer(denyAll), authorizeCustom: customPolicyAuthorizer(denyAll) };
  }
  const identity = policy.localIdentity;
  return { authenticate: () => identity, authorize: policyAuthorizer(policy.policies), authorizeCustom: customPolicyAuthorizer(policy.policies) };
}

/** The caller and decision hooks of a built bridge (shared/app.ts `BridgeOptions` takes them). */
export interface PolicyHooks {
  /** the caller of a request: the configured local identity (a signature verifier replaces it) */
  authenticate: (request: Request) => Caller | Promise<Caller>;
  /** the policies' decision: returns on Allow, throws StatusError 403 on Deny */
  authorize: (request: AuthorizationRequest) => void | Promise<void>;
  /** the policies' decision on a custom.metrics.k8s.io read ({@link customPolicyAuthorizer}): returns on Allow, throws StatusError 403 on Deny */
  authorizeCustom: (request: CustomAuthorizationRequest) => void | Promise<void>;
}

/**
 * What an entry point logs about the policy at every start (Node start,
 * Worker isolate's first build, Lambda cold start):
 *
 * - no `policy:` section: a `warn` that every read is denied and how to open it;
 * - an explicit `defaultAction: Allow` with no ExternalMetricPolicy: a
 *   `warn` starting "running open: …" (every caller reads every series);
 * - otherwise nothing.
 */
export function policyStartupNotices(config: BridgeConfig): LogRecord[] {
  const policy = config.policy;
  if (policy === undefined || policy.implicit === true) {
    return [{ level: "warn", msg: `policy: ${IMPLICIT_DENY_NOTE}`, source: config.source }];
  }
  if (policy.defaultAction === "Allow" && policy.policies.policies.length === 0) {
    return [
      {
        level: "warn",
        msg:
          "running open: policy.defaultAction is Allow and there is no ExternalMetricPolicy, so every caller reads every series " +
          "this bridge serves; for a cluster set policy.defaultAction: Deny and grant reads with ExternalMetricPolicy objects (docs/policy.md)",
        source: config.source,
      },
    ];
  }
  return [];
}
