// Oracle for test/providers/prometheus.oracle.test.ts: what Prometheus's own
// PromQL parser (github.com/prometheus/prometheus/promql/parser, the one the
// server runs on every query, with its default options) makes of the queries the bridge generates, to
// compare with shared/providers/prometheus/promql.ts.
//
// For each JSON line {"query": q, "probes": [p…]} on stdin it prints one JSON
// line: {"error": …} when Parser.ParseExpr refuses q, else {"selectors": […]}
// with, for every vector selector in the tree (parser.Inspect order), its
// matchers {name, type ("=", "!=", "=~", "!~"), value} and, for regexp
// matchers, "probes": whether the matcher matches each probe string — through
// labels.Matcher.Matches, the anchored ^(?s:…)$ FastRegexMatcher the server
// itself uses (model/labels/regexp.go).
package main

import (
	"bufio"
	"encoding/json"
	"os"

	"github.com/prometheus/prometheus/promql/parser"
)

type input struct {
	Query  string   `json:"query"`
	Probes []string `json:"probes"`
}

type matcher struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Value  string `json:"value"`
	Probes []bool `json:"probes,omitempty"`
}

type selector struct {
	Name     string    `json:"name"`
	Matchers []matcher `json:"matchers"`
}

type output struct {
	Selectors []selector `json:"selectors,omitempty"`
	Error     string     `json:"error,omitempty"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<24), 1<<24)
	out := json.NewEncoder(os.Stdout)
	// The server's defaults (promql.Engine without experimental flags).
	p := parser.NewParser(parser.Options{})
	for in.Scan() {
		var req input
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			_ = out.Encode(output{Error: "bad input line: " + err.Error()})
			continue
		}
		expr, err := p.ParseExpr(req.Query)
		if err != nil {
			_ = out.Encode(output{Error: err.Error()})
			continue
		}
		selectors := []selector{}
		parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
			vs, ok := node.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			s := selector{Name: vs.Name, Matchers: []matcher{}}
			for _, m := range vs.LabelMatchers {
				one := matcher{Name: m.Name, Type: m.Type.String(), Value: m.Value}
				if m.Type.String() == "=~" || m.Type.String() == "!~" {
					one.Probes = make([]bool, len(req.Probes))
					for i, p := range req.Probes {
						one.Probes[i] = m.Matches(p)
					}
				}
				s.Matchers = append(s.Matchers, one)
			}
			selectors = append(selectors, s)
			return nil
		})
		_ = out.Encode(output{Selectors: selectors})
	}
}
