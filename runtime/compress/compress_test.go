package compress

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// gzJSONBody returns a JSON array of at least n bytes.
func gzJSONBody(n int) []byte {
	b := []byte{'['}
	for i := 0; len(b) < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"id":%d,"name":"tool-%d","tags":["alpha","beta"],"score":%.4f}`, i, i*7%1000, float64(i)/7)
	}
	return append(b, ']')
}

// gzServe starts Handler(h) on a real listener and returns a client
// that does not decompress transparently.
func gzServe(t *testing.T, h http.HandlerFunc) (*httptest.Server, *http.Client) {
	t.Helper()
	srv := httptest.NewServer(Handler(h))
	t.Cleanup(srv.Close)
	return srv, &http.Client{Transport: &http.Transport{DisableCompression: true}}
}

func gzGet(t *testing.T, c *http.Client, method, url, acceptEncoding string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// decode returns a reader of the decoded body of resp.
func gzDecode(t *testing.T, resp *http.Response) io.Reader {
	t.Helper()
	switch ce := resp.Header.Get("Content-Encoding"); ce {
	case "":
		return resp.Body
	case "gzip":
		r, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatalf("gzip header: %v", err)
		}
		return r
	case "zstd":
		d, err := zstd.NewReader(resp.Body, zstd.WithDecoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		return d
	default:
		t.Fatalf("unexpected Content-Encoding %q", ce)
		return nil
	}
}

func gzReadBody(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(gzDecode(t, resp))
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return b
}

func gzHasVary(h http.Header) bool {
	for _, v := range h.Values("Vary") {
		for part := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), "Accept-Encoding") {
				return true
			}
		}
	}
	return false
}

func TestCompressNegotiation(t *testing.T) {
	t.Parallel()
	big := gzJSONBody(64 << 10)
	srv, c := gzServe(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Write(big)
	})
	tests := []struct {
		acceptEncoding, want string
	}{
		{"gzip", "gzip"},
		{"zstd", "zstd"},
		{"gzip, zstd", "zstd"},
		{"zstd;q=0.5, gzip", "gzip"},
		{"br, gzip;q=0.8, zstd;q=0.8", "zstd"},
		{"zstd;q=0, gzip", "gzip"},
		{"gzip;q=0", ""},
		{"gzip;q=0, zstd;q=0", ""},
		{"*", "zstd"},
		{"*;q=0", ""},
		{"gzip;q=0, *", "zstd"},
		{"zstd;q=0, *;q=0.1", "gzip"},
		{"identity", ""},
		{"br", ""},
		{"GZIP;Q=0.5", "gzip"},
		{"x-gzip", ""}, // gzhttp knows gzip by its name only
		{"gzip;q=bogus", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.acceptEncoding, func(t *testing.T) {
			resp := gzGet(t, c, http.MethodGet, srv.URL, tt.acceptEncoding)
			if ce := resp.Header.Get("Content-Encoding"); ce != tt.want {
				t.Fatalf("Content-Encoding = %q, want %q", ce, tt.want)
			}
			if tt.want != "" {
				if resp.ContentLength != -1 || resp.Header.Get("Content-Length") != "" {
					t.Errorf("compressed response has Content-Length %d", resp.ContentLength)
				}
				if !gzHasVary(resp.Header) {
					t.Errorf("Vary = %q, want Accept-Encoding", resp.Header.Values("Vary"))
				}
			}
			if got := gzReadBody(t, resp); !bytes.Equal(got, big) {
				t.Fatalf("decoded body differs: %d bytes, want %d", len(got), len(big))
			}
		})
	}
}

func TestCompressWhat(t *testing.T) {
	t.Parallel()
	big := gzJSONBody(8 << 10)
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    string // Content-Encoding
		body    []byte
		length  int64 // expected Content-Length, -1 for any consistent one
	}{
		{"small JSON passes with Content-Length", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"ok":true}`))
		}, "", []byte(`{"ok":true}`), 11},
		{"JSON in small writes", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			for i := 0; i < len(big); i += 100 {
				w.Write(big[i:min(i+100, len(big))])
			}
		}, "zstd", big, -1},
		{"exactly MinSize is compressed", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(big[:MinSize])
		}, "zstd", big[:MinSize], -1},
		{"one byte under MinSize is not", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(big[:MinSize-1])
		}, "", big[:MinSize-1], MinSize - 1},
		{"problem+json", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write(big)
		}, "zstd", big, -1},
		{"plain text is not", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Write(big)
		}, "", big, -1},
		{"no Content-Type is not", func(w http.ResponseWriter, r *http.Request) {
			w.Write(big)
		}, "", big, -1},
		{"existing Content-Encoding is kept", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "br")
			w.Write(big)
		}, "br", big, -1},
		{"large declared Content-Length is replaced", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", fmt.Sprint(len(big)))
			w.Write(big)
		}, "zstd", big, -1},
		{"small declared Content-Length passes", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "2")
			w.Write([]byte("{}"))
		}, "", []byte("{}"), 2},
		{"partial content is not", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-%d/%d", len(big)-1, len(big)*2))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(big)
		}, "", big, -1},
		{"empty body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
		}, "", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, c := gzServe(t, tt.handler)
			resp := gzGet(t, c, http.MethodGet, srv.URL, "zstd, gzip")
			if ce := resp.Header.Get("Content-Encoding"); ce != tt.want {
				t.Fatalf("Content-Encoding = %q, want %q", ce, tt.want)
			}
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.length >= 0 && resp.ContentLength != tt.length {
				t.Errorf("Content-Length = %d, want %d", resp.ContentLength, tt.length)
			}
			if resp.ContentLength >= 0 && resp.ContentLength != int64(len(raw)) {
				t.Errorf("Content-Length = %d but %d bytes on the wire", resp.ContentLength, len(raw))
			}
			got := raw
			if tt.want != "br" {
				resp.Body = io.NopCloser(bytes.NewReader(raw))
				got = gzReadBody(t, resp)
			}
			if !bytes.Equal(got, tt.body) {
				t.Fatalf("body = %d bytes, want %d", len(got), len(tt.body))
			}
		})
	}
}

