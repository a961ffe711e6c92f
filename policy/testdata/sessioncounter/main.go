//go:build wasip1

// Command sessioncounter is a test fixture: an ABI 1.1 module with one
// validator, test/session-counter, that keeps its count of a session's
// tools/call requests in the host's session state (SessionState), not in
// its memory, and refuses a session's third request.
package main

import (
	"strconv"

	"github.com/edge-mcp/edge-mcp/guest"
	"github.com/edge-mcp/edge-mcp/guest/jsonlite"
)

func init() {
	guest.Validator(guest.InterceptorInfo{
		Name:         "test/session-counter",
		Events:       []string{"tools/call"},
		Phase:        "request",
		SessionState: true,
	}, count)
}

func main() {}

func count(inv *guest.Invocation) guest.Validation {
	if inv.State == nil {
		return guest.Refuse("no session state from the host")
	}
	n := 0
	if v, ok := jsonlite.Lookup(inv.State, "n"); ok {
		n, _ = strconv.Atoi(string(v))
	}
	n++
	v := guest.Pass()
	if n > 2 {
		v = guest.Refuse("request " + strconv.Itoa(n) + " of session " + inv.SessionID + ": at most 2")
	}
	v.State = []byte(`{"n":` + strconv.Itoa(n) + `}`)
	return v
}
