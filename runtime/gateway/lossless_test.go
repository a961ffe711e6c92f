package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/transports"
)

// A tool definition and a result full of fields edge-mcp does not know.
const (
	losslessTool = `{"name":"future_tool","title":"Future","description":"d","inputSchema":{"type":"object","properties":{"x":{"type":"string","x-vendor":{"deep":[1,2,{"k":null}]}}},"$defs":{"a":{}}},` +
		`"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"x-unknown":"kept"},"execution":{"taskSupport":"optional"},` +
		`"icons":[{"src":"https://example.com/i.png","mimeType":"image/png","sizes":["48x48"]}],"_meta":{"vendor.example/flag":true,"io.modelcontextprotocol/related-task":{"taskId":"t1"}},"futureField":{"nested":[1.5e3,"é\u2028"]}}`
	losslessResult = `{"content":[{"type":"text","text":"hi","annotations":{"audience":["user"],"priority":0.5},"_meta":{"a":1}},{"type":"resource_link","uri":"file:///x","name":"x","futureKind":true}],` +
		`"structuredContent":{"n":1,"deep":{"list":[true,false,null]}},"isError":false,"_meta":{"vendor.example/trace":"abc"},"resultExtension":{"v":2}}`
)

// rawUpstream is a hand-written MCP server over edge-mcp's own streamable
// HTTP server transport that answers with fixed raw JSON, so the test
// controls every byte the gateway receives. It records the params of the
// last tools/call it saw.
func rawUpstream(t *testing.T, lastCall chan<- json.RawMessage) string {
	t.Helper()
	srv := transports.NewStreamableServer(func(conn transports.Connection) {
		go func() {
			for {
				msg, err := conn.Read(context.Background())
				if err != nil {
					return
				}
				req, ok := msg.(*jsonrpc.Request)
				if !ok || !req.IsCall() {
					continue
				}
				var result string
				switch req.Method {
				case "initialize":
					result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"raw","version":"1"}}`
				case "tools/list":
					result = `{"tools":[` + losslessTool + `]}`
				case "tools/call":
					lastCall <- append(json.RawMessage(nil), req.Params...)
					result = losslessResult
				default:
					conn.Write(context.Background(), &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no"}})
					continue
				}
				conn.Write(context.Background(), &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(result)})
			}
		}()
	}, transports.StreamableServerOptions{})
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { srv.Close(); hs.Close() })
	return hs.URL
}

// rawClient speaks streamable HTTP by hand so the test sees the exact bytes
// the gateway sends downstream.
type rawClient struct {
	t   *testing.T
	url string
	sid string
	id  int
}

func newRawClient(t *testing.T, url string) *rawClient {
	c := &rawClient{t: t, url: url}
	c.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)
	c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

func (c *rawClient) post(body string) (*http.Response, []byte) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		c.sid = sid
	}
	return resp, b
}

// call sends a request and returns the response message's raw result.
func (c *rawClient) call(method, params string) json.RawMessage {
	c.t.Helper()
	c.id++
	resp, body := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.id, method, params))
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("%s: HTTP %d: %s", method, resp.StatusCode, body)
	}
	data := body
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data = nil
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				data = []byte(strings.TrimSpace(line)) // the last event is the response
			}
		}
	}
	msg, err := wire.Decode(data)
	if err != nil {
		c.t.Fatalf("%s: decoding %q: %v", method, data, err)
	}
	r, ok := msg.(*jsonrpc.Response)
	if !ok || r.Error != nil {
		c.t.Fatalf("%s: not a result: %s", method, data)
	}
	return r.Result
}

// canonical re-encodes JSON with sorted keys, so byte comparison ignores
// member order only.
func canonical(t *testing.T, raw []byte) string {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("canonical %s: %v", raw, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestLosslessRoundTrip(t *testing.T) {
	t.Parallel()
	lastCall := make(chan json.RawMessage, 1)
	up := rawUpstream(t, lastCall)
	url, _ := startGateway(t, serversJSON(fmt.Sprintf(`"raw": {"url": %q}`, up)), Options{})
	c := newRawClient(t, url)

	var list struct{ Tools []json.RawMessage }
	if err := json.Unmarshal(c.call("tools/list", `{}`), &list); err != nil || len(list.Tools) != 1 {
		t.Fatalf("tools/list: %v %v", err, list)
	}
	if got, want := canonical(t, list.Tools[0]), canonical(t, []byte(losslessTool)); got != want {
		t.Errorf("tool definition changed on the way:\n got %s\nwant %s", got, want)
	}

	callParams := `{"name":"future_tool","arguments":{"x":"y","extra":[1,{"z":null}]},"_meta":{"vendor.example/k":"v","io.modelcontextprotocol/clientInfo":{"name":"raw"}},"task":{"ttl":1000},"futureParam":1}`
	res := c.call("tools/call", callParams)
	if got, want := canonical(t, res), canonical(t, []byte(losslessResult)); got != want {
		t.Errorf("tool result changed on the way:\n got %s\nwant %s", got, want)
	}
	// Params arrive upstream unchanged, except the per-connection _meta key.
	wantParams := `{"name":"future_tool","arguments":{"x":"y","extra":[1,{"z":null}]},"_meta":{"vendor.example/k":"v"},"task":{"ttl":1000},"futureParam":1}`
	if got := canonical(t, <-lastCall); got != canonical(t, []byte(wantParams)) {
		t.Errorf("params upstream:\n got %s\nwant %s", got, canonical(t, []byte(wantParams)))
	}
}

func TestUnknownMethodAndBadParams(t *testing.T) {
	t.Parallel()
	url, _ := startGateway(t, serversJSON(), Options{})
	c := newRawClient(t, url)
	for _, tc := range []struct {
		name, body string
		code       int64
	}{
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"no/such","params":{}}`, jsonrpc.CodeMethodNotFound},
		{"tools/call without name", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"arguments":{}}}`, jsonrpc.CodeInvalidParams},
		{"bad cursor", `{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"cursor":"%%%"}}`, jsonrpc.CodeInvalidParams},
		{"unknown resource", `{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"uri":"x://y"}}`, jsonrpc.CodeInvalidParams}, // SEP-2164
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := c.post(tc.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("HTTP %d: %s", resp.StatusCode, body)
			}
			msg, err := wire.Decode(body)
			if err != nil {
				t.Fatalf("decoding %s: %v", body, err)
			}
			r := msg.(*jsonrpc.Response)
			e, ok := r.Error.(*jsonrpc.Error)
			if !ok || e.Code != tc.code {
				t.Fatalf("answer %s, want error code %d", body, tc.code)
			}
		})
	}
}
