package transports_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/transports"
)

// limServe serves h with NewHTTPServer(h, l) on a loopback listener capped
// at l.MaxConns, and returns its address. configure, when given, may set
// fields of the server before it serves.
func limServe(t *testing.T, h http.Handler, l transports.HTTPLimits, configure ...func(*http.Server)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := transports.NewHTTPServer(h, l)
	for _, f := range configure {
		f(srv)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(transports.LimitListener(ln, l.WithDefaults().MaxConns))
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
		<-done
	})
	return ln.Addr().String()
}

// limEcho answers every call of every connection with an empty result,
// after delay.
func limEcho(delay time.Duration) func(transports.Connection) {
	return func(c transports.Connection) {
		go func() {
			defer c.Close()
			for {
				msg, err := c.Read(context.Background())
				if err != nil {
					return
				}
				if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
					go func() {
						time.Sleep(delay)
						_ = c.Write(context.Background(), &jsonrpc.Response{ID: req.ID, Result: []byte(`{}`)})
					}()
				}
			}
		}()
	}
}

const limInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// limPOST sends an initialize POST on a new connection and returns the
// status.
func limPOST(t *testing.T, addr string) int {
	t.Helper()
	code, body, ok := limTryPOST(addr)
	if !ok {
		t.Fatal("POST failed")
	}
	if code == http.StatusOK && !strings.Contains(body, `"result"`) {
		t.Fatalf("POST answered 200 without its response: %q", body)
	}
	return code
}

// limClosedWithin reports whether the server closes c within d, reading
// (and discarding) whatever it sends meanwhile.
func limClosedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// limTrickle writes s one byte every interval until it is written, the
// write fails or stop is closed; it reports whether the write failed.
func limTrickle(c net.Conn, s string, interval time.Duration, stop <-chan struct{}) bool {
	for i := 0; i < len(s); i++ {
		if _, err := c.Write([]byte{s[i]}); err != nil {
			return true
		}
		select {
		case <-stop:
			return false
		case <-time.After(interval):
		}
	}
	return false
}

