package guest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/guest"
	"github.com/edge-mcp/edge-mcp/guest/guesttest"
)

// The SDK's own tests: handlers registered here run natively through
// guesttest, input bytes to output bytes, as inside a module.
func TestToolCallDecisions(t *testing.T) {
	t.Cleanup(guesttest.Reset)
	guest.OnToolCall(func(c *guest.ToolCall) guest.Decision {
		switch c.Tool {
		case "delete_repo":
			return guest.Deny("no deleting for " + c.Client.ID)
		case "search":
			q, _ := c.StringArgument("q")
			return guest.Rewrite([]byte(`{"q":` + `"` + strings.ToUpper(q) + `"}`))
		case "fetch":
			return guest.Route("fetch-eu").WithTool("fetch_v2")
		}
		return guest.Allow()
	})
	tests := []struct {
		name, input                     string
		action, reason, server, tool, a string
	}{
		{"deny", `{"tool":"delete_repo","server":"gh","client":{"id":"alice"},"arguments":{}}`, "deny", "no deleting for alice", "", "", ""},
		{"rewrite", `{"server":"web","tool":"search","arguments":{"q":"go"}}`, "rewrite", "", "", "", `{"q":"GO"}`},
		{"route", `{"server":"web","tool":"fetch"}`, "route", "", "fetch-eu", "fetch_v2", ""},
		{"allow", `{"server":"web","tool":"other","arguments":{"x":1}}`, "allow", "", "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := guesttest.Call("tool_call", tc.input)
			if err != nil {
				t.Fatal(err)
			}
			if out.Action != tc.action || out.Reason != tc.reason || out.Server != tc.server || out.Tool != tc.tool || string(out.Arguments) != tc.a {
				t.Errorf("got %+v (raw %s)", out, out.Raw)
			}
		})
	}
}

func TestResultHooks(t *testing.T) {
	t.Cleanup(guesttest.Reset)
	guest.OnToolResult(func(r *guest.ToolResult) error {
		if strings.Contains(string(r.Result), "fail") {
			return errors.New("refused")
		}
		if strings.Contains(string(r.Result), "secret") {
			r.Set([]byte(`{"content":[{"type":"text","text":"[hidden]"}]}`))
		}
		return nil
	})
	tests := []struct{ name, result, want, err string }{
		{"replaced", `{"content":[{"type":"text","text":"a secret"}]}`, `{"content":[{"type":"text","text":"[hidden]"}]}`, ""},
		{"unchanged", `{"content":[{"type":"text","text":"fine"}]}`, "", ""},
		{"handler error", `{"content":[{"type":"text","text":"fail"}]}`, "", "refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := guesttest.Call("tool_result", `{"server":"s","tool":"t","result":`+tc.result+`}`)
			if err != nil {
				t.Fatal(err)
			}
			if string(out.Result) != tc.want || out.Error != tc.err {
				t.Errorf("got result %s error %q, want %s %q", out.Result, out.Error, tc.want, tc.err)
			}
		})
	}
	if _, err := guesttest.Call("resource_result", `{"server":"s","uri":"u","result":{"contents":[]}}`); err == nil {
		t.Error("a hook without a handler answered")
	}
}

func TestToolsListEdits(t *testing.T) {
	t.Cleanup(guesttest.Reset)
	guest.OnToolsList(func(l *guest.ToolsList) {
		for i := range l.Tools {
			switch tl := &l.Tools[i]; tl.Name {
			case "drop":
				tl.Hide()
			case "search":
				tl.Rename("find")
			}
		}
	})
	out, err := guesttest.Call("tools_list", `{"tools":[{"server":"a","name":"drop","tool":{"name":"drop"}},{"server":"a","name":"search","tool":{"name":"search"}},{"server":"a","name":"keep","tool":{"name":"keep"}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Tools) != 2 || !out.Tools[0].Hide || out.Tools[1].Rename != "find" {
		t.Fatalf("edits %+v (raw %s)", out.Tools, out.Raw)
	}
}

func TestConfigureAndEvents(t *testing.T) {
	t.Cleanup(guesttest.Reset)
	var seen []string
	guest.OnConfigure(func(cfg []byte) error {
		if strings.Contains(string(cfg), "bad") {
			return errors.New("config: bad")
		}
		return nil
	})
	guest.OnEvent(func(e *guest.Event) { seen = append(seen, e.Kind+" "+e.Server) })
	if err := guesttest.Configure(`{"ok": true}`); err != nil {
		t.Fatal(err)
	}
	if err := guesttest.Configure(`{"bad": true}`); err == nil || err.Error() != "config: bad" {
		t.Fatalf("configure with a bad config: %v", err)
	}
	if _, err := guesttest.Call("event", `{"event":"server_connected","server":"gh","time_ms":1}`); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != "server_connected gh" {
		t.Fatalf("events seen: %q", seen)
	}
}

// Inputs the host would never send are reported, not crashed on.
func TestBadInputs(t *testing.T) {
	t.Cleanup(guesttest.Reset)
	guest.OnToolCall(func(*guest.ToolCall) guest.Decision { return guest.Allow() })
	if _, err := guesttest.Call("tool_call", `{"server":"s","tool":"t","nope":1}`); err == nil {
		t.Error("an unknown member was encoded")
	}
	if _, err := guesttest.Call("no_such_hook", `{}`); err == nil {
		t.Error("an unknown hook ran")
	}
	out, err := guesttest.Call("tool_call", `{"server":5,"tool":"t"}`)
	if err != nil || !strings.Contains(out.Error, "malformed input") {
		t.Errorf("a server that is not a string: %v %+v", err, out)
	}
}
