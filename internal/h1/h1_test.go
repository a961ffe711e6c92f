package h1

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// server is a real HTTP server on 127.0.0.1 that counts the connections
// it accepted.
type server struct {
	*httptest.Server
	conns atomic.Int64
}

func newServer(t testing.TB, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func newClient(t testing.TB) (*http.Client, *Transport) {
	tr := &Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, tr
}

func do(t testing.TB, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return resp, string(b)
}

func newRequest(t testing.TB, method, url, body string) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestRoundTrip checks what a server receives and what the client gets
// back, for the shapes of exchange the gateway meets.
func TestRoundTrip(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen", fmt.Sprintf("%s %s host=%s ua=%q len=%d ae=%q x=%q", r.Method, r.URL.RequestURI(), r.Host,
			r.UserAgent(), r.ContentLength, r.Header.Get("Accept-Encoding"), r.Header.Get("X-Custom")))
		switch r.URL.Path {
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/chunked":
			for i := range 3 {
				fmt.Fprintf(w, "part%d;", i)
				w.(http.Flusher).Flush()
			}
		case "/close":
			w.Header().Set("Connection", "close")
			io.WriteString(w, "bye")
		case "/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, strings.Repeat("zipped ", 100))
			zw.Close()
		case "/early":
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			io.WriteString(w, "after hints")
		default:
			w.Write(body)
		}
	})
	c, _ := newClient(t)
	for _, tt := range []struct {
		name, method, path, body string
		header                   http.Header
		host                     string
		wantStatus               int
		wantBody, wantSeen       string
	}{
		{name: "get", method: "GET", path: "/x?a=1", wantStatus: 200, wantBody: "",
			wantSeen: `GET /x?a=1 host=HOST ua="Go-http-client/1.1" len=0 ae="gzip" x=""`},
		{name: "post", method: "POST", path: "/echo", body: `{"jsonrpc":"2.0"}`, header: http.Header{"X-Custom": {"v 1"}},
			wantStatus: 200, wantBody: `{"jsonrpc":"2.0"}`,
			wantSeen: `POST /echo host=HOST ua="Go-http-client/1.1" len=17 ae="gzip" x="v 1"`},
		{name: "post without body", method: "POST", path: "/echo", wantStatus: 200,
			wantSeen: `POST /echo host=HOST ua="Go-http-client/1.1" len=0 ae="gzip" x=""`},
		{name: "host and agent set", method: "GET", path: "/", host: "mcp.example", header: http.Header{"User-Agent": {"edge"}, "Accept-Encoding": {"identity"}},
			wantStatus: 200, wantSeen: `GET / host=mcp.example ua="edge" len=0 ae="identity" x=""`},
		{name: "no content", method: "GET", path: "/empty", wantStatus: 204},
		{name: "head", method: "HEAD", path: "/echo", wantStatus: 200},
		{name: "chunked", method: "GET", path: "/chunked", wantStatus: 200, wantBody: "part0;part1;part2;"},
		{name: "connection close", method: "GET", path: "/close", wantStatus: 200, wantBody: "bye"},
		{name: "gzip", method: "GET", path: "/gzip", wantStatus: 200, wantBody: strings.Repeat("zipped ", 100)},
		{name: "early hints", method: "GET", path: "/early", wantStatus: 200, wantBody: "after hints"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(t, tt.method, s.URL+tt.path, tt.body)
			for k, v := range tt.header {
				req.Header[k] = v
			}
			req.Host = tt.host
			resp, body := do(t, c, req)
			if resp.StatusCode != tt.wantStatus || body != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
			want := strings.ReplaceAll(tt.wantSeen, "HOST", strings.TrimPrefix(s.URL, "http://"))
			if got := resp.Header.Get("X-Seen"); tt.wantSeen != "" && got != want {
				t.Errorf("server saw %s\nwant        %s", got, want)
			}
		})
	}
}

// TestKeepAlive checks that sequential requests share one connection,
// whether the body was read to its end by ReadAll, or ended exactly at
// its length.
func TestKeepAlive(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.Copy(w, r.Body) })
	c, _ := newClient(t)
	for i := range 20 {
		body := fmt.Sprintf(`{"i":%d}`, i)
		if _, got := do(t, c, newRequest(t, "POST", s.URL, body)); got != body {
			t.Fatalf("got %q, want %q", got, body)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("20 requests took %d connections, want 1", n)
	}
}