func TestCompressBodyless(t *testing.T) {
	t.Parallel()
	big := gzJSONBody(4 << 10)
	tests := []struct {
		name   string
		method string
		status int
	}{
		{"HEAD", http.MethodHead, http.StatusOK},
		{"204", http.MethodGet, http.StatusNoContent},
		{"304", http.MethodGet, http.StatusNotModified},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, c := gzServe(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("ETag", `"e"`)
				if tt.status == http.StatusOK {
					w.Header().Set("Content-Length", fmt.Sprint(len(big)))
				}
				w.WriteHeader(tt.status)
				if tt.method == http.MethodHead {
					w.Write(big) // discarded by net/http
				}
			})
			resp := gzGet(t, c, tt.method, srv.URL, "gzip, zstd")
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			if ce := resp.Header.Get("Content-Encoding"); ce != "" {
				t.Errorf("Content-Encoding = %q on a bodyless response", ce)
			}
			if resp.Header.Get("ETag") != `"e"` {
				t.Errorf("ETag changed to %q", resp.Header.Get("ETag"))
			}
			if tt.method == http.MethodHead && resp.ContentLength != int64(len(big)) {
				t.Errorf("HEAD Content-Length = %d, want %d", resp.ContentLength, len(big))
			}
			if b, _ := io.ReadAll(resp.Body); len(b) != 0 {
				t.Errorf("body of %d bytes", len(b))
			}
		})
	}
}

// streamHandler writes two chunks, flushing after the first and waiting
// until the client has read it before writing the second.
func gzStreamHandler(t *testing.T, contentType string, first, second []byte, flush func(http.ResponseWriter) error) (http.HandlerFunc, chan struct{}) {
	ack := make(chan struct{})
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Write(first)
		if err := flush(w); err != nil {
			t.Errorf("flush: %v", err)
			return
		}
		select {
		case <-ack:
		case <-r.Context().Done():
			return
		}
		w.Write(second)
	}, ack
}