func TestHTTPServerReadHeaderTimeout(t *testing.T) {
	t.Parallel()
	srv := transports.NewStreamableServer(limEcho(0), transports.StreamableServerOptions{})
	addr := limServe(t, srv, transports.HTTPLimits{ReadHeaderTimeout: 300 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := make(chan struct{})
	defer close(stop)
	go limTrickle(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nX-Slow: "+strings.Repeat("a", 200)+"\r\n\r\n",
		100*time.Millisecond, stop)
	start := time.Now()
	if !limClosedWithin(c, 3*time.Second) {
		t.Fatal("a client trickling its headers was not disconnected within 3 s (ReadHeaderTimeout 300 ms)")
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("disconnected after %v, before ReadHeaderTimeout", d)
	}
}

func TestHTTPServerBodyReadTimeout(t *testing.T) {
	t.Parallel()
	srv := transports.NewStreamableServer(limEcho(0), transports.StreamableServerOptions{})
	addr := limServe(t, srv, transports.HTTPLimits{BodyReadTimeout: 400 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	head := "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
		"Accept: application/json, text/event-stream\r\nContent-Length: " + strconv.Itoa(len(limInit)) + "\r\n\r\n"
	if _, err := c.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go limTrickle(c, limInit, 100*time.Millisecond, stop)

	// Meanwhile, ordinary POSTs on other connections are served.
	for range 3 {
		if code := limPOST(t, addr); code != http.StatusOK {
			t.Fatalf("ordinary POST during a trickled one: status %d", code)
		}
	}
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to the trickled POST: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("trickled POST: status %d, want 408: %s", resp.StatusCode, body)
	}
	if !limClosedWithin(c, 2*time.Second) {
		t.Fatal("the connection of the trickled POST was kept open")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("trickled POST cut after %v", d)
	}
}

func TestHTTPServerBodyTimeoutSparesStreams(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	t.Run("streamable POST stream", func(t *testing.T) {
		// The response comes long after the body was read, on the
		// connection that had the body's deadline.
		srv := transports.NewStreamableServer(limEcho(5*timeout),
			transports.StreamableServerOptions{KeepAlive: -1, BodyReadTimeout: timeout})
		addr := limServe(t, srv, transports.HTTPLimits{BodyReadTimeout: timeout})
		if code := limPOST(t, addr); code != http.StatusOK {
			t.Fatalf("POST answered after the body timeout: status %d", code)
		}
	})
	t.Run("SSE GET stream", func(t *testing.T) {
		var conns = make(chan transports.Connection, 1)
		srv := transports.NewSSEServer(func(c transports.Connection) { conns <- c },
			transports.SSEServerOptions{KeepAlive: -1, BodyReadTimeout: timeout})
		addr := limServe(t, srv, transports.HTTPLimits{BodyReadTimeout: timeout})
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/sse", nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		conn := <-conns
		defer conn.Close()
		time.Sleep(5 * timeout)
		if err := conn.Write(context.Background(), &jsonrpc.Request{Method: "notifications/late"}); err != nil {
			t.Fatalf("Write after the body timeout: %v", err)
		}
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended before the late message: %v", err)
			}
			if strings.Contains(line, "notifications/late") {
				return
			}
		}
	})
}

func TestLimitListener(t *testing.T) {
	t.Parallel()
	const max = 8
	srv := transports.NewStreamableServer(limEcho(0), transports.StreamableServerOptions{})
	accepted := make(chan struct{}, 1024)
	addr := limServe(t, srv, transports.HTTPLimits{MaxConns: max}, func(s *http.Server) {
		s.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				accepted <- struct{}{}
			}
		}
	})
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	// max idle connections fill the cap; the server holds them open.
	for range max {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	for range max { // the server has accepted them
		select {
		case <-accepted:
		case <-time.After(5 * time.Second):
			t.Fatal("the server did not accept the connections within the cap")
		}
	}
	for _, c := range idle {
		if limClosedWithin(c, 20*time.Millisecond) {
			t.Fatal("a connection within the cap was closed")
		}
	}
	// 50 more are closed at once, without an answer.
	for i := range 50 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
		if !limClosedWithin(c, 2*time.Second) {
			c.Close()
			t.Fatalf("connection %d over the cap of %d was kept open", max+i+1, max)
		}
		c.Close()
	}
	// Closing some frees their slots for new clients.
	for _, c := range idle[:2] {
		c.Close()
	}
	idle = idle[2:]
	deadline := time.Now().Add(5 * time.Second)
	for {
		if code, _, ok := limTryPOST(addr); ok {
			if code != http.StatusOK {
				t.Fatalf("POST after slots were freed: status %d", code)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection was served after slots were freed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// limTryPOST is limPOST that returns the body and reports a transport
// failure instead of failing the test.
func limTryPOST(addr string) (int, string, bool) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader(limInit))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		return 0, "", false
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(body), err == nil
}

// TestWebSocketSlowHandshake checks that a WebSocket handshake cannot be
// held open by a slow peer: on the server, the upgrade request is bounded
// by ReadHeaderTimeout; on the client, by HandshakeTimeout.
func TestWebSocketSlowHandshake(t *testing.T) {
	t.Parallel()
	t.Run("server", func(t *testing.T) {
		srv := transports.NewWebSocketServer(func(c transports.Connection) { c.Close() }, transports.WebSocketServerOptions{})
		addr := limServe(t, srv, transports.HTTPLimits{ReadHeaderTimeout: 300 * time.Millisecond})
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		stop := make(chan struct{})
		defer close(stop)
		go limTrickle(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: mcp\r\n\r\n",
			100*time.Millisecond, stop)
		if !limClosedWithin(c, 3*time.Second) {
			t.Fatal("a trickled WebSocket upgrade was not cut within 3 s (ReadHeaderTimeout 300 ms)")
		}
	})
	t.Run("client", func(t *testing.T) {
		// A server that accepts connections and never answers.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
			}
		}()
		done := make(chan error, 1)
		go func() {
			tr := &transports.WebSocketClientTransport{URL: "ws://" + ln.Addr().String() + "/", HandshakeTimeout: 300 * time.Millisecond}
			conn, err := tr.Connect(context.Background())
			if err == nil {
				conn.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("Connect to a server that never answers succeeded")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Connect to a server that never answers did not return within 5 s (HandshakeTimeout 300 ms)")
		}
	})
}

