#!/usr/bin/env bash
# Build the test control plane (etcd, kube-apiserver, kube-controller-manager,
# kubectl) from the Go module proxy into a cache directory outside git.
#
# Idempotent: when the binaries for this go.mod/go.sum are already in the
# cache it only prints where they are. Prints the time it took either way.
# Output: the last line is the bin directory (for scripts to capture).
#
# Env: EMB_K8S_CACHE  cache root (default $HOME/.cache/external-metrics-bridge)
#      GO             the go command (default: go on PATH, else /usr/local/go/bin/go)
#      GOCACHE        Go's build cache (default: <cache root>/go-build, so a
#                     rebuild after a go.mod change is incremental even from a
#                     fresh clone whose XDG_CACHE_HOME is inside the tree)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

go_cmd="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
version="$(sed -n 's/^[[:space:]]*\(require \)\{0,1\}k8s\.io\/kubernetes \(v[^ ]*\).*/\2/p' go.mod | head -1)"
[ -n "$version" ] || { echo "build.sh: no k8s.io/kubernetes require in go.mod" >&2; exit 1; }
cache_root="${EMB_K8S_CACHE:-$HOME/.cache/external-metrics-bridge}"
bin="$cache_root/k8s-$version/bin"
stamp_want="$(cat go.mod go.sum etcd/main.go build.sh | sha256sum | cut -c1-16)"
bins=(etcd kube-apiserver kube-controller-manager kubectl)

export GOCACHE="${GOCACHE:-$cache_root/go-build}"
mkdir -p "$cache_root/k8s-$version"
# One build at a time per machine (a test run and a manual run may race).
exec 9>"$cache_root/k8s-$version/.lock"
flock 9

start=$(date +%s)
have_all=1
for b in "${bins[@]}"; do [ -x "$bin/$b" ] || have_all=0; done
if [ "$have_all" = 1 ] && [ "$(cat "$bin/.stamp" 2>/dev/null)" = "$stamp_want" ]; then
  echo "build.sh: warm: Kubernetes $version binaries cached in $bin ($(( $(date +%s) - start ))s)" >&2
  echo "$bin"
  exit 0
fi

echo "build.sh: cold: building Kubernetes $version (etcd, kube-apiserver, kube-controller-manager, kubectl) with $("$go_cmd" version)" >&2
tmp="$(mktemp -d "$cache_root/k8s-$version/build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# -trimpath and -s -w: smaller binaries, nothing machine-specific in them.
# One invocation for all four so shared packages compile once.
# Version stamping as kubernetes/hack/lib/version.sh does it, so /version
# and kubectl report the pinned release instead of v0.0.0-master.
minor="${version#v1.}"; minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
CGO_ENABLED=0 "$go_cmd" build -trimpath -ldflags="$ldflags" -o "$tmp/" \
  ./etcd \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kubectl
[ -x "$tmp/etcd" ] || { echo "build.sh: etcd binary missing after build" >&2; exit 1; }
echo "$stamp_want" > "$tmp/.stamp"
rm -rf "$bin"
mv "$tmp" "$bin"
trap - EXIT
echo "build.sh: built in $(( $(date +%s) - start ))s into $bin" >&2
echo "$bin"
