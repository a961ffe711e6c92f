package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHostileUpstream points the release binary at an upstream that
// speaks MCP over plain HTTP until a tools/call, then answers it with
// scripted bytes on the raw TCP connection: the attacks a hostile or
// broken server can make on the gateway's HTTP client. Each call must get
// a clear error (naming the server and what went wrong) within the call's
// deadline, the process's peak RSS must not grow by more than a few MiB
// (a 300 MB response header once took it from 14 to 733 MB, a 1xx flood
// to 340 MiB until the deadline), and the gateway must go on serving the
// same upstream.
func TestHostileUpstream(t *testing.T) {
	t.Parallel()
	const (
		timeout = 3 * time.Second // the server's "timeout": every call's deadline
		budget  = 4 << 20         // limits.upstream_bytes_in_flight
		// growth is the peak RSS a case may add besides the budget: 7-9 MiB
		// on a quiet machine (garbage of the streamed body the GC has not
		// reclaimed yet); 12.4 was seen in a CI run beside other work, so
		// 12. The failures it guards against are 340 MiB and 733 MB.
		growth = 12 << 20
	)
	cases := []struct {
		name   string
		script func(w io.Writer, answer []byte) error
		want   string // in the client's error
	}{
		{"oversized_header", func(w io.Writer, answer []byte) error {
			// 300 MB of one header value, then a valid answer.
			if _, err := io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Big: "); err != nil {
				return err
			}
			if err := repeat(w, 300<<20, 'a'); err != nil {
				return err
			}
			_, err := fmt.Fprintf(w, "\r\nContent-Length: %d\r\n\r\n%s", len(answer), answer)
			return err
		}, "headers exceeded"},
		{"flood_1xx", func(w io.Writer, answer []byte) error {
			// Informational responses without end.
			early := []byte("HTTP/1.1 103 Early Hints\r\nLink: </" + strings.Repeat("a", 1000) + ">; rel=preload\r\n\r\n")
			for {
				if _, err := w.Write(early); err != nil {
					return err
				}
			}
		}, "headers exceeded"}, // net/http counts 1xx headers against the limit
		{"cl_te_conflict", func(w io.Writer, answer []byte) error {
			// Both framings: by Content-Length the answer is valid, as
			// chunks it is not (the way responses are smuggled).
			_, err := fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%s", len(answer), answer)
			return err
		}, "reading upstream response"},
		{"duplicate_content_length", func(w io.Writer, answer []byte) error {
			_, err := fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nContent-Length: %d\r\n\r\n%s", len(answer), len(answer)+5, answer)
			return err
		}, "Content-Length"},
		{"bad_status_line", func(w io.Writer, answer []byte) error {
			_, err := fmt.Fprintf(w, "HTTP/1.1 2OO OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(answer), answer)
			return err
		}, "malformed HTTP status code"},
		{"close_mid_chunk", func(w io.Writer, answer []byte) error {
			_, err := fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s", len(answer), answer[:len(answer)/2])
			return err // the connection is closed mid-chunk
		}, "unexpected EOF"},
		{"trickled_bytes", func(w io.Writer, answer []byte) error {
			// A valid answer, one byte every 100 ms: it would take longer
			// than the call's deadline.
			resp := fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(answer), answer)
			for _, b := range resp {
				if _, err := w.Write([]byte{b}); err != nil {
					return err
				}
				time.Sleep(100 * time.Millisecond)
			}
			return nil
		}, "did not answer"},
		{"endless_body", func(w io.Writer, answer []byte) error {
			// An answer that never ends, framed by the connection's close.
			if _, err := io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"+string(answer[:strings.Index(string(answer), `"text":"`)+8])); err != nil {
				return err
			}
			return repeat(w, 1<<40, 'x')
		}, "budget"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := scriptedUpstream(t, tc.name, tc.script)
			dir := t.TempDir()
			cfg := filepath.Join(dir, "gw.json")
			os.WriteFile(cfg, fmt.Appendf(nil, `{"mcpServers": {"hostile": {"url": %q, "timeout": %g}},
				"limits": {"upstream_bytes_in_flight": %d}}`, up, timeout.Seconds(), budget), 0o600)
			p := startBinary(t, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--admin", "off", "--state-dir", dir)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := waitConnected(ctx, p.base, 1); err != nil {
				t.Fatalf("%v\n%s", err, p.stderr)
			}
			c := mcp.NewClient(&mcp.Implementation{Name: "victim", Version: "1"}, nil)
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.base + "/mcp"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			callFine(ctx, t, cs)
			before := p.peakRSS(t)

			start := time.Now()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.name})
			took := time.Since(start)
			if err == nil {
				t.Fatalf("the call succeeded (%+v), want an error saying %q", res, tc.want)
			}
			if !strings.Contains(err.Error(), `"hostile"`) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one naming server \"hostile\" and saying %q", err, tc.want)
			}
			if took > timeout+2*time.Second {
				t.Errorf("the error came after %v, want it within the call's deadline (%v)", took, timeout)
			}
			limit := int64(growth)
			if tc.want == "budget" { // the answer's bytes up to the budget
				limit += budget
			}
			if grew := p.peakRSS(t) - before; grew > limit {
				t.Errorf("peak RSS grew by %.1f MiB, want at most %d MiB", float64(grew)/(1<<20), limit>>20)
			} else {
				t.Logf("error after %v, peak RSS +%.1f MiB: %v", took.Round(time.Millisecond), float64(grew)/(1<<20), err)
			}
			callFine(ctx, t, cs) // the gateway, and its link to the server, still serve
		})
	}
}

// callFine calls the scripted upstream's well-behaved tool.
func callFine(ctx context.Context, t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	var res *mcp.CallToolResult
	var err error
	for range 50 { // after a failure the link may be reconnecting
		if res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fine"}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "fine" {
		t.Fatalf("the well-behaved tool: %v %+v", err, res)
	}
}

// repeat writes n bytes c to w, in blocks.
func repeat(w io.Writer, n int64, c byte) error {
	block := []byte(strings.Repeat(string(c), 64<<10))
	for ; n > 0; n -= int64(len(block)) {
		if _, err := w.Write(block[:min(n, int64(len(block)))]); err != nil {
			return err
		}
	}
	return nil
}

// scriptedUpstream serves MCP over HTTP/1.1 on a raw TCP listener: it
// answers the handshake, lists the tools "fine" and name, answers a call
// of "fine" and hands a call of name to script, with the connection as w
// and the answer a well-behaved server would give; the connection closes
// after the script. It returns the server's URL.
func scriptedUpstream(t *testing.T, name string, script func(w io.Writer, answer []byte) error) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[conn] = true
			mu.Unlock()
			wg.Go(func() {
				defer conn.Close()
				serveScripted(conn, name, script)
			})
		}
	})
	return "http://" + ln.Addr().String() + "/mcp"
}

func serveScripted(conn net.Conn, name string, script func(w io.Writer, answer []byte) error) {
	br := bufio.NewReader(conn)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		if req.Method != http.MethodPost {
			io.WriteString(conn, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
			continue
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.ID == nil {
			io.WriteString(conn, "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
			continue
		}
		var result string
		switch msg.Method {
		case "initialize":
			result = `"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"scripted","version":"1"}}`
		case "tools/list":
			result = `"result":{"tools":[{"name":"fine","inputSchema":{"type":"object"}},{"name":"` + name + `","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			result = `"result":{"content":[{"type":"text","text":"fine"}]}`
		case "ping":
			result = `"result":{}`
		default:
			result = `"error":{"code":-32601,"message":"method not found"}`
		}
		answer := []byte(`{"jsonrpc":"2.0","id":` + string(msg.ID) + `,` + result + `}`)
		if msg.Method == "tools/call" && msg.Params.Name == name {
			script(conn, answer)
			return
		}
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(answer), answer)
	}
}
