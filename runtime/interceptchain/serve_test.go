package interceptchain

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

// TestServeAndStatus: without a chain interceptors/list is empty and an
// invocation names the unknown interceptor; with one, a remote server's
// members are not served locally, and the status and metrics report the
// server and each member's counts.
func TestServeAndStatus(t *testing.T) {
	ctx := context.Background()
	var none *Set
	if st, m := none.Status(), Metrics(none.Status()); st != nil || m != nil {
		t.Errorf("no chain: status %+v, metrics %+v", st, m)
	}
	url, _ := serve(t, "127.0.0.1:0", denyIf("pii/secret", "SECRET"))
	s := start(t, parse(t, fmt.Sprintf(`{"interceptorServers": {"a": {"url": %q}}, "interceptors": [{"server": "a"}]}`, url)), Options{})
	if _, err := call(s, "github", "read_file", `{"x":"SECRET"}`); err == nil {
		t.Fatal("the remote validator let SECRET through")
	}
	for _, tc := range []struct {
		name, method, params string
		set                  *Set
		result               string
		code                 int64
	}{
		{"list without a chain", intercept.MethodList, ``, none, `{"interceptors":[]}`, 0},
		{"list: remote members are not local", intercept.MethodList, `{"event":"tools/call"}`, s, `{"interceptors":[]}`, 0},
		{"bad list params", intercept.MethodList, `[1]`, s, "", jsonrpc.CodeInvalidParams},
		{"invoke without a chain", intercept.MethodInvoke, `{"name":"pii/secret","event":"tools/call","phase":"request","payload":{}}`, none, "", jsonrpc.CodeInvalidParams},
		{"invoke a remote member", intercept.MethodInvoke, `{"name":"pii/secret","event":"tools/call","phase":"request","payload":{}}`, s, "", jsonrpc.CodeInvalidParams},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var params []byte
			if tc.params != "" {
				params = []byte(tc.params)
			}
			res, rerr := tc.set.Serve(ctx, tc.method, params)
			if tc.code != 0 {
				if rerr == nil || rerr.Code != tc.code {
					t.Fatalf("got %s, %v; want code %d", res, rerr, tc.code)
				}
				return
			}
			if rerr != nil || string(res) != tc.result {
				t.Fatalf("got %s, %v; want %s", res, rerr, tc.result)
			}
		})
	}
	st := s.Status()
	if len(st.Servers) != 1 || st.Servers[0].State != "reached" || st.Servers[0].Interceptors != 1 ||
		len(st.Interceptors) != 1 || st.Interceptors[0].Calls != 1 || st.Interceptors[0].Denials != 1 {
		t.Fatalf("status %+v", st)
	}
	if m := Metrics(st); len(m.Servers) != 1 || !m.Servers[0].Reached || m.Interceptors[0].Denials != 1 {
		t.Fatalf("metrics %+v", m)
	}
}

// TestRun: a refusal is the client's message naming the interceptor, a
// chain that ends (ctx done) says so and is no refusal, an event that
// goes on returns its outcome; Open gives no Set for a config without a
// chain.
func TestRun(t *testing.T) {
	if s, err := Open(context.Background(), parse(t, `{}`), Options{}); s != nil || err != nil {
		t.Fatalf("Open without interceptors: %v, %v", s, err)
	}
	url, _ := serve(t, "127.0.0.1:0", denyIf("pii/secret", "SECRET"))
	s := start(t, parse(t, fmt.Sprintf(`{"interceptorServers": {"a": {"url": %q}}, "interceptors": [{"server": "a"}]}`, url)), Options{})
	done, cancel := context.WithCancel(context.Background())
	cancel()
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		payload string
		refused bool
		msg     string
	}{
		{"refused", context.Background(), `{"name":"t","arguments":{"x":"SECRET"}}`, true, "edge-mcp: "},
		{"chain ended", done, `{"name":"t","arguments":{}}`, false, "edge-mcp: interceptor chain ended: "},
		{"goes on", context.Background(), `{"name":"t","arguments":{}}`, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := intercept.Event{Event: "tools/call", Phase: intercept.Request, Payload: []byte(tc.payload),
				Context: &intercept.Context{Server: "github", Subject: "t"}}
			out, msg, refused := Run(tc.ctx, log, s.Chain(), ev, "github", "t", "refused")
			if (out == nil) != (tc.msg != "") || refused != tc.refused || !strings.HasPrefix(msg, tc.msg) {
				t.Fatalf("got %+v, %q, %v", out, msg, refused)
			}
			if tc.refused && !strings.Contains(msg, "pii/secret") {
				t.Errorf("the refusal does not name the interceptor: %q", msg)
			}
		})
	}
}

