// Command oracle-quantity is the reference oracle for shared/k8s/quantity.ts.
//
// Protocol: one JSON object per stdin line, {"input":"<quantity text>"}; one
// JSON object per stdout line, in the same order:
//
//	{"ok":true,"string":"<canonical String()>","milli":"<MilliValue()>","dec":"<exact value>"}
//	{"ok":false,"error":"<ParseQuantity error>"}
//
// Every answer comes from k8s.io/apimachinery/pkg/api/resource:
//
//   - q := resource.ParseQuantity(input) — the same call Quantity.UnmarshalJSON
//     makes, i.e. what the HPA's client does with a value it receives.
//   - "milli" is q.MilliValue() (int64, printed in decimal).
//   - "string" is q.String() after clearing the string ParseQuantity caches:
//     ParseQuantity keeps the input text verbatim when it merely *looks*
//     canonical (so ParseQuantity("12.345").String() == "12.345"), and
//     q.Neg() twice drops that cache without changing the amount, so String()
//     recomputes the canonical form through CanonicalizeBytes.
//   - "raw" is q.String() with the cache left alone (for information).
//   - "dec" is the exact parsed amount as plain decimal text
//     (inf.Dec.String() of a copy; AsDec mutates its receiver).
package main

import (
	"bufio"
	"encoding/json"
	"os"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

type request struct {
	Input string `json:"input"`
}

type response struct {
	OK     bool   `json:"ok"`
	String string `json:"string,omitempty"`
	Raw    string `json:"raw,omitempty"`
	Milli  string `json:"milli,omitempty"`
	Dec    string `json:"dec,omitempty"`
	Error  string `json:"error,omitempty"`
}

func answer(input string) response {
	q, err := resource.ParseQuantity(input)
	if err != nil {
		return response{Error: err.Error()}
	}
	raw := q.DeepCopy()
	milli := q.MilliValue()
	exact := q.DeepCopy()
	dec := exact.AsDec().String()
	q.Neg()
	q.Neg()
	return response{
		OK:     true,
		String: q.String(),
		Raw:    raw.String(),
		Milli:  strconv.FormatInt(milli, 10),
		Dec:    dec,
	}
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		var req request
		resp := response{}
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			resp.Error = "oracle: bad request line: " + err.Error()
		} else {
			resp = answer(req.Input)
		}
		if err := enc.Encode(resp); err != nil {
			os.Stderr.WriteString("oracle: " + err.Error() + "\n")
			os.Exit(1)
		}
	}
	if err := out.Flush(); err != nil {
		os.Stderr.WriteString("oracle: " + err.Error() + "\n")
		os.Exit(1)
	}
	if err := in.Err(); err != nil {
		os.Stderr.WriteString("oracle: " + err.Error() + "\n")
		os.Exit(1)
	}
}
