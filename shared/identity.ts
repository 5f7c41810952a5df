/**
 * The caller of a request, as Kubernetes authentication describes a user
 * (apiserver `pkg/authentication/user/user.go`, `user.Info`): name, uid,
 * groups and extra attributes. The in-cluster proxy authenticates the caller
 * and forwards this identity in signed headers; without a proxy the function
 * uses its configured local identity.
 */

/** A Kubernetes user as seen by authorization. */
export interface Caller {
  /** e.g. `system:serviceaccount:kube-system:horizontal-pod-autoscaler` */
  user: string;
  uid?: string;
  groups: string[];
  /** extra attributes, keys lowercased (`X-Remote-Extra-*`) */
  extra: Record<string, string[]>;
}

/**
 * A caller's whole identity as one string: the part of every cache and memo
 * key that depends on who asks (the bridge's decision memo, shared/bridge.ts;
 * the proxy's review memo, proxy/authz/authorize.ts; its values cache,
 * proxy/forward/forward.ts). JSON of `[user, uid ("" when absent), groups, extra]`
 * with the extra attributes in key order, so two distinct identities never
 * give the same text and one identity always gives the same text, whatever
 * order its extra keys arrived in; groups keep their order (authorization
 * sees them as given).
 *
 * @returns a JSON text (no memo here: callers that see the same Caller
 *   object many times keep their own)
 */
export function callerKey(caller: Caller): string {
  const extraKeys = Object.keys(caller.extra);
  if (extraKeys.length === 0) return JSON.stringify([caller.user, caller.uid ?? "", caller.groups]);
  return JSON.stringify([caller.user, caller.uid ?? "", caller.groups, extraKeys.sort().map((k) => [k, caller.extra[k]])]);
}

/** The anonymous caller (apiserver `pkg/authentication/request/anonymous`). */
export const ANONYMOUS: Caller = Object.freeze({
  user: "system:anonymous",
  groups: ["system:unauthenticated"],
  extra: {},
}) as Caller;

/** The identity the HPA controller reads external metrics with. */
export const HPA_CONTROLLER: Caller = Object.freeze({
  user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
  groups: ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
  extra: {},
}) as Caller;
