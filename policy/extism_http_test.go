package policy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// httpPlugin hand-assembles an Extism plugin whose tool_call sends its
// input, an Extism JSON request, with http_request and outputs the
// response body; a status other than 200 returns 1.
func httpPlugin() []byte {
	imp := func(name string, params, results []byte) w.Import {
		return w.Import{Module: extismModule, Name: name, Params: params, Results: results}
	}
	const (
		inputLength, alloc, inputLoadU8, storeU8, httpRequest, length, outputSet, httpStatus = 0, 1, 2, 3, 4, 5, 6, 7
		n, off, i, resp                                                                      = 0, 1, 2, 3
	)
	body := w.Seq(
		[]byte{w.OpCall, inputLength, w.OpLocalSet, n},
		[]byte{w.OpLocalGet, n, w.OpCall, alloc, w.OpLocalSet, off},
		[]byte{w.OpBlock, w.OpBlockTypeVoid, w.OpLoop, w.OpBlockTypeVoid},
		[]byte{w.OpLocalGet, i, w.OpLocalGet, n, 0x5a /* i64.ge_u */, w.OpBrIf, 1},
		[]byte{w.OpLocalGet, off, w.OpLocalGet, i, 0x7c /* i64.add */, w.OpLocalGet, i, w.OpCall, inputLoadU8, w.OpCall, storeU8},
		[]byte{w.OpLocalGet, i}, w.I64Const(1), []byte{0x7c, w.OpLocalSet, i, w.OpBr, 0, w.OpEnd, w.OpEnd},
		[]byte{w.OpLocalGet, off}, w.I64Const(0), []byte{w.OpCall, httpRequest, w.OpLocalSet, resp},
		[]byte{w.OpCall, httpStatus}, w.I32Const(200), []byte{0x47 /* i32.ne */, 0x04 /* if */, w.OpBlockTypeVoid}, w.I32Const(1), []byte{0x0f /* return */, w.OpEnd},
		[]byte{w.OpLocalGet, resp, w.OpLocalGet, resp, w.OpCall, length, w.OpCall, outputSet},
		w.I32Const(0),
	)
	a := &w.Assembler{
		Imports: []w.Import{
			imp("input_length", nil, []byte{w.I64}), imp("alloc", []byte{w.I64}, []byte{w.I64}),
			imp("input_load_u8", []byte{w.I64}, []byte{w.I32}), imp("store_u8", []byte{w.I64, w.I32}, nil),
			imp("http_request", []byte{w.I64, w.I64}, []byte{w.I64}), imp("length", []byte{w.I64}, []byte{w.I64}),
			imp("output_set", []byte{w.I64, w.I64}, nil), imp("http_status_code", nil, []byte{w.I32}),
		},
		MemoryPages: 1,
		Funcs:       []w.Func{{Results: w.SigI32, Locals: []byte{w.I64, w.I64, w.I64, w.I64}, Body: body, Export: "tool_call"}},
	}
	return a.Bytes()
}

// TestExtismHTTPRequest: an Extism plugin's http_request reaches a real
// server on 127.0.0.1 through the host's net/http when its attachment
// allows the host, follows redirects among allowed hosts only, and is
// held to the call's deadline and the plugin's byte budget; anything else
// is refused with the reason.
func TestExtismHTTPRequest(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(rw, `{"action":"deny","reason":"%s %s"}`, r.Method, r.Header.Get("X-Plugin"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	mux.HandleFunc("/redirect-out", func(rw http.ResponseWriter, r *http.Request) {
		http.Redirect(rw, r, "http://localhost:"+port+"/hello", http.StatusFound)
	})
	mux.HandleFunc("/redirect-in", func(rw http.ResponseWriter, r *http.Request) {
		http.Redirect(rw, r, "/hello", http.StatusFound)
	})
	mux.HandleFunc("/big", func(rw http.ResponseWriter, r *http.Request) {
		rw.Write([]byte(strings.Repeat("x", 8192)))
	})
	mux.HandleFunc("/slow", func(rw http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	})
	req := func(method, path string) []byte {
		return []byte(fmt.Sprintf(`{"method":%q,"url":"%s%s","headers":{"X-Plugin":"p1"}}`, method, srv.URL, path))
	}
	allow := Grants{AllowedHosts: []string{"127.0.0.1"}}
	tests := []struct {
		name   string
		grants Grants
		input  []byte
		want   string // output, or what the error says
		kind   error
	}{
		{"allowed host", allow, req("POST", "/hello"), `{"action":"deny","reason":"POST p1"}`, nil},
		{"allowed host:port glob", Grants{AllowedHosts: []string{"127.0.0.*:" + port}}, req("GET", "/hello"), `{"action":"deny","reason":"GET p1"}`, nil},
		{"redirect among allowed hosts", allow, req("GET", "/redirect-in"), `{"action":"deny","reason":"GET p1"}`, nil},
		{"host not allowed", Grants{AllowedHosts: []string{"*.example.com"}}, req("GET", "/hello"), `host "127.0.0.1:` + port + `" is not in the plugin's allowed_hosts`, ErrForbiddenCall},
		{"redirect to a host not allowed", allow, req("GET", "/redirect-out"), `redirected to host "localhost:` + port + `" is not in the plugin's allowed_hosts`, ErrForbiddenCall},
		{"response past the byte budget", allow, req("GET", "/big"), "kernel memory limit", ErrForbiddenCall},
		{"server past the deadline", allow, req("GET", "/slow"), "no answer before the call's deadline", ErrTimeout},
		{"status other than 200", allow, req("GET", "/missing"), "returned 1", ErrGuest},
		{"not a URL the plugin may use", allow, []byte(`{"url":"file:///etc/passwd"}`), "not an http or https URL", ErrForbiddenCall},
		{"no allowed hosts", Grants{}, req("GET", "/hello"), "no allowed_hosts", ErrForbiddenCall},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := loadBytes(t, "plugin", httpPlugin(), ModuleOptions{MemoryMB: 4, PoolSize: 1, Grants: tt.grants,
				Timeout: 300 * time.Millisecond, MaxInput: 2048, MaxOutput: 2048})
			out, err := m.call(context.Background(), HookToolCall, tt.input)
			if tt.kind == nil {
				if err != nil || string(out) != tt.want {
					t.Fatalf("got %s, %v; want %s", out, err, tt.want)
				}
				return
			}
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v; want %v saying %q", err, tt.kind, tt.want)
			}
		})
	}
	if _, err := testEngine.Load(context.Background(), "plugin", httpPlugin(), ModuleOptions{Grants: Grants{AllowedHosts: []string{"https://x"}}}); err == nil {
		t.Fatal("allowed_hosts with a scheme: loaded")
	}
}
