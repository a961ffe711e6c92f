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
		// The host keeps the guard's memory of a session when it can, so
		// that it survives instance recycling and follows the session
		// across a fleet's replicas; without it, the module's memory.
		SessionState: true,
	}, validate)
}

func main() {}

func validate(inv *guest.Invocation) guest.Validation {
	if inv.State == nil {
		return check(guard, inv)
	}
	g := secretflow.NewGuard() // this session's memory, from the host
	if err := g.Restore(inv.SessionID, inv.State); err != nil {
		return guest.Refuse("cross-boundary-guard: session state: " + err.Error())
	}
	v := check(g, inv)
	if st := g.Export(inv.SessionID); string(st) != string(inv.State) {
		v.State = st
	}
	return v
}

// check runs the guard on one invocation with the memory in guard.
func check(guard *secretflow.Guard, inv *guest.Invocation) guest.Validation {
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