// TestAround: the request phase, the answer on the params the mutators
// leave, the response phase; a refused request is -32602 and answer is
// not called, a refused result -32603, answer's own failure comes back
// as it is.
func TestAround(t *testing.T) {
	mut := &intercept.Func{Desc: intercept.Descriptor{Name: "m/cursor", Type: intercept.Mutation, Hooks: []intercept.Hook{{Events: []string{"tools/list"}, Phase: intercept.Request}}},
		Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
			return intercept.Replace(json.RawMessage(strings.ReplaceAll(string(inv.Payload), "c1", "c2"))), nil
		}}
	noReq := &intercept.Func{Desc: intercept.Descriptor{Name: "v/req", Type: intercept.Validation, Hooks: []intercept.Hook{{Events: []string{"tools/list"}, Phase: intercept.Request}}},
		Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
			if strings.Contains(string(inv.Payload), "bad") {
				return intercept.Deny("bad cursor"), nil
			}
			return intercept.Pass(), nil
		}}
	noRes := &intercept.Func{Desc: intercept.Descriptor{Name: "v/res", Type: intercept.Validation, Hooks: []intercept.Hook{{Events: []string{"tools/list"}, Phase: intercept.Response}}},
		Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
			if strings.Contains(string(inv.Payload), "hidden") {
				return intercept.Deny("hidden tool"), nil
			}
			return intercept.Pass(), nil
		}}
	ch, err := intercept.NewChain(intercept.Options{}, intercept.Member{Interceptor: mut}, intercept.Member{Interceptor: noReq}, intercept.Member{Interceptor: noRes})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name, params, page string
		answerErr          *Failure
		want               string
		code               int64
	}{
		{"mutated cursor paged", `{"cursor":"c1"}`, `{"tools":[]}`, nil, `{"tools":[]}|{"cursor":"c2"}`, 0},
		{"refused request", `{"cursor":"bad"}`, `{"tools":[]}`, nil, "", intercept.CodeInvalidParams},
		{"refused result", `{}`, `{"tools":[{"name":"hidden"}]}`, nil, "", intercept.CodeInternalError},
		{"answer fails", `{}`, "", &Failure{Code: -32602, Message: "bad cursor value"}, "", -32602},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			res, f := Around(context.Background(), log, ch, "tools/list", &intercept.Context{}, json.RawMessage(tc.params),
				func(p json.RawMessage) (json.RawMessage, []string, *Failure) {
					got = string(p)
					if tc.answerErr != nil {
						return nil, nil, tc.answerErr
					}
					return json.RawMessage(tc.page), nil, nil
				})
			if tc.code != 0 {
				if f == nil || f.Code != tc.code || res != nil {
					t.Fatalf("got %s, %+v, want code %d", res, f, tc.code)
				}
				if tc.code == intercept.CodeInvalidParams && tc.answerErr == nil && got != "" {
					t.Fatal("answer ran after a refused request")
				}
				return
			}
			if f != nil || string(res)+"|"+got != tc.want {
				t.Fatalf("got %s|%s, %+v, want %s", res, got, f, tc.want)
			}
		})
	}
}
