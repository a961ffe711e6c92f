// Package whynot words the answer to a tools/call or prompts/get whose
// name a session's view does not hold, with what the caller may know of
// why:
//
//   - the tool's server is down (it offered the name before it went):
//     Code with data {"reason": "server_unavailable", "server", "state",
//     "retry_at"} — the server's name and when it is retried next;
//   - the tool's server needs an operator to authorize the gateway (OAuth):
//     Code with data {"reason": "needs_authorization", "server", "state",
//     "login_command"};
//   - the tool changed its definition since it was pinned and is withheld
//     until an operator approves it: Code with data {"reason":
//     "pending_approval", "server", "tool", "approve_command",
//     "approve_endpoint"};
//   - the name is hidden from this caller (an access list or a tools_list
//     policy): "unknown tool", -32602, as for a name nobody offers — the
//     caller may not learn that it exists.
//
// The gateway decides which applies (runtime/gateway's notfound.go) and
// sends the answer; everything here is a pure function of its arguments,
// safe for concurrent use.
package whynot

import (
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Reasons in the data of the errors above.
const (
	ReasonServerUnavailable = "server_unavailable"
	ReasonPendingApproval   = "pending_approval"
	// ReasonNeedsAuthorization: the tool's server wants an OAuth token
	// that an operator must obtain (edge-mcp auth login SERVER).
	ReasonNeedsAuthorization = "needs_authorization"
)

// Code is the JSON-RPC code of a call whose tool or prompt exists but
// cannot be served now (server down, pending approval); data says which
// and why.
const Code = jsonrpc.CodeInternalError

// Unknown is the message of a call of a name nobody offers, or hidden
// from the caller (code jsonrpc.CodeInvalidParams); what is "tool" or
// "prompt".
func Unknown(what, name string) string { return fmt.Sprintf("unknown %s %q", what, name) }

// PendingApproval is the message and data of a call of tool exposed (tool
// of server) withheld by tool pinning.
func PendingApproval(exposed, server, tool string) (string, map[string]any) {
	msg := fmt.Sprintf("edge-mcp: tool %q of server %q changed its definition since it was pinned and is withheld "+
		"until an operator approves the change (edge-mcp pins approve %s %s, or POST /admin/tools/%s/%s/approve)",
		exposed, server, server, tool, server, tool)
	data := map[string]any{"reason": ReasonPendingApproval, "server": server, "tool": tool,
		"approve_command":  "edge-mcp pins approve " + server + " " + tool,
		"approve_endpoint": "POST /admin/tools/" + server + "/" + tool + "/approve"}
	return msg, data
}

// Down is a server that cannot serve a call now.
type Down struct {
	Server string
	// State is its connection state; NeedsAuthorization says it is the
	// one where an operator must authorize the gateway.
	State              string
	NeedsAuthorization bool
	// Next is its next reconnection attempt (zero: none scheduled),
	// LastErr why its last one failed ("": unknown).
	Next    time.Time
	LastErr string
}

// Unavailable is the message and data of a call of the tool or prompt
// (what) exposed whose server d is down; waited, when not nil, is why
// the call waiting for it gave up.
func (d Down) Unavailable(what, exposed string, waited error) (string, map[string]any) {
	when := "it is reconnecting now"
	data := map[string]any{"reason": ReasonServerUnavailable, "server": d.Server, "state": d.State}
	if wait := time.Until(d.Next); wait > 0 {
		when = fmt.Sprintf("the next reconnection attempt is at %s (in %s)",
			d.Next.UTC().Format(time.RFC3339), wait.Round(time.Second))
		data["retry_at"] = d.Next.UTC().Format(time.RFC3339Nano)
	}
	if waited != nil {
		when = waited.Error() + "; " + when
	}
	if d.LastErr != "" {
		when += "; last error: " + d.LastErr
		data["last_error"] = d.LastErr
	}
	msg := fmt.Sprintf("edge-mcp: server %q is disconnected (%s); %s %q is unavailable until it is back", d.Server, when, what, exposed)
	if d.NeedsAuthorization {
		// Not a reconnection matter: a person must authorize the gateway.
		msg = fmt.Sprintf("edge-mcp: server %q needs authorization: an operator must run `edge-mcp auth login %s` (or POST /admin/oauth/%s/login); %s %q is unavailable until then",
			d.Server, d.Server, d.Server, what, exposed)
		data["reason"], data["login_command"] = ReasonNeedsAuthorization, "edge-mcp auth login "+d.Server
		delete(data, "retry_at")
	}
	return msg, data
}
