package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// FuzzSecurityPortsAgree: the C builds of secretless-redactor and
// cross-boundary-guard (wasm-examples/*/c) answer like the Go builds on
// any JSON payload: the same redacted payload (compared as JSON values),
// and the same verdict on a request to server b carrying what server a
// returned; the AssemblyScript build of secretless-redactor (as/) redacts
// like them. Without clang or asc it skips, and fails under CI.
func FuzzSecurityPortsAgree(f *testing.F) {
	for _, s := range []string{
		`{"name":"write_query","arguments":{"query":"VALUES ('AKIA5MZXN8QRF3WBY6OE')"}}`,
		`{"a":["sk_live_4eC7aRm9Kx2bNw5pQj8sYd","ghp_Xa2bC3dEf4gH5iJk6Lm7nN8oP x"],"b":{"c":"xoxb-17345628901-AbCdEfGhIjKlMnOp"}}`,
		`{"q":"\u0041KIA5MZXN8QRF3WBY6OE","r":"tab\there \"AKIA5MZXN8QRF3WBY6OE\" é ☃ 😀"}`,
		`{"AKIA5MZXN8QRF3WBY6OE":1,"n":null,"t":true,"x":[1.5e3,{}]}`,
		`{"uri":"https://example.com/ghp_Xa2bC3dEf4gH5iJk6Lm7nN8oP"}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	ctx := context.Background()
	dir := f.TempDir()
	cGuard, err := w.CExample("cross-boundary-guard", dir)
	w.SkipOrFail(f, err)
	cRedactor, err := w.CExample("secretless-redactor", dir)
	w.SkipOrFail(f, err)
	asRedactorWasm, err := w.ASExample("secretless-redactor", dir)
	w.SkipOrFail(f, err)
	opts := ModuleOptions{PoolSize: 1, RecycleAfterCalls: -1}
	asRedactor := interceptorsOf(f, loadBytes(f, "redactor-as", asRedactorWasm, opts))[0]
	type build struct{ guard, redactor intercept.Interceptor }
	var builds []build
	for i, wasm := range [][2][]byte{
		{w.Example(f, "cross-boundary-guard"), w.Example(f, "secretless-redactor")},
		{cGuard, cRedactor},
	} {
		g := interceptorsOf(f, loadBytes(f, fmt.Sprint("guard", i), wasm[0], opts))
		r := interceptorsOf(f, loadBytes(f, fmt.Sprint("redactor", i), wasm[1], opts))
		builds = append(builds, build{g[0], r[0]})
	}
	session := 0
	f.Fuzz(func(t *testing.T, payload []byte) {
		var v map[string]any
		if !utf8.Valid(payload) || json.Unmarshal(payload, &v) != nil {
			t.Skip("not a JSON object in UTF-8")
		}
		session++
		sid := fmt.Sprint("fuzz-", session)
		var redacted [2]any
		var verdict [2]bool
		for i, b := range builds {
			inv := func(ic intercept.Interceptor, phase intercept.Phase, server string) *intercept.Result {
				r, err := ic.Invoke(ctx, &intercept.Invocation{Name: ic.Describe().Name, Event: "tools/call", Phase: phase,
					Payload: payload, Context: &intercept.Context{SessionID: sid, Server: server}})
				if err != nil {
					t.Fatalf("build %d: %s: %v", i, ic.Describe().Name, err)
				}
				return r
			}
			r := inv(b.redactor, intercept.Request, "b")
			redacted[i] = v
			if r.Modified {
				if err := json.Unmarshal(r.Payload, &redacted[i]); err != nil {
					t.Fatalf("build %d: redacted payload %s: %v", i, r.Payload, err)
				}
			}
			inv(b.guard, intercept.Request, "a")
			inv(b.guard, intercept.Response, "a")
			verdict[i] = inv(b.guard, intercept.Request, "b").Valid
		}
		r, err := asRedactor.Invoke(ctx, &intercept.Invocation{Name: asRedactor.Describe().Name, Event: "tools/call", Phase: intercept.Request,
			Payload: payload, Context: &intercept.Context{SessionID: sid, Server: "b"}})
		if err != nil {
			t.Fatalf("as: %v", err)
		}
		var asRedacted any = v
		if r.Modified {
			if err := json.Unmarshal(r.Payload, &asRedacted); err != nil {
				t.Fatalf("as: redacted payload %s: %v", r.Payload, err)
			}
		}
		if !reflect.DeepEqual(redacted[1], asRedacted) {
			t.Fatalf("redacted payloads differ:\nc:  %v\nas: %v", redacted[1], asRedacted)
		}
		if !reflect.DeepEqual(redacted[0], redacted[1]) {
			t.Fatalf("redacted payloads differ:\ngo: %v\nc:  %v", redacted[0], redacted[1])
		}
		if verdict[0] != verdict[1] {
			t.Fatalf("guard verdicts differ: go valid=%v, c valid=%v", verdict[0], verdict[1])
		}
	})
}

// TestGuardSessionStateC: the C build of cross-boundary-guard asks for
// session state and keeps its memory of a session there, as the Go build
// does: on instances recycled after every call (two in the pool) a key
// read from server a in a session is refused on its way to server b and
// may go back to a; another session may send it. Without clang it
// skips, and fails under CI.
func TestGuardSessionStateC(t *testing.T) {
	wasm, err := w.CExample("cross-boundary-guard", t.TempDir())
	w.SkipOrFail(t, err)
	ics := interceptorsOf(t, loadBytes(t, "guard-c", wasm, ModuleOptions{PoolSize: 2, RecycleAfterCalls: 1}))
	if len(ics) != 1 || !ics[0].Describe().SessionState {
		t.Fatalf("interceptors %+v, want one with sessionState", ics)
	}
	store := &intercept.MemoryStore{}
	c, err := intercept.NewChain(intercept.Options{State: store}, intercept.Member{Interceptor: ics[0]})
	if err != nil {
		t.Fatal(err)
	}
	const key = `{"name":"t","arguments":{"text":"AKIA5MZXN8QRF3WBY6OE"}}`
	for i, step := range []struct {
		session, server string
		phase           intercept.Phase
		refused         string
	}{
		{"s1", "a", intercept.Request, ""},
		{"s1", "a", intercept.Response, ""},
		{"s1", "b", intercept.Request, "read from server 'a' may not be sent to server 'b'"},
		{"s1", "a", intercept.Request, ""},
		{"s1", "b", intercept.Request, "read from server 'a' may not be sent to server 'b'"},
		{"s2", "b", intercept.Request, ""},
	} {
		_, err := c.Run(context.Background(), intercept.Event{Event: "tools/call", Phase: step.phase, Payload: json.RawMessage(key),
			Context: &intercept.Context{SessionID: step.session, Server: step.server}})
		if step.refused == "" && err != nil || step.refused != "" && (err == nil || !strings.Contains(err.Error(), step.refused)) {
			t.Fatalf("step %d (%s to %s, %s): %v, want refused %q", i, step.session, step.server, step.phase, err, step.refused)
		}
	}
	if st := string(store.Load("s1", "security/cross-boundary-guard")); !strings.Contains(st, "AKIA5MZXN8QRF3WBY6OE aws_access_key a") {
		t.Fatalf("session state %s, want the key with its origin", st)
	}
}
