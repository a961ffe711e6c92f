package interceptors

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

// hostile answers, per interceptor name, what a broken or malicious
// interceptor server might.
var hostile = map[string]struct {
	typ    intercept.Type
	answer func(ctx context.Context) (json.RawMessage, error)
}{
	"hostile/garbage": {intercept.Validation, func(context.Context) (json.RawMessage, error) { return json.RawMessage(`"garbage"`), nil }},
	"hostile/wrong-type": {intercept.Validation, func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{"type":"mutation","modified":true,"payload":{}}`), nil
	}},
	"hostile/wrong-shape": {intercept.Mutation, func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{"type":"mutation","modified":true,"payload":{"name":"echo","arguments":[1]}}`), nil
	}},
	"hostile/oversized": {intercept.Mutation, func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{"modified":true,"payload":{"name":"echo","arguments":{"x":"` + strings.Repeat("a", 5<<20) + `"}}}`), nil
	}},
	"hostile/hang": {intercept.Validation, func(ctx context.Context) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}},
	"hostile/error": {intercept.Validation, func(context.Context) (json.RawMessage, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "policy service unavailable"}
	}},
	"hostile/other-name": {intercept.Validation, func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{"interceptor":"someone/else","type":"validation","valid":true}`), nil
	}},
	"hostile/denies": {intercept.Validation, func(context.Context) (json.RawMessage, error) {
		return json.RawMessage(`{"valid":false,"severity":"error","messages":[{"message":"pii found","severity":"error"}]}`), nil
	}},
}

// startServer serves list (a raw interceptors/list result) and the hostile
// answers on 127.0.0.1; wantAuth, when set, is the Authorization header
// every request must carry.
func startServer(t *testing.T, list json.RawMessage, wantAuth string) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	err := mcp.AddReceivingCustomMethod(srv, intercept.MethodList, func(context.Context, *mcp.ServerSession, *rawParams) (*rawResult, error) {
		return &rawResult{raw: list}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = mcp.AddReceivingCustomMethod(srv, intercept.MethodInvoke, func(ctx context.Context, _ *mcp.ServerSession, p *rawParams) (*rawResult, error) {
		inv, err := intercept.ParseInvocation(p.raw)
		if err != nil {
			return nil, err
		}
		h, ok := hostile[inv.Name]
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown"}
		}
		raw, err := h.answer(ctx)
		if err != nil {
			return nil, err
		}
		return &rawResult{raw: raw}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wantAuth != "" && r.Header.Get("Authorization") != wantAuth {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	})}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

func hostileList() json.RawMessage {
	var ds []string
	for name, h := range hostile {
		ds = append(ds, fmt.Sprintf(`{"name":%q,"type":%q,"hooks":[{"events":["tools/call"],"phase":"request"}]}`, name, h.typ))
	}
	return json.RawMessage(`{"interceptors":[` + strings.Join(ds, ",") + `]}`)
}

func dial(t *testing.T, url string, opts ServerOptions) *Client {
	t.Helper()
	opts.URL = url
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, "pii", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestHostileInterceptorServer: every bad answer follows the interceptor's
// failOpen, is counted, and a refusal names the interceptor and why.
func TestHostileInterceptorServer(t *testing.T) {
	c := dial(t, startServer(t, hostileList(), "Bearer s3cret"), ServerOptions{Header: http.Header{"Authorization": {"Bearer s3cret"}}})
	ics, skipped, err := c.Interceptors(context.Background())
	if err != nil || len(skipped) > 0 || len(ics) != len(hostile) {
		t.Fatalf("discovered %d, skipped %v, err %v", len(ics), skipped, err)
	}
	byName := map[string]intercept.Interceptor{}
	for _, ic := range ics {
		byName[ic.Describe().Name] = ic
	}
	tests := []struct {
		name, reason string
		kind         error
		timeout      time.Duration // 300 ms when 0
	}{
		{"hostile/garbage", "not a JSON object of the right shape", intercept.ErrBadResult, 0},
		{"hostile/wrong-type", `result has type "mutation"`, intercept.ErrBadResult, 0},
		{"hostile/wrong-shape", `"arguments" is a JSON array, want object`, intercept.ErrBadResult, 0},
		{"hostile/oversized", "answer too large", intercept.ErrBadResult, 20 * time.Second},
		{"hostile/hang", "deadline exceeded", intercept.ErrTimeout, 0},
		{"hostile/error", "policy service unavailable", intercept.ErrFailed, 0},
		{"hostile/other-name", `names interceptor "someone/else"`, intercept.ErrBadResult, 0},
		{"hostile/denies", "pii found", nil, 0},
	}
	for _, tt := range tests {
		for _, open := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/failOpen=%v", tt.name, open), func(t *testing.T) {
				chain, err := intercept.NewChain(intercept.Options{}, intercept.Member{Interceptor: byName[tt.name], FailOpen: &open, Timeout: cmp.Or(tt.timeout, 300*time.Millisecond)})
				if err != nil {
					t.Fatal(err)
				}
				out, err := chain.Run(context.Background(), intercept.Event{Event: "tools/call", Phase: intercept.Request, Payload: json.RawMessage(`{"name":"echo","arguments":{}}`)})
				if open && tt.kind != nil {
					if err != nil || len(out.Failures) != 1 || !errors.Is(out.Failures[0], tt.kind) {
						t.Fatalf("err = %v, failures = %v; want allowed with one %v", err, out.Failures, tt.kind)
					}
					if got := chain.Counters(tt.name).Failures.Load(); got != 1 {
						t.Fatalf("failures counted %d", got)
					}
					return
				}
				var r *intercept.Refusal
				if !errors.As(err, &r) || r.Interceptor != tt.name {
					t.Fatalf("err = %v, want a refusal by %s", err, tt.name)
				}
				if !strings.Contains(err.Error(), tt.reason) {
					t.Fatalf("err = %q, want it to say %q", err, tt.reason)
				}
				if tt.kind != nil && (r.Failure == nil || !errors.Is(r.Failure, tt.kind)) {
					t.Fatalf("failure = %v, want %v", r.Failure, tt.kind)
				}
			})
		}
	}
}

