/**
 * The policy in the request path: the `authenticate` and `authorize` hooks
 * of `createApp` (`shared/app.ts`) built from `BridgeConfig.policy`.
 *
 * The app calls `authorize` after it parsed the selector and found the
 * metric rule, and before any backend call; a Deny is thrown as
 * `403 Forbidden`, worded like apimachinery's `NewForbidden`
 * (`pkg/api/errors/errors.go`: `<resource> "<name>" is forbidden: <reason>`).
 */
import type { AuthorizationRequest, BridgeOptions } from "../app.ts";
import type { BridgeConfig } from "../config/config.ts";
import type { Caller } from "../identity.ts";
import { EXTERNAL_METRICS_GROUP, forbidden } from "../k8s/status.ts";
import type { Decision, PolicySet } from "./evaluate.ts";

/** The 403 message for a denied decision. */
export function forbiddenMessage(request: { caller: Caller; namespace: string; metric: string }, decision: Decision): string {
  return (
    `externalmetrics.${EXTERNAL_METRICS_GROUP} ${JSON.stringify(request.metric)} is forbidden: ` +
    `user ${JSON.stringify(request.caller.user)} may not read it in namespace ${JSON.stringify(request.namespace)}: ${decision.message}`
  );
}

/**
 * An `authorize` hook enforcing `policies`.
 *
 * @throws StatusError 403 naming the policy, rule index and reason
 */
export function policyAuthorizer(policies: PolicySet): (request: AuthorizationRequest) => void {
  return (request) => {
    const decision = policies.evaluate({
      caller: request.caller,
      namespace: request.namespace,
      metric: request.metric,
      selector: request.selector,
    });
    if (decision.decision === "Allow") return;
    throw forbidden(forbiddenMessage(request, decision), {
      name: request.metric,
      group: EXTERNAL_METRICS_GROUP,
      kind: "externalmetrics",
    });
  };
}

/**
 * The hooks for a config: without a `policy:` section (and no policies),
 * none — the app's defaults (anonymous, allow). With one, every request's
 * caller is the configured local identity and the policies decide.
 *
 * The in-cluster proxy's signature verifier replaces `authenticate` (pass
 * it in the options after these); `authorize` stays.
 */
export function policyHooks(config: BridgeConfig): Pick<BridgeOptions, "authenticate" | "authorize"> {
  const policy = config.policy;
  if (policy === undefined) return {};
  const identity = policy.localIdentity;
  return { authenticate: () => identity, authorize: policyAuthorizer(policy.policies) };
}
