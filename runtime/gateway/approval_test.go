package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// approvalUpstream serves danger_delete (approval by tool rule), guarded
// (approval by a policy module) and safe; reached counts the calls each
// received.
func approvalUpstream(t *testing.T, reached *sync.Map) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "appr", Version: "1"}, nil)
	for _, name := range []string{"danger_delete", "guarded", "safe"} {
		s.AddTool(&mcp.Tool{Name: name, Description: name, InputSchema: json.RawMessage(`{"type":"object","properties":{"target":{"type":"string"},"api_key":{"type":"string"}}}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				v, _ := reached.LoadOrStore(name, new(atomic.Int32))
				v.(*atomic.Int32).Add(1)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " done"}}}, nil
			})
	}
	return serveMCP(t, s)
}

func reachedCount(reached *sync.Map, name string) int {
	if v, ok := reached.Load(name); ok {
		return int(v.(*atomic.Int32).Load())
	}
	return 0
}

// approvalModule is a hand-assembled policy module whose tool_call hook
// allows every call but asks for a person's approval.
func approvalModule() []byte {
	out := `{"action":"allow","require_approval":true}`
	a := w.PolicyModule(1<<16, nil)
	a.Funcs = append(a.Funcs, w.Func{Params: w.SigI32I32, Results: w.SigI64, Body: w.Packed(2048, uint32(len(out))), Export: "edge_hook_tool_call"})
	a.Data = append(a.Data, w.Data{Offset: 2048, Bytes: []byte(out)})
	return a.Bytes()
}

// auditRecord is the part of an audit line the tests read.
type auditRecord struct {
	Type, Identity, Server, Tool, Decision, Outcome string
	Arguments                                       json.RawMessage
}

func readAudit(t *testing.T, path string) []auditRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r auditRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func TestApprovalFlow(t *testing.T) {
	t.Parallel()
	var reached sync.Map
	up := approvalUpstream(t, &reached)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	mod := writeModule(t, approvalModule())
	url, g := startGateway(t, fmt.Sprintf(`{"mcpServers": {"appr": {"url": %q}},
		"tool_rules": [{"tools": ["danger*"], "require_approval": true}],
		"policies": [{"name": "approver", "module": %q, "tools": ["guarded"]}],
		"audit": {"path": %q}}`, up, mod, auditPath), policyOptions(t))

	type answer struct {
		action  string
		approve bool
	}
	const secret = "sk-proj-AbCdEf0123456789AbCdEf0123456789xyz"
	var wantDecisions []string
	for _, c := range []struct {
		name    string
		answer  *answer // nil: the client cannot elicit
		allowed bool
		errText string
		audit   string
	}{
		{"accept", &answer{"accept", true}, true, "", "approved"},
		{"accept without approve", &answer{"accept", false}, false, "did not approve", "declined"},
		{"decline", &answer{"decline", false}, false, "declined", "declined"},
		{"cancel", &answer{"cancel", false}, false, "cancelled", "cancelled"},
		{"no elicitation", nil, false, "cannot ask", "unavailable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var asked []string
			var mu sync.Mutex
			opts := &mcp.ClientOptions{}
			if c.answer != nil {
				opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					asked = append(asked, req.Params.Message)
					mu.Unlock()
					return &mcp.ElicitResult{Action: c.answer.action, Content: map[string]any{"approve": c.answer.approve}}, nil
				}
			}
			cs := connect(t, url, opts)
			for _, tool := range []string{"danger_delete", "guarded"} {
				before := reachedCount(&reached, tool)
				txt, isErr := callText(t, cs, tool, map[string]any{"target": "prod", "api_key": secret})
				if got := reachedCount(&reached, tool) > before; got != c.allowed {
					t.Errorf("%s: upstream reached %v, want %v (result %q)", tool, got, c.allowed, txt)
				}
				if c.allowed && (isErr || txt != tool+" done") {
					t.Errorf("%s: %q (isError %v), want the upstream's answer", tool, txt, isErr)
				}
				if !c.allowed && (!isErr || !strings.Contains(txt, c.errText) || !strings.Contains(txt, tool)) {
					t.Errorf("%s: %q (isError %v), want a tool error naming the tool and saying %q", tool, txt, isErr, c.errText)
				}
				wantDecisions = append(wantDecisions, tool+":"+c.audit)
			}
			// A tool no rule or module flags is never held.
			if txt, isErr := callText(t, cs, "safe", nil); isErr || txt != "safe done" {
				t.Errorf("safe: %q (isError %v)", txt, isErr)
			}
			mu.Lock()
			defer mu.Unlock()
			if c.answer != nil {
				if len(asked) != 2 {
					t.Fatalf("the person was asked %d times, want 2 (danger_delete, guarded)", len(asked))
				}
				for i, tool := range []string{"danger_delete", "guarded"} {
					if !strings.Contains(asked[i], fmt.Sprintf("%q", tool)) || !strings.Contains(asked[i], `"appr"`) || !strings.Contains(asked[i], "prod") {
						t.Errorf("asked %q: want the tool, server and arguments", asked[i])
					}
					if strings.Contains(asked[i], secret) {
						t.Errorf("the approval request shows the secret: %q", asked[i])
					}
				}
			}
		})
	}

	// The OpenAI-style API cannot ask a person: a clear tool error.
	base := strings.TrimSuffix(url, "/mcp")
	before := reachedCount(&reached, "danger_delete")
	resp, err := httpPostJSON(base+"/v1/tools/call", `{"name":"danger_delete","arguments":{"target":"prod"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp["isError"] != true || !strings.Contains(fmt.Sprint(resp["text"]), "cannot ask") || reachedCount(&reached, "danger_delete") != before {
		t.Errorf("approval through the API: %v", resp)
	}
	wantDecisions = append(wantDecisions, "danger_delete:unavailable")

	g.Close() // flushes the audit log
	var decisions []string
	denied := 0
	for _, r := range readAudit(t, auditPath) {
		switch r.Type {
		case "approval":
			if r.Identity != "anonymous" || r.Server != "appr" {
				t.Errorf("approval record %+v: want identity anonymous, server appr", r)
			}
			if strings.Contains(string(r.Arguments), secret) {
				t.Errorf("the audit log holds the secret: %s", r.Arguments)
			}
			decisions = append(decisions, r.Tool+":"+r.Decision)
		case "tool_call":
			if r.Outcome == "denied" && (r.Tool == "danger_delete" || r.Tool == "guarded") {
				denied++
			}
		}
	}
	slices.Sort(decisions)
	slices.Sort(wantDecisions)
	if !slices.Equal(decisions, wantDecisions) {
		t.Errorf("audited decisions\n %q\nwant\n %q", decisions, wantDecisions)
	}
	if want := len(wantDecisions) - 2; denied != want {
		t.Errorf("%d denied tool calls audited, want %d", denied, want)
	}
}

// httpPostJSON posts body and decodes the JSON answer.
func httpPostJSON(url, body string) (map[string]any, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("%s: %d: %v", url, resp.StatusCode, err)
	}
	return out, nil
}