func TestCompressStreaming(t *testing.T) {
	t.Parallel()
	flusher := func(w http.ResponseWriter) error {
		f, ok := w.(http.Flusher)
		if !ok {
			return fmt.Errorf("%T is not an http.Flusher", w)
		}
		f.Flush()
		return nil
	}
	controller := func(w http.ResponseWriter) error { return http.NewResponseController(w).Flush() }
	big := gzJSONBody(4 << 10)
	tests := []struct {
		name          string
		contentType   string
		first, second []byte
		flush         func(http.ResponseWriter) error
		want          string
	}{
		{"SSE via Flusher", "text/event-stream", []byte("data: one\n\n"), []byte("data: two\n\n"), flusher, ""},
		{"SSE via ResponseController", "text/event-stream", []byte("data: one\n\n"), []byte("data: two\n\n"), controller, ""},
		{"JSON flushed before MinSize", "application/json", []byte(`{"partial":`), []byte(`true}`), controller, "gzip"},
		{"compressed JSON flushed after MinSize", "application/json", big, []byte(`{"tail":true}`), flusher, "gzip"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ack := gzStreamHandler(t, tt.contentType, tt.first, tt.second, tt.flush)
			srv, c := gzServe(t, h)
			resp := gzGet(t, c, http.MethodGet, srv.URL, "gzip")
			if ce := resp.Header.Get("Content-Encoding"); ce != tt.want {
				t.Fatalf("Content-Encoding = %q, want %q", ce, tt.want)
			}
			body := gzDecode(t, resp)
			// The first chunk must arrive while the handler is still
			// waiting: this read would block forever otherwise.
			got := make([]byte, len(tt.first))
			if _, err := io.ReadFull(body, got); err != nil || !bytes.Equal(got, tt.first) {
				t.Fatalf("first chunk = %q, %v", got, err)
			}
			close(ack)
			rest, err := io.ReadAll(body)
			if err != nil || !bytes.Equal(rest, tt.second) {
				t.Fatalf("second chunk = %q, %v", rest, err)
			}
		})
	}
}

func TestCompressResponseControllerUnwrap(t *testing.T) {
	t.Parallel()
	srv, c := gzServe(t, func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("SetWriteDeadline through the middleware: %v", err)
		}
		if err := rc.EnableFullDuplex(); err != nil {
			t.Errorf("EnableFullDuplex through the middleware: %v", err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(gzJSONBody(2048))
	})
	resp := gzGet(t, c, http.MethodGet, srv.URL, "zstd")
	if resp.Header.Get("Content-Encoding") != "zstd" {
		t.Fatal("not compressed")
	}
	if !json.Valid(gzReadBody(t, resp)) {
		t.Fatal("decoded body is not JSON")
	}
}

// rawExchange sends a raw HTTP/1.1 request and returns the connection's
// reader after the response head.
func gzRawExchange(t *testing.T, addr, request string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return conn, br, resp
}

func TestCompressHijack(t *testing.T) {
	t.Parallel()
	echo := func(hijack func(http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			conn, brw, err := hijack(w)
			if err != nil {
				t.Errorf("hijack: %v", err)
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			defer conn.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			brw.Flush()
			line, _ := brw.ReadString('\n')
			brw.WriteString("echo " + line)
			brw.Flush()
		}
	}
	direct := func(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
		hj, ok := w.(http.Hijacker)
		if !ok {
			return nil, nil, fmt.Errorf("%T is not an http.Hijacker", w)
		}
		return hj.Hijack()
	}
	controller := func(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
		return http.NewResponseController(w).Hijack()
	}
	tests := []struct {
		name    string
		hijack  func(http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error)
		upgrade bool
	}{
		{"upgrade request untouched", direct, true},
		{"ResponseController via Unwrap", controller, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := gzServe(t, echo(tt.hijack))
			req := "GET /ws HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip, zstd\r\n"
			if tt.upgrade {
				req += "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
			}
			conn, br, resp := gzRawExchange(t, srv.Listener.Addr().String(), req+"\r\n")
			if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Content-Encoding") != "" {
				t.Fatalf("status = %d, Content-Encoding = %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
			}
			io.WriteString(conn, "hello\n")
			if line, err := br.ReadString('\n'); err != nil || line != "echo hello\n" {
				t.Fatalf("echo = %q, %v", line, err)
			}
		})
	}
}