func TestInterceptorsListLimits(t *testing.T) {
	var many []string
	for i := range 5000 {
		many = append(many, fmt.Sprintf(`{"name":"n%d","type":"validation","hooks":[{"events":["*"],"phase":"request"}]}`, i))
	}
	tests := []struct {
		name, list string
		found      int
		skipped    []string
		err        string
	}{
		{name: "thousands", list: `{"interceptors":[` + strings.Join(many, ",") + `]}`, err: "lists 5000 interceptors, at most 1024"},
		{name: "not a list", list: `{"tools":[]}`, err: "not a list of interceptors"},
		{name: "invalid descriptors skipped", list: `{"interceptors":[
			{"name":"ok","type":"validation","hooks":[{"events":["tools/call"],"phase":"both"}]},
			{"name":"bad-type","type":"validator","hooks":[{"events":["tools/call"],"phase":"request"}]},
			{"name":"no-hooks","type":"mutation"},
			{"name":"ok","type":"validation","hooks":[{"events":["x"],"phase":"request"}]}]}`,
			found: 1, skipped: []string{`"bad-type"`, `"no-hooks"`, `"ok" listed twice`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, startServer(t, json.RawMessage(tt.list), ""), ServerOptions{})
			ics, skipped, err := c.Interceptors(context.Background())
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), `"pii"`) {
					t.Fatalf("err = %v, want %q naming the server", err, tt.err)
				}
				return
			}
			if err != nil || len(ics) != tt.found || len(skipped) != len(tt.skipped) {
				t.Fatalf("found %d, skipped %v, err %v", len(ics), skipped, err)
			}
			for i, want := range tt.skipped {
				if !strings.Contains(skipped[i].Error(), want) {
					t.Fatalf("skipped[%d] = %v, want %q", i, skipped[i], want)
				}
			}
		})
	}
}

func TestDialRefused(t *testing.T) {
	url := startServer(t, hostileList(), "Bearer right")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Dial(ctx, "pii", ServerOptions{URL: url, Header: http.Header{"Authorization": {"Bearer wrong"}}}); err == nil || !strings.Contains(err.Error(), `interceptor server "pii"`) {
		t.Fatalf("err = %v", err)
	}
}

// TestReferenceSDKWire: a server speaking the reference Go SDK's wire
// (go/sdk in modelcontextprotocol/experimental-ext-interceptors, not on the
// Go proxy): descriptors with a single "hook" and "mode":"enforce", invoke
// results with the verdict nested under "validation" or "mutation" and the
// mutated payload beside it.
func TestReferenceSDKWire(t *testing.T) {
	list := json.RawMessage(`{"interceptors":[
		{"name":"pii-validator","version":"1.0.0","type":"validation","hook":{"events":["tools/call"],"phase":"request"},"mode":"enforce"},
		{"name":"hello-mutator","type":"mutation","hook":{"events":["tools/call"],"phase":"request"},"priorityHint":-10,"mode":""}]}`)
	srv := mcp.NewServer(&mcp.Implementation{Name: "reference", Version: "1"}, nil)
	if err := mcp.AddReceivingCustomMethod(srv, intercept.MethodList, func(context.Context, *mcp.ServerSession, *rawParams) (*rawResult, error) {
		return &rawResult{raw: list}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := mcp.AddReceivingCustomMethod(srv, intercept.MethodInvoke, func(_ context.Context, _ *mcp.ServerSession, p *rawParams) (*rawResult, error) {
		inv, err := intercept.ParseInvocation(p.raw)
		if err != nil {
			return nil, err
		}
		if inv.Name == "hello-mutator" {
			return &rawResult{raw: json.RawMessage(`{"interceptor":"hello-mutator","type":"mutation","phase":"request","durationMs":0,"mutation":{"modified":true},"payload":{"name":"echo","arguments":{"greeting":"hello"}}}`)}, nil
		}
		if strings.Contains(string(inv.Payload), "hello") {
			return &rawResult{raw: json.RawMessage(`{"interceptor":"pii-validator","type":"validation","phase":"request","durationMs":0,"validation":{"valid":false,"severity":"error","messages":[{"path":"arguments.greeting","message":"greetings are PII here","severity":"error"}]}}`)}, nil
		}
		return &rawResult{raw: json.RawMessage(`{"interceptor":"pii-validator","type":"validation","phase":"request","durationMs":0,"validation":{"valid":true}}`)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	c := dial(t, "http://"+ln.Addr().String()+"/mcp", ServerOptions{})
	ics, skipped, err := c.Interceptors(context.Background())
	if err != nil || len(skipped) > 0 || len(ics) != 2 {
		t.Fatalf("discovered %d, skipped %v, err %v", len(ics), skipped, err)
	}
	var ms []intercept.Member
	for _, ic := range ics {
		ms = append(ms, intercept.Member{Interceptor: ic})
	}
	chain, err := intercept.NewChain(intercept.Options{}, ms...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = chain.Run(context.Background(), intercept.Event{Event: "tools/call", Phase: intercept.Request, Payload: json.RawMessage(`{"name":"echo","arguments":{}}`)})
	if err == nil || !strings.Contains(err.Error(), `interceptor "pii-validator" refused tools/call (request): greetings are PII here`) {
		t.Fatalf("err = %v: the validator must see the mutator's payload and refuse", err)
	}
}