// TestKeepAliveGzip: answers the transport decompressed keep their
// connection too.
func TestKeepAliveGzip(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		io.WriteString(zw, "zipped")
		zw.Close()
	})
	c, _ := newClient(t)
	for range 5 {
		if _, got := do(t, c, newRequest(t, "GET", s.URL, "")); got != "zipped" {
			t.Fatalf("got %q", got)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("5 gzip answers took %d connections, want 1", n)
	}
}

// TestClosedIdleConnection has a server close every connection after its
// answer without saying so: the next request must notice the idle
// connection is gone and use a new one, not fail.
func TestClosedIdleConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var accepted atomic.Int64
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer nc.Close()
				req, err := http.ReadRequest(bufio.NewReader(nc))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}()
		}
	}()
	c, _ := newClient(t)
	for i := range 5 {
		_, body := do(t, c, newRequest(t, "POST", "http://"+ln.Addr().String()+"/", "x"))
		if body != "ok" {
			t.Fatalf("request %d: body %q", i, body)
		}
		time.Sleep(20 * time.Millisecond) // the server's close arrives
	}
	if n := accepted.Load(); n != 5 {
		t.Errorf("5 requests on connections closed after each: %d accepted, want 5", n)
	}
}

// TestStreamingBody checks that a response body is delivered as the
// server writes it: the server writes its second event only after the
// client has read the first.
func TestStreamingBody(t *testing.T) {
	read := make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-read:
		case <-time.After(5 * time.Second):
			return
		}
		io.WriteString(w, "data: two\n\n")
	})
	c, _ := newClient(t)
	resp, err := c.Do(newRequest(t, "POST", s.URL, "{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(read)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "\ndata: two\n\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}
}

// TestCancel checks that a cancelled request ends at once, waiting for
// its head or in its body, with the context's error, and that its
// connection is not reused.
func TestCancel(t *testing.T) {
	release := make(chan struct{})
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			io.WriteString(w, "first")
			w.(http.Flusher).Flush()
		}
		if r.URL.Path != "/ok" {
			<-release
		}
	})
	t.Cleanup(func() { close(release) }) // before the server's Close, which waits for its handlers
	c, _ := newClient(t)
	for _, path := range []string{"/head", "/body"} {
		t.Run(path, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			req := newRequest(t, "POST", s.URL+path, "{}").WithContext(ctx)
			start := time.Now()
			time.AfterFunc(50*time.Millisecond, cancel)
			resp, err := c.Do(req)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("the cancelled request took %v", d)
			}
		})
	}
	before := s.conns.Load()
	do(t, c, newRequest(t, "GET", s.URL+"/ok", ""))
	if s.conns.Load() != before+1 {
		t.Errorf("a request after two cancelled ones reused a cancelled connection")
	}
}

// TestCloseBeforeEnd checks that a body closed before its end closes its
// connection (the rest is never read by anyone) and the next request works.
func TestCloseBeforeEnd(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 1<<20))
	})
	c, _ := newClient(t)
	resp, err := c.Do(newRequest(t, "GET", s.URL, ""))
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(resp.Body, make([]byte, 100))
	resp.Body.Close()
	_, body := do(t, c, newRequest(t, "GET", s.URL, ""))
	if len(body) != 1<<20 {
		t.Fatalf("second body %d bytes", len(body))
	}
	if n := s.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the half-read one closed)", n)
	}
}

// TestInvalidHeader checks that a header that would change the request's
// framing is refused before anything is sent.
func TestInvalidHeader(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	c, _ := newClient(t)
	for _, h := range []http.Header{
		{"X-Evil": {"a\r\nX-Injected: 1"}},
		{"X-Evil": {"nul\x00"}},
		{"Bad Name": {"v"}},
		{"X:Colon": {"v"}},
	} {
		req := newRequest(t, "GET", s.URL, "")
		req.Header = h
		if _, err := c.Do(req); err == nil {
			t.Errorf("header %q accepted", h)
		}
	}
	if n := s.conns.Load(); n != 0 {
		t.Errorf("the server got %d connections", n)
	}
}

// countingRT counts the requests a real transport serves.
type countingRT struct {
	http.RoundTripper
	n atomic.Int64
}

func (c *countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.RoundTripper.RoundTrip(r)
}

