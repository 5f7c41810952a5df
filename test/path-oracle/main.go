// Oracle for test/wire/request-path.oracle.test.ts: what Go's net/url (the
// escaping client-go uses, and the decoding kube-apiserver's server applies
// to a request target) does with path segments and request paths, to
// compare with shared/k8s/request-path.ts.
//
// Standard library only. For each JSON line {"segment": s} on stdin it
// prints {"pathEscape": url.PathEscape(s), "queryEscape": url.QueryEscape(s)
// (what client-go's url.Values.Encode writes), "escapedPath": the segment as
// url.URL{Path: "/" + s}.EscapedPath() writes it (client-go's request URL,
// rest/request.go URL(), and the kube-aggregator's forwarded path)}; for
// {"target": t} it prints {"path": u.Path} of url.ParseRequestURI(t) (what
// net/http hands a handler as req.URL.Path) or {"error": …}.
package main

import (
	"bufio"
	"encoding/json"
	"net/url"
	"os"
	"strings"
)

type input struct {
	Segment *string `json:"segment"`
	Target  *string `json:"target"`
}

type output struct {
	PathEscape  string `json:"pathEscape,omitempty"`
	QueryEscape string `json:"queryEscape,omitempty"`
	EscapedPath string `json:"escapedPath,omitempty"`
	Path        string `json:"path,omitempty"`
	Error       string `json:"error,omitempty"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req input
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			_ = out.Encode(output{Error: err.Error()})
			continue
		}
		switch {
		case req.Segment != nil:
			u := url.URL{Path: "/" + *req.Segment}
			_ = out.Encode(output{PathEscape: url.PathEscape(*req.Segment), QueryEscape: url.QueryEscape(*req.Segment), EscapedPath: strings.TrimPrefix(u.EscapedPath(), "/")})
		case req.Target != nil:
			u, err := url.ParseRequestURI(*req.Target)
			if err != nil {
				_ = out.Encode(output{Error: err.Error()})
			} else {
				_ = out.Encode(output{Path: u.Path})
			}
		default:
			_ = out.Encode(output{Error: "neither segment nor target"})
		}
	}
}
