package h1

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// conn is one keep-alive connection; it belongs to one request at a time
// (from get to the end of the response body), or to the idle pool.
type conn struct {
	nc        net.Conn
	addr      string
	br        *bufio.Reader
	idleSince time.Time
}

// aLongTimeAgo is a deadline in the past: it makes blocked I/O return.
var aLongTimeAgo = time.Unix(1, 0)

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledBuf = 64<<10 + 4096

// exchange writes req with its body (read whole) and reads the
// response head. Its body is read on the caller's goroutine; the
// connection goes back to the pool at its end.
func (c *conn) exchange(ctx context.Context, t *Transport, req *http.Request, body []byte) (*http.Response, error) {
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { c.nc.SetDeadline(aLongTimeAgo) })
	}
	fail := func(err error) (*http.Response, error) {
		if stop != nil {
			stop()
		}
		c.nc.Close()
		return nil, err
	}
	gz, err := c.writeRequest(req, body)
	if err != nil {
		return fail(err)
	}
	resp, err := readResponse(c.br, req)
	if err != nil {
		return fail(err)
	}
	b := &respBody{rc: resp.Body, c: c, t: t, ctx: ctx, stop: stop, keep: !resp.Close}
	if resp.Body == http.NoBody {
		b.release(true)
		return resp, nil
	}
	resp.Body = b
	if gz && strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.Uncompressed = true
		resp.Body = &gzipBody{body: b}
	}
	return resp, nil
}

// writeRequest writes req and its body (read whole) in one write, and
// reports whether it asked for gzip (as net/http does when the caller did
// not say which encodings it accepts).
func (c *conn) writeRequest(req *http.Request, body []byte) (bool, error) {
	bp := bufPool.Get().(*[]byte)
	buf, gz := appendRequest((*bp)[:0], req, body)
	n, err := c.nc.Write(buf)
	if cap(buf) <= maxPooledBuf {
		*bp = buf[:0]
		bufPool.Put(bp)
	}
	if err != nil {
		closeBody(req)
		if n == 0 {
			return gz, nothingWritten{err}
		}
		return gz, err
	}
	return gz, nil
}

// appendRequest appends the request line, headers and, when read whole,
// the body of req to b.
func appendRequest(b []byte, req *http.Request, body []byte) ([]byte, bool) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, req.URL.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	h := req.Header
	for k, vs := range h {
		switch k {
		case "Host", "Content-Length":
			continue
		}
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, strings.Trim(v, " \t")...)
			b = append(b, "\r\n"...)
		}
	}
	if _, ok := h["User-Agent"]; !ok {
		b = append(b, "User-Agent: Go-http-client/1.1\r\n"...)
	}
	switch n := req.ContentLength; {
	case n > 0:
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, n, 10)
		b = append(b, "\r\n"...)
	case method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch:
		b = append(b, "Content-Length: 0\r\n"...)
	}
	gz := false
	if _, ok := h["Accept-Encoding"]; !ok && len(h["Range"]) == 0 && method != http.MethodHead {
		b = append(b, "Accept-Encoding: gzip\r\n"...)
		gz = true
	}
	b = append(b, "\r\n"...)
	return append(b, body...), gz
}

// readResponse reads the response head, skipping informational (1xx)
// responses.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("h1: unexpected 101 Switching Protocols")
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			continue
		}
		return resp, nil
	}
}

// respBody is a response body read from its connection; at its end the
// connection goes back to the pool, unless the server or a cancellation
// ended it or the body was closed before its end.
type respBody struct {
	rc   io.ReadCloser
	c    *conn
	t    *Transport
	ctx  context.Context
	stop func() bool // stops the cancellation of the exchange; nil: none
	keep bool        // the server keeps the connection open

	mu   sync.Mutex
	done bool
}

func (b *respBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.release(true)
	case err != nil:
		if cerr := b.ctx.Err(); cerr != nil {
			err = cerr
		}
		b.release(false)
	}
	return n, err
}

// Close ends the body; a connection whose body was not read to its end
// is closed.
func (b *respBody) Close() error {
	b.release(false)
	return nil
}

// release ends the exchange once: the connection is kept when the body
// was read to its end (eof) and nothing else ended it.
func (b *respBody) release(eof bool) {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return
	}
	b.done = true
	b.mu.Unlock()
	fired := b.stop != nil && !b.stop()
	if eof && b.keep && !fired && b.c.br.Buffered() == 0 {
		b.t.put(b.c)
		return
	}
	b.c.nc.Close()
}

// gzipBody decompresses a gzip response body, as net/http does for
// requests it asked gzip for.
type gzipBody struct {
	body *respBody
	zr   *gzip.Reader
	err  error
}

func (g *gzipBody) Read(p []byte) (int, error) {
	if g.zr == nil && g.err == nil {
		g.zr, g.err = gzip.NewReader(g.body)
	}
	if g.err != nil {
		return 0, g.err
	}
	return g.zr.Read(p)
}

func (g *gzipBody) Close() error { return g.body.Close() }
