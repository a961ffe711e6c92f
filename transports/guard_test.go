package transports_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edge-mcp/edge-mcp/transports"
)

// guardRequest builds a request with the given Host and Origin (none when
// empty), as if it had arrived on a listener at local.
func guardRequest(local, host, origin string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://"+host+"/mcp", nil)
	r.Host = host
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	if local != "" {
		addr, err := net.ResolveTCPAddr("tcp", local)
		if err != nil {
			panic(err)
		}
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
	}
	return r
}

func TestGuard(t *testing.T) {
	t.Parallel()
	const (
		loop   = "127.0.0.1:8080"
		loop6  = "[::1]:8080"
		public = "10.1.2.3:443"
	)
	listed := transports.GuardOptions{
		AllowedOrigins: []string{"https://App.Example.com/"},
		AllowedHosts:   []string{"gw.example.com", "Proxy.Example.com:8443"},
	}
	any := transports.GuardOptions{AllowedOrigins: []string{"*"}, AllowedHosts: []string{"*"}}
	tests := []struct {
		name   string
		opts   transports.GuardOptions
		local  string // listener address; "" for none known
		host   string
		origin string
		want   string // "" allowed, else "Host" or "Origin": the refused header
	}{
		{name: "loopback host no origin", local: loop, host: "127.0.0.1:8080"},
		{name: "localhost no port", local: loop, host: "localhost"},
		{name: "localhost upper case", local: loop, host: "LOCALHOST:8080"},
		{name: "ipv6 loopback host", local: loop6, host: "[::1]:8080"},
		{name: "ipv6 loopback host no port", local: loop6, host: "[::1]"},
		{name: "ipv6 loopback origin", local: loop, host: "127.0.0.1:8080", origin: "http://[::1]:3000"},
		{name: "loopback origin other port", local: loop, host: "localhost:8080", origin: "http://localhost:5173"},
		{name: "loopback origin upper case", local: loop, host: "localhost:8080", origin: "HTTP://LocalHost:5173"},
		{name: "127/8 origin", local: loop, host: "127.0.0.1:8080", origin: "http://127.1.2.3"},
		{name: "foreign origin on loopback host", local: loop, host: "127.0.0.1:8080", origin: "https://evil.example", want: "Origin"},
		{name: "null origin", local: loop, host: "127.0.0.1:8080", origin: "null", want: "Origin"},
		{name: "origin with zone", local: loop, host: "127.0.0.1:8080", origin: "http://[::1%25lo]:3000", want: "Origin"},
		{name: "origin with bad port", local: loop, host: "127.0.0.1:8080", origin: "http://localhost:x", want: "Origin"},
		{name: "origin with user info", local: loop, host: "127.0.0.1:8080", origin: "http://u@localhost:3000"},
		{name: "rebound host", local: loop, host: "evil.example:8080", want: "Host"},
		{name: "rebound host same origin", local: loop, host: "evil.example:8080", origin: "http://evil.example:8080", want: "Host"},
		{name: "rebound host on ipv6 loopback", local: loop6, host: "evil.example", want: "Host"},
		{name: "public listener any host", local: public, host: "gw.example.org"},
		{name: "unknown listener any host", host: "gw.example.org"},
		{name: "public same origin", local: public, host: "gw.example.org", origin: "https://gw.example.org"},
		{name: "public same origin case", local: public, host: "GW.example.org", origin: "https://gw.EXAMPLE.org"},
		{name: "public same origin other port", local: public, host: "gw.example.org", origin: "https://gw.example.org:444", want: "Origin"},
		{name: "public loopback origin", local: public, host: "gw.example.org", origin: "http://localhost:3000", want: "Origin"},
		{name: "public foreign origin", local: public, host: "gw.example.org", origin: "https://evil.example", want: "Origin"},
		{name: "listed host", opts: listed, local: loop, host: "gw.example.com:9000"},
		{name: "listed host upper case", opts: listed, local: loop, host: "GW.Example.COM"},
		{name: "listed host with port", opts: listed, local: loop, host: "proxy.example.com:8443"},
		{name: "listed host other port", opts: listed, local: loop, host: "proxy.example.com:9443", want: "Host"},
		{name: "unlisted host", opts: listed, local: loop, host: "other.example.com", want: "Host"},
		{name: "listed origin", opts: listed, local: loop, host: "gw.example.com", origin: "https://app.example.com"},
		{name: "listed origin trailing slash", opts: listed, local: loop, host: "localhost:8080", origin: "https://APP.example.com/"},
		{name: "listed host same origin", opts: listed, local: loop, host: "gw.example.com", origin: "https://gw.example.com"},
		{name: "listed host foreign origin", opts: listed, local: loop, host: "gw.example.com", origin: "https://evil.example.com", want: "Origin"},
		{name: "listed origin other scheme", opts: listed, local: loop, host: "localhost", origin: "http://app.example.com", want: "Origin"},
		{name: "star any host", opts: any, local: loop, host: "evil.example"},
		{name: "star any origin", opts: any, local: loop, host: "127.0.0.1:8080", origin: "https://evil.example"},
		{name: "star any origin null", opts: any, local: loop, host: "127.0.0.1:8080", origin: "null"},
		{name: "star origin only keeps host check", opts: transports.GuardOptions{AllowedOrigins: []string{"*"}}, local: loop, host: "evil.example", want: "Host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := transports.NewGuard(tc.opts)
			status, reason := g.Check(guardRequest(tc.local, tc.host, tc.origin))
			if tc.want == "" {
				if status != 0 || reason != "" {
					t.Fatalf("Check = %d %q, want allowed", status, reason)
				}
				return
			}
			if status != http.StatusForbidden || !strings.Contains(reason, tc.want+" ") {
				t.Fatalf("Check = %d %q, want 403 naming the %s", status, reason, tc.want)
			}
		})
	}
}