// TestWebSocketSlowMessage checks that a client trickling a message has
// its connection closed after the message read timeout, and that the wait
// between messages is not bounded by it.
func TestWebSocketSlowMessage(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	srv := transports.NewWebSocketServer(limEcho(0), transports.WebSocketServerOptions{DisableCompression: true})
	addr := limServe(t, srv, transports.HTTPLimits{BodyReadTimeout: timeout})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Write([]byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: mcp\r\n\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("handshake: %v %v", resp, err)
	}
	// A whole message after waiting longer than the timeout is answered.
	time.Sleep(3 * timeout)
	if _, err := c.Write(append(limFrameHeader(len(limInit)), limInit...)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.Peek(2); err != nil {
		t.Fatalf("no answer to a whole message after an idle wait: %v", err)
	}
	// A trickled one closes the connection.
	msg := strings.Repeat(" ", 200) + limInit
	if _, err := c.Write(limFrameHeader(len(msg))); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go limTrickle(c, msg, 50*time.Millisecond, stop)
	_, _ = br.Discard(br.Buffered())
	start := time.Now()
	if !limClosedWithin(c, 4*time.Second) {
		t.Fatal("a trickled message was still being accepted after 4 s (timeout 300 ms)")
	}
	if d := time.Since(start); d < timeout/2 {
		t.Fatalf("the connection was closed after %v, before the timeout", d)
	}
}

// limFrameHeader returns the header of a final, masked text frame of n
// bytes with the zero masking key (the payload goes as it is).
func limFrameHeader(n int) []byte {
	if n < 126 {
		return []byte{0x81, 0x80 | byte(n), 0, 0, 0, 0}
	}
	return []byte{0x81, 0x80 | 126, byte(n >> 8), byte(n), 0, 0, 0, 0}
}

// TestPerAddressCap: one client address cannot take every slot: past
// MaxConnsPerIP its connections are closed at once, while a client from
// another address is served.
func TestPerAddressCap(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := transports.HTTPLimits{MaxConns: 16, MaxConnsPerIP: 4}
	srv := transports.NewHTTPServer(transports.NewStreamableServer(limEcho(0), transports.StreamableServerOptions{}), l)
	go srv.Serve(l.Listener(ln))
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()
	attacker := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 4 {
		c, err := attacker.Dial("tcp", addr)
		if err != nil {
			t.Skipf("cannot dial from 127.0.0.2 here: %v", err)
		}
		// A request the transport reads the body of (a refused one is
		// closed at once), and never the rest of it.
		c.Write([]byte("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{"))
		held = append(held, c)
	}
	time.Sleep(50 * time.Millisecond) // accepted; nothing else to wait on
	for _, c := range held {
		if limClosedWithin(c, 20*time.Millisecond) {
			t.Fatal("a connection within the per-address cap was closed")
		}
	}
	c, err := attacker.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !limClosedWithin(c, 2*time.Second) {
		t.Fatal("a fifth connection from one address, over its cap of 4, was kept open")
	}
	if code, _, ok := limTryPOST(addr); !ok || code != http.StatusOK {
		t.Fatalf("a client from another address while one address is at its cap: %d %v", code, ok)
	}
}

// TestHTTPServerEarlyRefusalSlowBody: a request refused before its body
// is read (here 401) whose body trickles gets its answer at once and its
// connection closed, instead of net/http waiting for the rest of the body
// with no deadline.
func TestHTTPServerEarlyRefusalSlowBody(t *testing.T) {
	t.Parallel()
	refuse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
	for _, tc := range []struct {
		name    string
		limits  transports.HTTPLimits
		closeBy time.Duration
	}{
		{"default limits", transports.HTTPLimits{}, 2 * time.Second},
		{"short body_read_timeout", transports.HTTPLimits{BodyReadTimeout: 300 * time.Millisecond}, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := limServe(t, refuse, tc.limits)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			const body = 140
			head := "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(body) + "\r\n\r\n{"
			if _, err := c.Write([]byte(head)); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			go limTrickle(c, strings.Repeat(" ", body-1), 100*time.Millisecond, stop)
			start := time.Now()
			_ = c.SetReadDeadline(time.Now().Add(tc.closeBy))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer within %v to a refused request with a trickled body: %v", tc.closeBy, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", resp.StatusCode)
			}
			if !limClosedWithin(c, tc.closeBy) {
				t.Fatalf("the connection was still open %v after the refusal while its body trickled", tc.closeBy)
			}
			t.Logf("answered and closed after %v", time.Since(start).Round(time.Millisecond))
		})
	}
	t.Run("a body sent at once keeps its connection", func(t *testing.T) {
		addr := limServe(t, refuse, transports.HTTPLimits{})
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
		br := bufio.NewReader(c)
		for i := range 2 {
			if _, err := c.Write([]byte(req)); err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("request %d on the same connection: %v", i, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// TestHTTPServerMaxHeaderBytes: request headers over MaxHeaderBytes (64 KiB
// by default, not net/http's 1 MiB) get 431.
func TestHTTPServerMaxHeaderBytes(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for _, tc := range []struct {
		name   string
		limits transports.HTTPLimits
		header int
		want   int
	}{
		{"default, small", transports.HTTPLimits{}, 4 << 10, http.StatusOK},
		{"default, 100 KiB", transports.HTTPLimits{}, 100 << 10, http.StatusRequestHeaderFieldsTooLarge},
		{"8 KiB limit, 16 KiB", transports.HTTPLimits{MaxHeaderBytes: 8 << 10}, 16 << 10, http.StatusRequestHeaderFieldsTooLarge},
		{"256 KiB limit, 100 KiB", transports.HTTPLimits{MaxHeaderBytes: 256 << 10}, 100 << 10, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := limServe(t, ok, tc.limits)
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
			req.Header.Set("X-Big", strings.Repeat("a", tc.header))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}
