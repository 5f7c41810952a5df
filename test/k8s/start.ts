/**
 * Run the test control plane by hand (what test/e2e/k8s.e2e.test.ts starts):
 *
 *   node test/k8s/start.ts [--hpa-sync-period 2] [--downscale-stabilization 4]
 *
 * Builds the binaries if needed (test/k8s/build.sh), starts etcd,
 * kube-apiserver and kube-controller-manager on 127.0.0.1, prints the admin
 * kubeconfig and a kubectl line, and stops everything on Ctrl-C.
 */
import { parseArgs } from "node:util";
import { buildControlPlane, startControlPlane } from "./cluster.ts";

const { values } = parseArgs({
  options: {
    "hpa-sync-period": { type: "string", default: "2" },
    "downscale-stabilization": { type: "string", default: "4" },
  },
});
const binDir = await buildControlPlane({ log: (l) => console.error(l) });
const cp = await startControlPlane({
  binDir,
  hpaSyncPeriodSeconds: Number(values["hpa-sync-period"]),
  downscaleStabilizationSeconds: Number(values["downscale-stabilization"]),
  log: (l) => console.error(l),
});
console.log(`
control plane up: ${cp.server}
  dir (certs, kubeconfigs, logs): ${cp.dir}
  ${binDir}/kubectl --kubeconfig ${cp.adminKubeconfig} get --raw /readyz
Ctrl-C stops everything and deletes ${cp.dir}.`);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    cp.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
}