// TestGuardNoAllocs checks that allowed requests cost no allocation.
func TestGuardNoAllocs(t *testing.T) {
	g := transports.NewGuard(transports.GuardOptions{AllowedOrigins: []string{"https://app.example.com"}, AllowedHosts: []string{"gw.example.com"}})
	for _, tc := range []struct{ local, host, origin string }{
		{"127.0.0.1:8080", "127.0.0.1:8080", ""},
		{"127.0.0.1:8080", "localhost:8080", "http://localhost:5173"},
		{"[::1]:8080", "[::1]:8080", "http://[::1]:8080"},
		{"127.0.0.1:8080", "gw.example.com", "https://app.example.com"},
		{"10.0.0.1:443", "gw.example.org", "https://gw.example.org"},
	} {
		r := guardRequest(tc.local, tc.host, tc.origin)
		if n := testing.AllocsPerRun(100, func() {
			if status, reason := g.Check(r); status != 0 {
				t.Fatalf("%+v refused: %s", tc, reason)
			}
		}); n != 0 {
			t.Errorf("%+v: %v allocations per Check, want 0", tc, n)
		}
	}
}

// rejection decodes a JSON-RPC error body with id null.
func rejection(t *testing.T, resp *http.Response) string {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	var e struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || string(e.ID) != "null" || e.Error.Code != -32000 {
		t.Fatalf("body %s is not a JSON-RPC error with id null and code -32000", body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	return e.Error.Message
}

func TestGuardWrap(t *testing.T) {
	t.Parallel()
	called := 0
	h := transports.NewGuard(transports.GuardOptions{}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called++
		w.WriteHeader(http.StatusNoContent)
	}))
	hs := httptest.NewServer(h)
	defer hs.Close()
	for _, tc := range []struct {
		name, host, origin string
		want               int
		reason             string
	}{
		{"allowed", "", "", http.StatusNoContent, ""},
		{"forbidden origin", "", "https://evil.example", http.StatusForbidden, `Origin "https://evil.example"`},
		{"forbidden host", "evil.example", "", http.StatusForbidden, `Host "evil.example"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := called
			req, _ := http.NewRequest(http.MethodGet, hs.URL+"/status", nil)
			req.Host = tc.host
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want == http.StatusForbidden {
				if msg := rejection(t, resp); !strings.Contains(msg, tc.reason) {
					t.Errorf("reason = %q, want it to name %s", msg, tc.reason)
				}
				if called != before {
					t.Error("the wrapped handler ran for a refused request")
				}
			} else if called != before+1 {
				t.Error("the wrapped handler did not run")
			}
		})
	}
}

func TestCheckJSONContentType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, ct string
		ok       bool
	}{
		{"json", "application/json", true},
		{"json with charset", "application/json; charset=utf-8", true},
		{"json upper case", "Application/JSON", true},
		{"json spaces", " application/json ;charset=UTF-8", true},
		{"missing", "", false},
		{"text", "text/plain", false},
		{"json suffix", "application/vnd.api+json", false},
		{"json prefix", "application/jsonx", false},
		{"form", "application/x-www-form-urlencoded", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/x", strings.NewReader("{}"))
			if tc.ct != "" {
				r.Header.Set("Content-Type", tc.ct)
			}
			status, reason := transports.CheckJSONContentType(r)
			if tc.ok != (status == 0) || tc.ok != (reason == "") {
				t.Fatalf("CheckJSONContentType(%q) = %d %q, want ok=%v", tc.ct, status, reason, tc.ok)
			}
			if !tc.ok && (status != http.StatusUnsupportedMediaType || !strings.Contains(reason, "application/json")) {
				t.Fatalf("CheckJSONContentType(%q) = %d %q, want 415 naming application/json", tc.ct, status, reason)
			}

			h := transports.RequireJSON(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusOK)
			}))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if want := map[bool]int{true: 200, false: 415}[tc.ok]; rec.Code != want {
				t.Fatalf("RequireJSON answered %d, want %d", rec.Code, want)
			}
			if !tc.ok {
				if msg := rejection(t, rec.Result()); msg != reason {
					t.Errorf("RequireJSON reason %q, want %q", msg, reason)
				}
			}
			// Other methods carry no JSON body: RequireJSON passes them.
			rec = httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/x", nil))
			if rec.Code != 200 {
				t.Errorf("RequireJSON answered a GET with %d", rec.Code)
			}
		})
	}
}

// TestServerTransportsRefuseForeignOrigin checks that each server transport
// (streamable /mcp, HTTP+SSE /sse, WebSocket /ws) answers a request with a
// forbidden Origin with 403 and a JSON-RPC error body naming the Origin,
// before it opens a session, and accepts the same request without it.
func TestServerTransportsRefuseForeignOrigin(t *testing.T) {
	t.Parallel()
	accept := func(c transports.Connection) {
		go func() {
			for {
				if _, err := c.Read(context.Background()); err != nil {
					return
				}
			}
		}()
	}
	mux := http.NewServeMux()
	streamable := transports.NewStreamableServer(accept, transports.StreamableServerOptions{})
	sse := transports.NewSSEServer(accept, transports.SSEServerOptions{})
	ws := transports.NewWebSocketServer(accept, transports.WebSocketServerOptions{})
	mux.Handle("/mcp", streamable)
	mux.Handle("/sse", sse)
	mux.Handle("/ws", ws)
	hs := httptest.NewServer(mux)
	defer func() {
		hs.CloseClientConnections()
		streamable.Close()
		sse.Close()
		ws.Close()
		hs.Close()
	}()

	tests := []struct {
		name   string
		method string
		path   string
		hdr    map[string]string
		body   string
		ok     int // status without the Origin
	}{
		// Without a session only initialize may be POSTed: 400 shows the
		// guard let the request through.
		{"streamable", http.MethodPost, "/mcp", map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`, http.StatusBadRequest},
		{"sse", http.MethodGet, "/sse", map[string]string{"Accept": "text/event-stream"}, "", http.StatusOK},
		{"websocket", http.MethodGet, "/ws", map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
			"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "mcp"}, "", http.StatusSwitchingProtocols},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, origin := range []string{"https://evil.example", ""} {
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, tc.method, hs.URL+tc.path, strings.NewReader(tc.body))
				for k, v := range tc.hdr {
					req.Header.Set(k, v)
				}
				if origin != "" {
					req.Header.Set("Origin", origin)
				}
				resp, err := hs.Client().Do(req)
				if err != nil {
					cancel()
					t.Fatal(err)
				}
				if origin == "" {
					if resp.StatusCode != tc.ok {
						t.Errorf("without Origin: status = %d, want %d", resp.StatusCode, tc.ok)
					}
				} else if resp.StatusCode != http.StatusForbidden {
					t.Errorf("Origin %s: status = %d, want 403", origin, resp.StatusCode)
				} else if msg := rejection(t, resp); !strings.Contains(msg, `Origin "https://evil.example"`) {
					t.Errorf("reason %q does not name the Origin", msg)
				}
				resp.Body.Close()
				cancel()
			}
		})
	}
}
