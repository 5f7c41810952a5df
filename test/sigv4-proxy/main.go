// Command sigv4-proxy stands in for Amazon Managed Service for Prometheus'
// front door in tests: it listens on 127.0.0.1, verifies each request's AWS
// Signature Version 4 by signing the received request again with the known
// test credentials (aws-sdk-go-v2 aws/signer/v4, service "aps") and comparing
// the Authorization headers, and forwards a verified request to a Prometheus
// (started with --web.route-prefix=/workspaces/<id>).
//
// Refusals are AWS's: 403 with an x-amzn-ErrorType of
// MissingAuthenticationTokenException (no Authorization or X-Amz-Date),
// UnrecognizedClientException (an X-Amz-Security-Token other than the
// test's session token, or none when it has one),
// InvalidSignatureException (the signature, key id, scope or body hash does
// not match) or InvalidSignatureException for an X-Amz-Date more than five
// minutes from now ("Signature expired"), as the AWS SigV4 docs describe.
//
// Usage: sigv4-proxy -listen 127.0.0.1:0 -upstream http://127.0.0.1:9090
//
//	-access-key AKID -secret-key SECRET [-session-token T] -region us-east-1
//
// Prints "listening <addr>" on stdout when ready; logs one line per request
// ("ok", or the refusal's reason) on stderr.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const maxSkew = 5 * time.Minute

func refuse(w http.ResponseWriter, kind, message string) {
	log.Printf("refused %s: %s", kind, message)
	w.Header().Set("x-amzn-ErrorType", kind)
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "{\"message\":%q}", message)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := flag.String("upstream", "", "the Prometheus base URL to forward to")
	accessKey := flag.String("access-key", "", "the test access key id")
	secretKey := flag.String("secret-key", "", "the test secret access key")
	sessionToken := flag.String("session-token", "", "the test session token (optional)")
	region := flag.String("region", "us-east-1", "the signing region")
	flag.Parse()
	target, err := url.Parse(*upstream)
	if err != nil || *accessKey == "" || *secretKey == "" {
		log.Fatalf("need -upstream URL, -access-key and -secret-key")
	}
	creds := aws.Credentials{AccessKeyID: *accessKey, SecretAccessKey: *secretKey, SessionToken: *sessionToken}
	signer := v4.NewSigner()
	proxy := httputil.NewSingleHostReverseProxy(target)

	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		date := r.Header.Get("X-Amz-Date")
		if auth == "" || date == "" {
			refuse(w, "MissingAuthenticationTokenException", "Missing Authentication Token")
			return
		}
		at, err := time.Parse("20060102T150405Z", date)
		if err != nil {
			refuse(w, "IncompleteSignatureException", "X-Amz-Date is not a date: "+date)
			return
		}
		if skew := time.Since(at); skew > maxSkew || skew < -maxSkew {
			refuse(w, "InvalidSignatureException", "Signature expired: "+date+" is now earlier than "+time.Now().UTC().Add(-maxSkew).Format("20060102T150405Z"))
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			refuse(w, "IncompleteSignatureException", "unreadable body")
			return
		}
		sum := sha256.Sum256(body)
		payloadHash := hex.EncodeToString(sum[:])
		if claimed := r.Header.Get("X-Amz-Content-Sha256"); claimed != "" && claimed != payloadHash {
			refuse(w, "InvalidSignatureException", "The provided x-amz-content-sha256 header does not match what was computed.")
			return
		}
		if got := r.Header.Get("X-Amz-Security-Token"); got != *sessionToken {
			refuse(w, "UnrecognizedClientException", "The security token included in the request is invalid.")
			return
		}
		// the signed header names, from the received Authorization
		i := strings.Index(auth, "SignedHeaders=")
		if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") || i < 0 {
			refuse(w, "IncompleteSignatureException", "Authorization header requires AWS4-HMAC-SHA256 with SignedHeaders")
			return
		}
		names := strings.Split(strings.SplitN(auth[i+len("SignedHeaders="):], ",", 2)[0], ";")
		// re-sign a copy holding exactly the signed headers
		check, _ := http.NewRequestWithContext(context.Background(), r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
		check.Host = r.Host
		signsLength := false
		for _, name := range names {
			if name == "content-length" {
				signsLength = true
			}
			if name == "host" || name == "authorization" {
				continue
			}
			for _, v := range r.Header.Values(name) {
				check.Header.Add(name, v)
			}
		}
		if !signsLength {
			check.ContentLength = 0 // the Go signer signs content-length whenever it is positive; AWS signs what the client listed
		}
		if err := signer.SignHTTP(context.Background(), creds, check, payloadHash, "aps", *region, at); err != nil {
			refuse(w, "InternalFailure", err.Error())
			return
		}
		if want := check.Header.Get("Authorization"); want != auth {
			refuse(w, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.")
			log.Printf("expected %s\n     got %s", want, auth)
			return
		}
		log.Printf("ok %s %s", r.Method, r.URL.Path)
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		proxy.ServeHTTP(w, r)
	})

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stdout, "listening %s\n", ln.Addr())
	log.Fatal(http.Serve(ln, handler))
}
