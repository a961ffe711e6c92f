package policy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

const abi11 = 1<<16 | 1

func interceptorsOf(t testing.TB, m *Module) []intercept.Interceptor {
	t.Helper()
	ics, err := m.Interceptors(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ics
}

// TestModuleInterceptors runs the shipped security modules as interceptors
// of one chain: a secret read from one server is refused on its way to
// another; the redactor strips it first when both run.
func TestModuleInterceptors(t *testing.T) {
	opts := ModuleOptions{PoolSize: 1, RecycleAfterCalls: -1}
	guard := interceptorsOf(t, loadBytes(t, "guard", w.Example(t, "cross-boundary-guard"), opts))
	redactor := interceptorsOf(t, loadBytes(t, "redactor", w.Example(t, "secretless-redactor"), opts))
	if len(guard) != 1 || len(redactor) != 1 {
		t.Fatalf("interceptors: guard %d, redactor %d", len(guard), len(redactor))
	}
	if d := guard[0].Describe(); d.Name != "security/cross-boundary-guard" || d.Type != intercept.Validation || len(d.Hooks) != 2 {
		t.Fatalf("guard descriptor %+v", d)
	}
	if d := redactor[0].Describe(); d.Name != "security/secretless-redactor" || d.Type != intercept.Mutation || d.PriorityHint.Request != -50000 {
		t.Fatalf("redactor descriptor %+v", d)
	}
	const secret = "AKIA5MZXN8QRF3WBY6OE"
	run := func(c *intercept.Chain, phase intercept.Phase, server, payload string) (*intercept.Outcome, error) {
		return c.Run(context.Background(), intercept.Event{Event: "tools/call", Phase: phase, Payload: json.RawMessage(payload),
			Context: &intercept.Context{SessionID: "s1", Server: server}})
	}
	guardOnly, err := intercept.NewChain(intercept.Options{}, intercept.Member{Interceptor: guard[0]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run(guardOnly, intercept.Request, "files", `{"name":"read","arguments":{}}`); err != nil {
		t.Fatal(err)
	}
	if _, err := run(guardOnly, intercept.Response, "files", `{"content":[{"type":"text","text":"key `+secret+`"}]}`); err != nil {
		t.Fatal(err)
	}
	if _, err := run(guardOnly, intercept.Request, "files", `{"name":"write","arguments":{"x":"`+secret+`"}}`); err != nil {
		t.Fatalf("writing back to the same server: %v", err)
	}
	_, err = run(guardOnly, intercept.Request, "db", `{"name":"query","arguments":{"x":"`+secret+`"}}`)
	var r *intercept.Refusal
	if !errors.As(err, &r) || r.Interceptor != "security/cross-boundary-guard" || !strings.Contains(err.Error(), "read from server 'files' may not be sent to server 'db'") {
		t.Fatalf("err = %v, want the guard's refusal", err)
	}
	both, err := intercept.NewChain(intercept.Options{}, intercept.Member{Interceptor: guard[0]}, intercept.Member{Interceptor: redactor[0]})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(both, intercept.Request, "db", `{"name":"query","arguments":{"x":"`+secret+`"}}`)
	if err != nil || strings.Contains(string(out.Payload), secret) || !strings.Contains(string(out.Payload), "[REDACTED:aws_access_key]") {
		t.Fatalf("err = %v, payload %s", err, out.Payload)
	}
}

// TestABI10ModuleDeclaresNoInterceptors: ABI 1.0 modules keep loading and
// simply have no interceptors.
func TestABI10ModuleDeclaresNoInterceptors(t *testing.T) {
	if ics := interceptorsOf(t, load(t, "redact", ModuleOptions{})); len(ics) != 0 {
		t.Fatalf("%d interceptors", len(ics))
	}
}

// interceptorModule assembles an ABI 1.1 module whose interceptors hook
// answers list and whose intercept hook answers answer (nothing when "").
func interceptorModule(list, answer string) []byte {
	hooks := map[string][]byte{"edge_hook_interceptors": w.Packed(8192, uint32(len(list)))}
	a := w.PolicyModule(abi11, hooks)
	a.Data = append(a.Data, w.Data{Offset: 8192, Bytes: []byte(list)})
	intercept := w.Packed(0, 0)
	if answer != "" {
		intercept = w.Packed(16384, uint32(len(answer)))
		a.Data = append(a.Data, w.Data{Offset: 16384, Bytes: []byte(answer)})
	}
	a.Funcs = append(a.Funcs, w.Func{Params: w.SigI32I32, Results: w.SigI64, Body: intercept, Export: "edge_hook_intercept"})
	return a.Bytes()
}

func TestHostileInterceptorModule(t *testing.T) {
	const one = `{"interceptors":[{"name":"v","type":"validation","hooks":[{"events":["tools/call"],"phase":"request"}]}]}`
	tests := []struct {
		name, list, answer string
		listErr            string
		kind               error
		reason             string
	}{
		{name: "no output is a pass", list: one},
		{name: "garbage", list: one, answer: "[1,2]", kind: intercept.ErrBadResult, reason: "not a JSON object"},
		{name: "wrong type", list: one, answer: `{"type":"mutation","modified":false}`, kind: intercept.ErrBadResult, reason: `result has type "mutation"`},
		{name: "guest error", list: one, answer: `{"error":"config missing"}`, kind: intercept.ErrFailed, reason: "config missing"},
		{name: "refusal", list: one, answer: `{"valid":false,"severity":"error","messages":[{"message":"no","severity":"error"}]}`, reason: ": no"},
		{name: "list garbage", list: `{"interceptors":7}`, listErr: "interceptors"},
		{name: "invalid descriptor", list: `{"interceptors":[{"name":"v","type":"validator","hooks":[]}]}`, listErr: "want validation or mutation"},
		{name: "declared twice", list: `{"interceptors":[{"name":"v","type":"validation","hook":{"events":["*"],"phase":"both"}},{"name":"v","type":"validation","hook":{"events":["*"],"phase":"both"}}]}`, listErr: "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := loadBytes(t, "hostile-ic", interceptorModule(tt.list, tt.answer), ModuleOptions{MemoryMB: 4})
			ics, err := m.Interceptors(context.Background())
			if tt.listErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.listErr) || !strings.Contains(err.Error(), `"hostile-ic"`) {
					t.Fatalf("err = %v, want %q naming the module", err, tt.listErr)
				}
				return
			}
			if err != nil || len(ics) != 1 {
				t.Fatalf("%d interceptors, err %v", len(ics), err)
			}
			c, err := intercept.NewChain(intercept.Options{}, intercept.Member{Interceptor: ics[0]})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Run(context.Background(), intercept.Event{Event: "tools/call", Phase: intercept.Request, Payload: json.RawMessage(`{}`)})
			if tt.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var r *intercept.Refusal
			if !errors.As(err, &r) || r.Interceptor != "v" || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("err = %v, want a refusal by v saying %q", err, tt.reason)
			}
			if tt.kind != nil && (r.Failure == nil || !errors.Is(r.Failure, tt.kind)) {
				t.Fatalf("failure %v, want %v", r.Failure, tt.kind)
			}
		})
	}
}

