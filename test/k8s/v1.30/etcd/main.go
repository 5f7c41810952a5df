// Command etcd is etcd's own server entry point (go.etcd.io/etcd/server/v3/etcdmain),
// built from the version k8s.io/kubernetes pins, so the test control plane
// needs nothing from the host's package manager.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
