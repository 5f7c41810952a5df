// promlint: lint a Prometheus text exposition read from stdin with the same
// linter `promtool check metrics` runs (client_golang's
// prometheus/testutil/promlint). Prints one problem per line as
// "<metric> <text>" and exits 3 when there is any, 1 on a parse error.
package main

import (
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func main() {
	problems, err := promlint.New(os.Stdin).Lint()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error while linting:", err)
		os.Exit(1)
	}
	for _, p := range problems {
		fmt.Printf("%s %s\n", p.Metric, p.Text)
	}
	if len(problems) > 0 {
		os.Exit(3)
	}
}
