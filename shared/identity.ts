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
