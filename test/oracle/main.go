// Command emb-oracle answers questions about Kubernetes semantics using the
// real k8s.io/apimachinery code, so that the TypeScript re-implementations in
// shared/k8s can be tested against it.
//
// Protocol: one JSON object per line on stdin, one JSON object per line on
// stdout, in the same order. Every request has an "op" naming the question;
// an optional "id" (any JSON value) is echoed back unchanged.
//
//	{"op":"selector","input":"a in (x,y),!b"}
//	  -> {"ok":true,"string":"a in (x,y),!b"}           labels.Parse(input).String()
//	  -> {"ok":false,"error":"unable to parse requirement: ..."}
//	{"op":"selector","input":"a=x","labels":{"a":"x"}}
//	  -> {"ok":true,"string":"a=x","matches":true}      plus Selector.Matches(labels)
//	{"op":"labelSelector","labelSelector":{"matchLabels":{"a":"x"}}}
//	  -> {"ok":true,"string":"a=x"}                     metav1.LabelSelectorAsSelector
//	     ("labelSelector":null gives {"ok":true,"string":"","nothing":true});
//	     "labels" works here too.
//	{"op":"guessResource","input":"networking.k8s.io/v1","kind":"Ingress"}
//	  -> {"ok":true,"string":"ingresses.networking.k8s.io"}
//	     meta.UnsafeGuessKindToResource(schema.FromAPIVersionAndKind(input, kind)),
//	     the plural's GroupResource().String()
//
// A request the oracle cannot answer (malformed JSON, unknown op) gets
// {"ok":false,"protocolError":"..."} so callers can tell it apart from a
// rejected input. To add an op (e.g. "quantity"), add a case to answer().
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

type request struct {
	ID     json.RawMessage   `json:"id,omitempty"`
	Op     string            `json:"op"`
	Input  string            `json:"input"`
	Labels map[string]string `json:"labels,omitempty"`
	// Kind is the kind of a guessResource request (its apiVersion is Input).
	Kind string `json:"kind,omitempty"`
	// LabelSelector is a metav1.LabelSelector; JSON null (or absent) is a nil one.
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

type response struct {
	ID            json.RawMessage `json:"id,omitempty"`
	OK            bool            `json:"ok"`
	String        *string         `json:"string,omitempty"`
	Matches       *bool           `json:"matches,omitempty"`
	Nothing       bool            `json:"nothing,omitempty"`
	Error         string          `json:"error,omitempty"`
	ProtocolError string          `json:"protocolError,omitempty"`
}

func answer(req request) response {
	switch req.Op {
	case "selector":
		return selector(req)
	case "labelSelector":
		return labelSelector(req)
	case "guessResource":
		plural, _ := meta.UnsafeGuessKindToResource(schema.FromAPIVersionAndKind(req.Input, req.Kind))
		s := plural.GroupResource().String()
		return response{OK: true, String: &s}
	default:
		return response{ProtocolError: fmt.Sprintf("unknown op %q", req.Op)}
	}
}

// selector: labels.Parse(input); on success the canonical String() and, when
// "labels" is given, Matches(labels).
func selector(req request) response {
	sel, err := labels.Parse(req.Input)
	return describe(sel, err, req.Labels)
}

// labelSelector: metav1.LabelSelectorAsSelector(labelSelector), described
// like selector; "nothing" reports labels.Nothing().
func labelSelector(req request) response {
	sel, err := metav1.LabelSelectorAsSelector(req.LabelSelector)
	return describe(sel, err, req.Labels)
}

func describe(sel labels.Selector, err error, set map[string]string) response {
	if err != nil {
		return response{Error: err.Error()}
	}
	s := sel.String()
	resp := response{OK: true, String: &s, Nothing: labels.MatchesNothing(sel)}
	if set != nil {
		m := sel.Matches(labels.Set(set))
		resp.Matches = &m
	}
	return resp
}

func main() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out) // Encode appends the '\n'
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			var req request
			var resp response
			if jerr := json.Unmarshal(line, &req); jerr != nil {
				resp = response{ProtocolError: "bad request: " + jerr.Error()}
			} else {
				resp = answer(req)
				resp.ID = req.ID
			}
			if werr := enc.Encode(resp); werr != nil {
				fmt.Fprintln(os.Stderr, "write:", werr)
				os.Exit(1)
			}
			// Flush when no more input is buffered, so interactive use works
			// and batch use stays fast.
			if in.Buffered() == 0 {
				if ferr := out.Flush(); ferr != nil {
					fmt.Fprintln(os.Stderr, "write:", ferr)
					os.Exit(1)
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "read:", err)
			os.Exit(1)
		}
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "write:", err)
		os.Exit(1)
	}
}