// TestFallback checks what goes to the fallback transport: https, a
// proxy, bodies of unknown length; and that plain requests do not.
func TestFallback(t *testing.T) {
	echo := func(w http.ResponseWriter, r *http.Request) { io.Copy(w, r.Body) }
	tls := httptest.NewTLSServer(http.HandlerFunc(echo))
	t.Cleanup(tls.Close)
	plain := newServer(t, echo)
	proxy := func(r *http.Request) (*url.URL, error) {
		if r.URL.Host == "proxied.invalid" {
			return url.Parse(plain.URL) // the plain server acts as the proxy
		}
		return nil, nil
	}
	fbTr := tls.Client().Transport.(*http.Transport).Clone()
	fbTr.Proxy = proxy
	fb := &countingRT{RoundTripper: fbTr}
	proxied := "http://proxied.invalid"
	tr := &Transport{Fallback: fb, Proxy: proxy}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	unknownLength := newRequest(t, "POST", plain.URL, "")
	unknownLength.Body = io.NopCloser(strings.NewReader("streamed"))
	unknownLength.ContentLength = -1
	for _, tt := range []struct {
		name     string
		req      *http.Request
		fallback bool
	}{
		{"plain", newRequest(t, "POST", plain.URL, "hi"), false},
		{"https", newRequest(t, "POST", tls.URL, "hi"), true},
		{"proxy", newRequest(t, "POST", proxied, "hi"), true},
		{"unknown length", unknownLength, true},
		{"large body", newRequest(t, "POST", plain.URL, strings.Repeat("0123456789", 20000)), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := fb.n.Load()
			do(t, c, tt.req)
			if got := fb.n.Load() > before; got != tt.fallback {
				t.Errorf("served by the fallback: %v, want %v", got, tt.fallback)
			}
		})
	}
}

// TestHammer runs many goroutines' requests through one transport and
// checks every answer is its own request's.
func TestHammer(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "data: %s\n\n", b)
	})
	c, tr := newClient(t)
	tr.MaxIdlePerHost = 4 // fewer idle than busy: connections are closed and opened
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				body := fmt.Sprintf("g%d-%d", g, i)
				resp, err := c.Post(s.URL, "application/json", bytes.NewReader([]byte(body)))
				if err != nil {
					errs <- err
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(got) != "data: "+body+"\n\n" {
					errs <- fmt.Errorf("%s: got %q, %v", body, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestIdleReaped checks that idle connections are closed after the idle
// timeout.
func TestIdleReaped(t *testing.T) {
	closed := make(chan struct{}, 1)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed <- struct{}{}
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	tr := &Transport{IdleTimeout: 50 * time.Millisecond}
	do(t, &http.Client{Transport: tr}, newRequest(t, "GET", s.URL, ""))
	select {
	case <-closed:
	case <-time.After(3 * time.Second):
		t.Fatal("the idle connection was not closed")
	}
}

// FuzzAppendRequest writes requests with arbitrary header values: a
// request checkHeaders accepts must parse back as the same request.
func FuzzAppendRequest(f *testing.F) {
	f.Add("X-Key", "value", "/path?q=1", "body")
	f.Add("Mcp-Param-Region", " eu-west \t", "/", "")
	f.Add("X-Evil", "a\r\nX-Injected: 1", "/", "")
	f.Add("Bad Name", "v", "/", "x")
	f.Add("X-Utf8", "caf\xc3\xa9 \x80", "/%20a", "{}")
	f.Fuzz(func(t *testing.T, key, value, path, body string) {
		u, err := url.Parse("http://127.0.0.1:1" + path)
		if err != nil || u.Host != "127.0.0.1:1" || key == "Host" || key == "Content-Length" || key == "User-Agent" || key == "Accept-Encoding" {
			return
		}
		req, err := http.NewRequest("POST", u.String(), strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header[key] = []string{value}
		if checkHeaders(req.Header) != nil {
			return
		}
		b, _ := appendRequest(nil, req, []byte(body))
		got, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			t.Fatalf("accepted header %q: %q does not parse: %v", key, b, err)
		}
		if v := got.Header.Get(key); v != strings.Trim(value, " \t") {
			t.Fatalf("header %q: read %q, want %q", key, v, strings.Trim(value, " \t"))
		}
		gotBody, _ := io.ReadAll(got.Body)
		if string(gotBody) != body || got.URL.RequestURI() != u.RequestURI() {
			t.Fatalf("read %s %q, want %s %q", got.URL.RequestURI(), gotBody, u.RequestURI(), body)
		}
	})
}
