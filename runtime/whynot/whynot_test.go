package whynot

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestUnavailable: the answer names the server, its state, the next
// attempt, the last error and why a waiting call gave up; a server that
// needs authorization names the login command instead of a retry time.
func TestUnavailable(t *testing.T) {
	next := time.Now().Add(time.Minute)
	for _, tc := range []struct {
		name   string
		d      Down
		waited error
		reason string
		inMsg  []string
		keys   []string
		absent []string
	}{
		{"reconnecting", Down{Server: "a", State: "disconnected"}, nil, ReasonServerUnavailable,
			[]string{`server "a" is disconnected (it is reconnecting now)`, `tool "t"`}, []string{"server", "state"}, []string{"retry_at", "last_error"}},
		{"retry scheduled", Down{Server: "a", State: "disconnected", Next: next, LastErr: "refused"}, errors.New("waited 5s"), ReasonServerUnavailable,
			[]string{"waited 5s; the next reconnection attempt is at", "last error: refused"}, []string{"retry_at", "last_error"}, nil},
		{"needs authorization", Down{Server: "a", State: "needs_authorization", NeedsAuthorization: true, Next: next}, nil, ReasonNeedsAuthorization,
			[]string{"edge-mcp auth login a", "needs authorization"}, []string{"login_command"}, []string{"retry_at"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, data := tc.d.Unavailable("tool", "t", tc.waited)
			if data["reason"] != tc.reason || data["server"] != "a" {
				t.Fatalf("data %v, want reason %s", data, tc.reason)
			}
			for _, s := range tc.inMsg {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q lacks %q", msg, s)
				}
			}
			for _, k := range tc.keys {
				if _, ok := data[k]; !ok {
					t.Errorf("data %v lacks %q", data, k)
				}
			}
			for _, k := range tc.absent {
				if _, ok := data[k]; ok {
					t.Errorf("data %v has %q", data, k)
				}
			}
		})
	}
}

// TestPendingApproval: the answer names the command and the endpoint that
// approve the tool.
func TestPendingApproval(t *testing.T) {
	msg, data := PendingApproval("a_echo", "a", "echo")
	if data["reason"] != ReasonPendingApproval || data["approve_command"] != "edge-mcp pins approve a echo" ||
		data["approve_endpoint"] != "POST /admin/tools/a/echo/approve" || !strings.Contains(msg, `tool "a_echo" of server "a"`) {
		t.Fatalf("PendingApproval = %q, %v", msg, data)
	}
	if got := Unknown("prompt", "p"); got != `unknown prompt "p"` {
		t.Fatalf("Unknown = %q", got)
	}
}
