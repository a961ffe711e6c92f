package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestApprovalModernClient: a 2026-07-28 client that declares elicitation
// is asked for a call's approval through input_required (it was refused:
// "no elicitation support"); its retry with the person's answer goes ahead
// or is refused by that answer, audited either way.
func TestApprovalModernClient(t *testing.T) {
	t.Parallel()
	var reached sync.Map
	up := approvalUpstream(t, &reached)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	mod := writeModule(t, approvalModule())
	url, g := startGateway(t, fmt.Sprintf(`{"mcpServers": {"appr": {"url": %q}},
		"tool_rules": [{"tools": ["danger*"], "require_approval": true}],
		"policies": [{"name": "approver", "module": %q, "tools": ["guarded"]}],
		"audit": {"path": %q}}`, up, mod, auditPath), policyOptions(t))
	const secret = "sk-proj-AbCdEf0123456789AbCdEf0123456789xyz"
	for _, c := range []struct {
		name    string
		action  string
		approve bool
		allowed bool
		errText string
	}{
		{"accept", "accept", true, true, ""},
		{"accept without approve", "accept", false, false, "did not approve"},
		{"decline", "decline", false, false, "declined"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var asked []string
			var mu sync.Mutex
			cl := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					asked = append(asked, req.Params.Message)
					mu.Unlock()
					return &mcp.ElicitResult{Action: c.action, Content: map[string]any{"approve": c.approve}}, nil
				},
			})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			for _, tool := range []string{"danger_delete", "guarded"} {
				before := reachedCount(&reached, tool)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"target": "prod", "api_key": secret}})
				if err != nil {
					t.Fatalf("%s: %v", tool, err)
				}
				txt := textOf(res)
				if got := reachedCount(&reached, tool) > before; got != c.allowed {
					t.Errorf("%s: upstream reached %v, want %v (result %q)", tool, got, c.allowed, txt)
				}
				if c.allowed && (res.IsError || txt != tool+" done") {
					t.Errorf("%s: %q (isError %v), want the upstream's answer", tool, txt, res.IsError)
				}
				if !c.allowed && (!res.IsError || !strings.Contains(txt, c.errText)) {
					t.Errorf("%s: %q (isError %v), want a tool error saying %q", tool, txt, res.IsError, c.errText)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 2 {
				t.Fatalf("the person was asked %d times, want once per call", len(asked))
			}
			for _, m := range asked {
				if strings.Contains(m, secret) || !strings.Contains(m, "prod") {
					t.Errorf("approval request %q: want the arguments shown, secrets masked", m)
				}
			}
		})
	}
	g.Close() // flushes the audit log (its writer is not on the call's path)
	decisions := map[string]int{}
	for _, r := range readAudit(t, auditPath) {
		if r.Type == "approval" {
			decisions[r.Decision]++
		}
	}
	if decisions["approved"] != 2 || decisions["declined"] != 4 {
		t.Errorf("audited decisions %v, want 2 approved and 4 declined", decisions)
	}
}