// TestNewerMinorRefused: a module speaking ABI 1.2 is refused by this 1.1
// host, naming both versions.
func TestNewerMinorRefused(t *testing.T) {
	_, err := testEngine.Load(context.Background(), "future", w.PolicyModule(1<<16|2, map[string][]byte{"edge_hook_tool_call": w.Packed(0, 0)}).Bytes(), ModuleOptions{MemoryMB: 4})
	if !errors.Is(err, ErrABIVersion) || !strings.Contains(err.Error(), "1.2") || !strings.Contains(err.Error(), "1.1") {
		t.Fatalf("err = %v", err)
	}
}

func TestAppendInvocation(t *testing.T) {
	got, err := appendInvocation(nil, "own", &intercept.Invocation{Name: "bound", Event: "tools/call", Phase: intercept.Request,
		Payload: json.RawMessage(`{"a":1}`), Config: json.RawMessage(`{"k":true}`), Context: &intercept.Context{SessionID: "s", Server: "db"}})
	want := `{"name":"own","event":"tools/call","phase":"request","context":{"sessionId":"s","server":"db"},"config":{"k":true},"payload":{"a":1}}`
	if err != nil || string(got) != want {
		t.Fatalf("got %s, %v\nwant %s", got, err, want)
	}
}

// TestLegacyInterceptors: ABI 1.0 hooks as interceptors of one chain.
func TestLegacyInterceptors(t *testing.T) {
	const secret = "ghp_Xa2bC3dEf4gH5iJk6Lm7nN8oPqRsTuVw"
	redact := load(t, "redact", ModuleOptions{})
	deny := loadBytes(t, "no-delete", denyModule(`{"action":"deny","reason":"no deletes!"}`), ModuleOptions{MemoryMB: 4})
	var names []string
	var members []intercept.Member
	for _, m := range []*Module{redact, deny} {
		for _, ic := range m.LegacyInterceptors() {
			names = append(names, ic.Describe().Name)
			members = append(members, intercept.Member{Interceptor: ic})
		}
	}
	want := "redact/tool_call redact/tool_call/rewrite redact/tool_result redact/resource_result redact/prompt_result no-delete/tool_call no-delete/tool_call/rewrite"
	if strings.Join(names, " ") != want {
		t.Fatalf("interceptors %v\nwant %s", names, want)
	}
	redactOnly, err := intercept.NewChain(intercept.Options{}, members[:5]...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out, err := redactOnly.Run(ctx, intercept.Event{Event: "tools/call", Phase: intercept.Request, Payload: json.RawMessage(`{"name":"search","arguments":{"q":"` + secret + `"}}`), Context: &intercept.Context{Server: "gh"}})
	if err != nil || strings.Contains(string(out.Payload), secret) || !strings.Contains(string(out.Payload), `"name":"search"`) {
		t.Fatalf("request: err %v, payload %s", err, out.Payload)
	}
	out, err = redactOnly.Run(ctx, intercept.Event{Event: "tools/call", Phase: intercept.Response, Payload: json.RawMessage(`{"content":[{"type":"text","text":"token ` + secret + `"}]}`), Context: &intercept.Context{Server: "gh", Subject: "search"}})
	if err != nil || strings.Contains(string(out.Payload), secret) {
		t.Fatalf("response: err %v, payload %s", err, out.Payload)
	}
	all, err := intercept.NewChain(intercept.Options{}, members...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = all.Run(ctx, intercept.Event{Event: "tools/call", Phase: intercept.Request, Payload: json.RawMessage(`{"name":"delete","arguments":{}}`)})
	var r *intercept.Refusal
	if !errors.As(err, &r) || r.Interceptor != "no-delete/tool_call" || !strings.Contains(err.Error(), "no deletes!") {
		t.Fatalf("err = %v, want no-delete's refusal", err)
	}
}

func denyModule(out string) []byte {
	a := w.PolicyModule(abi10, map[string][]byte{"edge_hook_tool_call": w.Packed(8192, uint32(len(out)))})
	a.Data = append(a.Data, w.Data{Offset: 8192, Bytes: []byte(out)})
	return a.Bytes()
}

// TestLoopingInterceptorTimesOut: a guest interceptor that never returns
// is stopped at the module's deadline; the chain sees a timeout, and the
// failOpen of the member decides.
func TestLoopingInterceptorTimesOut(t *testing.T) {
	const one = `{"interceptors":[{"name":"spin","type":"mutation","hooks":[{"events":["*"],"phase":"request"}]}]}`
	a := w.PolicyModule(abi11, map[string][]byte{"edge_hook_interceptors": w.Packed(8192, uint32(len(one)))})
	a.Data = append(a.Data, w.Data{Offset: 8192, Bytes: []byte(one)})
	a.Funcs = append(a.Funcs, w.Func{Params: w.SigI32I32, Results: w.SigI64, Body: loopBody, Export: "edge_hook_intercept"})
	m := loadBytes(t, "spinner", a.Bytes(), ModuleOptions{MemoryMB: 4, Timeout: 30 * time.Millisecond})
	ics := interceptorsOf(t, m)
	for _, open := range []bool{false, true} {
		c, err := intercept.NewChain(intercept.Options{}, intercept.Member{Interceptor: ics[0], FailOpen: &open})
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Run(context.Background(), intercept.Event{Event: "tools/call", Phase: intercept.Request, Payload: json.RawMessage(`{"a":1}`)})
		if open {
			if err != nil || len(out.Failures) != 1 || !errors.Is(out.Failures[0], intercept.ErrTimeout) || string(out.Payload) != `{"a":1}` {
				t.Fatalf("fail-open: err %v, failures %v, payload %s", err, out.Failures, out.Payload)
			}
			continue
		}
		var r *intercept.Refusal
		if !errors.As(err, &r) || r.Failure == nil || !errors.Is(r.Failure, intercept.ErrTimeout) || !strings.Contains(err.Error(), `"spin"`) {
			t.Fatalf("fail-closed: err %v", err)
		}
	}
}

// TestModuleSessionState: a Go-guest module whose validator keeps its
// count of a session's calls in the host's session state (SessionState,
// policy/testdata/sessioncounter) counts right though every call runs on
// a fresh instance (recycled after each call, two in the pool): the third
// call of a session is refused, another session starts over, and without
// a store the module is told it has none.
func TestModuleSessionState(t *testing.T) {
	opts := ModuleOptions{PoolSize: 2, RecycleAfterCalls: 1}
	ics := interceptorsOf(t, loadBytes(t, "counter", w.Build(t, "policy/testdata/sessioncounter"), opts))
	if len(ics) != 1 || !ics[0].Describe().SessionState {
		t.Fatalf("interceptors %+v, want one with sessionState", ics)
	}
	withStore, err := intercept.NewChain(intercept.Options{State: &intercept.MemoryStore{}}, intercept.Member{Interceptor: ics[0]})
	if err != nil {
		t.Fatal(err)
	}
	without, err := intercept.NewChain(intercept.Options{}, intercept.Member{Interceptor: ics[0]})
	if err != nil {
		t.Fatal(err)
	}
	run := func(c *intercept.Chain, session string) error {
		_, err := c.Run(context.Background(), intercept.Event{Event: "tools/call", Phase: intercept.Request, Payload: json.RawMessage(`{"name":"t"}`),
			Context: &intercept.Context{SessionID: session}})
		return err
	}
	for i, c := range []struct {
		session string
		refused string
	}{{"s1", ""}, {"s1", ""}, {"s2", ""}, {"s1", "request 3 of session s1: at most 2"}, {"s2", ""}, {"s2", "request 3 of session s2"}} {
		err := run(withStore, c.session)
		if c.refused == "" && err != nil || c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)) {
			t.Fatalf("call %d (%s): %v, want refused %q", i, c.session, err, c.refused)
		}
	}
	if err := run(without, "s1"); err == nil || !strings.Contains(err.Error(), "no session state from the host") {
		t.Fatalf("without a store: %v", err)
	}
}
