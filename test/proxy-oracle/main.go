// Oracle for test/proxy/proxy.oracle.test.ts: what kube-apiserver's own code
// computes for a request, to compare with shared/proxy/request-info.ts and
// authorize.ts.
//
// For each JSON line {method, url, user:{name,uid,groups,extra}} on stdin it
// runs k8s.io/apiserver's RequestInfoFactory (APIPrefixes api/apis,
// GrouplessAPIPrefixes api — the generic apiserver's), builds the
// authorizer attributes with filters.GetAuthorizerAttributes, and sends them
// through the delegated webhook authorizer of aggregated API servers
// (authorizerfactory.DelegatingAuthorizerConfig) to a local HTTP endpoint
// that records the SubjectAccessReview it receives. It prints one JSON line
// with the request info and the review's spec.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
)

type input struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	User   struct {
		Name   string              `json:"name"`
		UID    string              `json:"uid"`
		Groups []string            `json:"groups"`
		Extra  map[string][]string `json:"extra"`
	} `json:"user"`
}

type output struct {
	RequestInfo *request.RequestInfo                    `json:"requestInfo,omitempty"`
	Review      *authorizationv1.SubjectAccessReviewSpec `json:"review,omitempty"`
	Error       string                                  `json:"error,omitempty"`
}

func main() {
	var captured *authorizationv1.SubjectAccessReviewSpec
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var sar authorizationv1.SubjectAccessReview
		if err := json.Unmarshal(body, &sar); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		spec := sar.Spec
		captured = &spec
		sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(sar)
	}))
	defer server.Close()

	client, err := authorizationv1client.NewForConfig(&rest.Config{Host: server.URL, QPS: 1e6, Burst: 1e6}) // no client-side rate limit
	if err != nil {
		panic(err)
	}
	factory := &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		var c input
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			panic(err)
		}
		var o output
		req, err := http.NewRequest(c.Method, c.URL, nil)
		if err != nil {
			o.Error = "request: " + err.Error()
		} else if info, err := factory.NewRequestInfo(req); err != nil {
			o.Error = "requestinfo: " + err.Error()
		} else {
			o.RequestInfo = info
			// A fresh authorizer per case: no answer comes from its cache.
			authz, err := authorizerfactory.DelegatingAuthorizerConfig{
				SubjectAccessReviewClient: client,
				AllowCacheTTL:             time.Second,
				DenyCacheTTL:              time.Second,
				WebhookRetryBackoff:       &wait.Backoff{Duration: time.Millisecond, Steps: 1},
			}.New()
			if err != nil {
				panic(err)
			}
			u := &user.DefaultInfo{Name: c.User.Name, UID: c.User.UID, Groups: c.User.Groups, Extra: c.User.Extra}
			ctx := request.WithRequestInfo(request.WithUser(context.Background(), u), info)
			attrs, err := filters.GetAuthorizerAttributes(ctx)
			if err != nil {
				o.Error = "attributes: " + err.Error()
			} else {
				captured = nil
				if _, _, err := authz.Authorize(ctx, attrs); err != nil {
					o.Error = "authorize: " + err.Error()
				}
				o.Review = captured
			}
		}
		line, err := json.Marshal(o)
		if err != nil {
			panic(err)
		}
		fmt.Fprintln(out, string(line))
	}
}
