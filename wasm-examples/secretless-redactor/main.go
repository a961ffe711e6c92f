//go:build wasip1

// Command secretless-redactor is an edge-mcp policy module (ABI 1.1) with
// one SEP-2624 mutator, security/secretless-redactor: every verbatim
// secret of a known format in an outbound request is replaced by a
// placeholder naming its format. See README.md.
package main

import (
	"strings"

	"github.com/edge-mcp/edge-mcp/guest"
	"github.com/edge-mcp/edge-mcp/guest/jsonlite"
	"github.com/edge-mcp/edge-mcp/wasm-examples/internal/secretflow"
)

var (
	outBuf  []byte // the rewritten payload; reused across calls
	scratch []byte
	hits    []secretflow.Hit
)

func init() {
	guest.Mutator(guest.InterceptorInfo{
		Name:        "security/secretless-redactor",
		Description: "Replaces verbatim secrets in outbound requests with [REDACTED:<format>]",
		Events:      []string{"tools/call", "resources/read", "prompts/get", "sampling/createMessage", "elicitation/create"},
		Phase:       "request",
		Priority:    -50000,
	}, mutate)
}

func main() {}

func mutate(inv *guest.Invocation) guest.Mutation {
	out, changed, err := jsonlite.RewriteStrings(outBuf[:0], inv.Payload, redact)
	if err != nil || !changed {
		return guest.Keep()
	}
	outBuf = out
	return guest.Replace(out)
}

// redact replaces every secret in s.
func redact(_, s []byte) ([]byte, bool) {
	hits = secretflow.Find(s, hits[:0])
	if len(hits) == 0 {
		return nil, false
	}
	scratch = scratch[:0]
	rest := string(s)
	for _, h := range hits {
		i := strings.Index(rest, h.Value)
		scratch = append(scratch, rest[:i]...)
		scratch = append(scratch, "[REDACTED:"+h.Format+"]"...)
		rest = rest[i+len(h.Value):]
	}
	return append(scratch, rest...), true
}