// TestApprovalModernState: the requestState of an approval binds the
// call: other arguments, another tool or a tampered state are refused,
// and the upstream is never reached by them.
func TestApprovalModernState(t *testing.T) {
	t.Parallel()
	var reached sync.Map
	up := approvalUpstream(t, &reached)
	url, _ := startGateway(t, fmt.Sprintf(`{"mcpServers": {"appr": {"url": %q}},
		"tool_rules": [{"tools": ["danger*", "safe"], "require_approval": true}]}`, up), Options{})
	meta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`
	call := func(tool, args, extra string) (map[string]json.RawMessage, string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + extra + `,"_meta":` + meta + `}}`
		_, got := modernHTTP(t, "POST", url, map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": tool}, body)
		if i := strings.Index(string(got), "data: "); i >= 0 {
			got = []byte(strings.TrimSpace(strings.SplitN(string(got[i+6:]), "\n", 2)[0]))
		}
		var resp struct {
			Result map[string]json.RawMessage `json:"result"`
			Error  *struct{ Message string }  `json:"error"`
		}
		if err := json.Unmarshal(got, &resp); err != nil {
			t.Fatalf("answer %s: %v", got, err)
		}
		if resp.Error != nil {
			return nil, resp.Error.Message
		}
		return resp.Result, ""
	}
	res, msg := call("danger_delete", `{"target":"a","n":1}`, "")
	if msg != "" || string(res["resultType"]) != `"input_required"` || !strings.Contains(string(res["inputRequests"]), "elicitation/create") {
		t.Fatalf("first call: %v %s, want input_required asking for elicitation", res, msg)
	}
	var state string
	json.Unmarshal(res["requestState"], &state)
	answer := `,"inputResponses":{"edge-mcp-approval":{"action":"accept","content":{"approve":true}}},"requestState":"`
	tampered := []byte(state)
	tampered[len(tampered)-3] ^= 1
	for _, tc := range []struct{ name, tool, args, state, want string }{
		{"other arguments", "danger_delete", `{"target":"b","n":1}`, state, "arguments differ"},
		{"another tool", "safe", `{"target":"a","n":1}`, state, "another call"},
		{"tampered", "danger_delete", `{"target":"a","n":1}`, string(tampered), "requestState"},
	} {
		if res, msg := call(tc.tool, tc.args, answer+tc.state+`"`); !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %v %q, want an error saying %q", tc.name, res, msg, tc.want)
		}
	}
	if n := reachedCount(&reached, "danger_delete") + reachedCount(&reached, "safe"); n != 0 {
		t.Fatalf("the upstream was reached %d times by refused retries", n)
	}
	// The same arguments, keys in another order: approved and made once.
	res, msg = call("danger_delete", `{"n":1, "target":"a"}`, answer+state+`"`)
	if msg != "" || !strings.Contains(string(res["content"]), "danger_delete done") {
		t.Fatalf("approved retry: %v %q", res, msg)
	}
	if n := reachedCount(&reached, "danger_delete"); n != 1 {
		t.Errorf("upstream reached %d times, want 1", n)
	}
}

// TestFleetApprovalAcrossReplicas: a 2026-07-28 client's approval round
// through a strict round-robin proxy over two replicas: the retry reaches
// the other replica, which opens the requestState (sealed with the fleet's
// key, not a per-process one) and makes the call.
func TestFleetApprovalAcrossReplicas(t *testing.T) {
	t.Parallel()
	var reached sync.Map
	up := approvalUpstream(t, &reached)
	f := startFleet(t, 2, fmt.Sprintf(`{"mcpServers": {"appr": {"url": %q}}, "tool_rules": [{"tools": ["danger*"], "require_approval": true}]}`, up))
	asked := 0
	cl := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked++
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for i := range 3 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "danger_delete", Arguments: map[string]any{"target": fmt.Sprint(i)}})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if res.IsError || textOf(res) != "danger_delete done" {
			t.Fatalf("call %d: %q", i, textOf(res))
		}
	}
	if n := reachedCount(&reached, "danger_delete"); n != 3 || asked != 3 {
		t.Errorf("upstream reached %d times, person asked %d times; want 3 and 3", n, asked)
	}
}

// TestApprovalModernKeepsUpstreamRounds: a tool needing approval on a
// 2026-07-28 upstream that asks for input itself. Each of the client's
// retries of the upstream's rounds is held for approval again; the
// upstream's requestState and the answers the retry carried are kept in
// the approval's state and given back to the call when it is approved, so
// the upstream sees every round as it asked.
func TestApprovalModernKeepsUpstreamRounds(t *testing.T) {
	t.Parallel()
	seen := &roundAttempts{}
	cfg := fmt.Sprintf(`{"mcpServers": {"up": {"url": %q}}, "tool_rules": [{"tools": ["two"], "require_approval": true}]}`, roundsUpstream(t, seen))
	url, _ := startGateway(t, cfg, Options{})
	var approvals, names int
	cl := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if strings.HasPrefix(req.Params.Message, "edge-mcp: allow") {
				approvals++
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			}
			names++
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "two", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(res); res.IsError || got != "two rounds: Ada" {
		t.Fatalf("result %q (isError %v), want the upstream's after two rounds", got, res.IsError)
	}
	want := []roundAttempt{{"two", []string{}, ""}, {"two", []string{"first_name"}, "round-1"}, {"two", []string{"first_name"}, "round-2"}}
	got := seen.of("two")
	if len(got) != len(want) {
		t.Fatalf("upstream attempts %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].state != want[i].state || strings.Join(got[i].keys, ",") != strings.Join(want[i].keys, ",") {
			t.Errorf("upstream attempt %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if approvals != 3 || names != 2 {
		t.Errorf("asked %d approvals and %d names, want 3 and 2", approvals, names)
	}
}
