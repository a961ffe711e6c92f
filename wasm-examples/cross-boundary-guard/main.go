//go:build wasip1

// Command cross-boundary-guard is an edge-mcp policy module (ABI 1.1) with
// one SEP-2624 validator, security/cross-boundary-guard: a secret a server
// returned in a session may not be sent to a different server later in
// that session. See README.md.
package main

import (
	"github.com/edge-mcp/edge-mcp/guest"
	"github.com/edge-mcp/edge-mcp/wasm-examples/internal/secretflow"
)

var guard = secretflow.NewGuard()

func init() {
	guest.Validator(guest.InterceptorInfo{
		Name:        "security/cross-boundary-guard",
		Description: "Refuses a request that carries a secret read from another server in the same session",
		Events:      []string{"tools/call", "resources/read", "prompts/get", "sampling/createMessage", "elicitation/create"},
		Phase:       "both",
	}, validate)
}

func main() {}

func validate(inv *guest.Invocation) guest.Validation {
	hits, err := secretflow.FindJSON(inv.Payload)
	if err != nil {
		return guest.Refuse("cross-boundary-guard: payload is not valid JSON: " + err.Error())
	}
	server := inv.Server
	if inv.Phase == "response" {
		guard.Ingest(inv.SessionID, server, hits)
		return guest.Pass()
	}
	if server == "" {
		server = secretflow.ServerOf(inv.Event, inv.Payload)
	}
	if why := guard.Check(inv.SessionID, server, hits); why != "" {
		return guest.Refuse(why)
	}
	return guest.Pass()
}
