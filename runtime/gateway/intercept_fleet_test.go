package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/policy/wasmtest"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
)

// sessionGuard is a cross-boundary guard that holds nothing itself: its
// memory of a session (which server returned secretKey) is the host's
// session state (Descriptor.SessionState). A response carrying secretKey
// is remembered with its server; a request carrying it to another server
// is refused. seen counts the invocations that came with a remembered
// secret in their state.
func sessionGuard(seen *atomic.Int32) intercept.Interceptor {
	type state struct {
		From []string `json:"from"`
	}
	return &intercept.Func{Desc: intercept.Descriptor{Name: "acme/session-guard", Type: intercept.Validation, SessionState: true,
		Hooks: []intercept.Hook{{Events: []string{"tools/call"}, Phase: intercept.Request}, {Events: []string{"tools/call"}, Phase: intercept.Response}}},
		Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
			var st state
			if inv.Context == nil || inv.Context.InterceptorState == nil {
				return nil, fmt.Errorf("no session state in the invocation context")
			}
			if err := json.Unmarshal(inv.Context.InterceptorState, &st); err != nil {
				return nil, err
			}
			if len(st.From) > 0 {
				seen.Add(1)
			}
			carries := strings.Contains(string(inv.Payload), secretKey)
			if inv.Phase == intercept.Response {
				if !carries || slices.Contains(st.From, inv.Context.Server) {
					return intercept.Pass(), nil
				}
				st.From = append(st.From, inv.Context.Server)
				res := intercept.Pass()
				res.State, _ = json.Marshal(st)
				return res, nil
			}
			if carries && len(st.From) > 0 && !slices.Contains(st.From, inv.Context.Server) {
				return intercept.Deny("a secret read from server " + st.From[0] + " may not go to server " + inv.Context.Server), nil
			}
			return intercept.Pass(), nil
		}}
}

// TestInterceptorsFleetSessionState: three replicas of one fleet (an
// in-process NATS) behind a strict round-robin proxy, each calling the
// same interceptor server whose guard keeps its memory of a session only
// in the host's session state. One session reads a secret from server a
// on one replica; sending it to server b, on the next replicas, is
// refused, writing it back to a is not, and another session may send
// it: the state is the fleet's (JetStream KV), not any replica's.
func TestInterceptorsFleetSessionState(t *testing.T) {
	t.Parallel()
	var seen atomic.Int32
	ics := serveInterceptors(t, sessionGuard(&seen))
	a := vaultServer(t, "a", make(chan string, 8))
	b := vaultServer(t, "b", make(chan string, 8))
	f := startFleet(t, 3, fmt.Sprintf(`{"mcpServers": {"a": {"url": %q, "prefix": "a"}, "b": {"url": %q, "prefix": "b"}},
	  "interceptorServers": {"acme": {"url": %q}}, "interceptors": [{"server": "acme"}]}`, a, b, ics))
	for i, g := range f.gws {
		if _, ok := g.icept.store.(*fleet.InterceptorState); !ok {
			t.Fatalf("replica %d keeps interceptor state in %T, want the fleet's", i, g.icept.store)
		}
	}
	cs := connect(t, f.url, nil)
	if _, err := icCall(t, cs, "a_leak", ""); err != nil {
		t.Fatalf("reading the secret from a: %v", err)
	}
	for round := range 3 { // every replica in turn
		_, err := icCall(t, cs, "b_record", secretKey)
		if err == nil || !strings.Contains(err.Error(), `interceptor "acme/session-guard" refused tools/call (request): a secret read from server a may not go to server b`) {
			t.Fatalf("round %d: sending a's secret to b: %v, want the guard's refusal", round, err)
		}
		if got, err := icCall(t, cs, "a_echo", secretKey); err != nil || got != "a:"+secretKey {
			t.Fatalf("round %d: writing it back to a: %q %v", round, got, err)
		}
	}
	for i, n := range f.servedBy() {
		if n != 1 {
			t.Fatalf("replica %d serves %d sessions, want 1 each: the session did not cross replicas (%v)", i, n, f.servedBy())
		}
	}
	other := connect(t, f.url, nil)
	if got, err := icCall(t, other, "b_echo", secretKey); err != nil || got != "b:"+secretKey {
		t.Fatalf("another session sending the same value to b: %q %v", got, err)
	}
	if seen.Load() == 0 {
		t.Fatal("no invocation carried the remembered state")
	}
}

// keyServer is an upstream whose "read" returns an AWS access key and
// whose "echo" answers its text.
func keyServer(t *testing.T, name string) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "read"}, func(context.Context, *mcp.CallToolRequest, struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "key " + fleetAWSKey}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ":" + in.Text}}}, nil, nil
	})
	return serveMCP(t, s)
}

const fleetAWSKey = "AKIA5MZXN8QRF3WBY6OE"

// TestInterceptorsFleetGuardModule: the shipped cross-boundary-guard
// module (ABI 1.1, sessionState) on three replicas of a fleet behind a
// round-robin proxy, each with its own instances: a key read from server
// a on one replica may not be sent to server b on any replica, and may
// be written back to a. The guard's memory of the session is the fleet's
// session state, not an instance's.
func TestInterceptorsFleetGuardModule(t *testing.T) {
	t.Parallel()
	fleetGuard(t, wasmtest.Example(t, "cross-boundary-guard"))
}

// TestInterceptorsFleetGuardModuleC is TestInterceptorsFleetGuardModule
// with the guard's C build (wasm-examples/cross-boundary-guard/c on the C
// kit, built by the test), which keeps its memory in the host's session
// state too. Without clang it skips, and fails under CI.
func TestInterceptorsFleetGuardModuleC(t *testing.T) {
	t.Parallel()
	wasm, err := wasmtest.CExample("cross-boundary-guard", t.TempDir())
	wasmtest.SkipOrFail(t, err)
	fleetGuard(t, wasm)
}

// fleetGuard runs a build of cross-boundary-guard on three replicas of a
// fleet (TestInterceptorsFleetGuardModule).
func fleetGuard(t *testing.T, wasm []byte) {
	mod := writeModule(t, wasm)
	a, b := keyServer(t, "a"), keyServer(t, "b")
	f := startFleet(t, 3, fmt.Sprintf(`{"mcpServers": {"a": {"url": %q, "prefix": "a"}, "b": {"url": %q, "prefix": "b"}},
	  "policies": [{"name": "guard", "module": %q}], "interceptors": [{"module": "guard"}]}`, a, b, mod))
	cs := connect(t, f.url, nil)
	if got, err := icCall(t, cs, "a_read", ""); err != nil || !strings.Contains(got, fleetAWSKey) {
		t.Fatalf("reading the key from a: %q %v", got, err)
	}
	for round := range 3 {
		_, err := icCall(t, cs, "b_echo", fleetAWSKey)
		if err == nil || !strings.Contains(err.Error(), "read from server 'a' may not be sent to server 'b'") {
			t.Fatalf("round %d: sending a's key to b: %v, want the guard's refusal", round, err)
		}
		if got, err := icCall(t, cs, "a_echo", fleetAWSKey); err != nil || got != "a:"+fleetAWSKey {
			t.Fatalf("round %d: writing it back to a: %q %v", round, got, err)
		}
	}
	for i, n := range f.servedBy() {
		if n != 1 {
			t.Fatalf("replica %d serves %d sessions, want 1 each (%v)", i, n, f.servedBy())
		}
	}
}
