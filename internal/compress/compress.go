// Package compress is HTTP middleware that compresses JSON responses with
// zstd or gzip.
//
// A response is compressed only when the client accepts zstd or gzip, the
// response declares a JSON Content-Type, has no Content-Encoding, and its
// body reaches Options.MinSize bytes before the handler flushes or returns.
// The middleware buffers up to MinSize bytes to decide; smaller bodies are
// sent as they are, with a Content-Length. Streams (text/event-stream, or
// any response flushed before MinSize) are never compressed and keep
// flushing incrementally. HEAD requests and protocol upgrades such as
// WebSocket pass through untouched.
package compress

import (
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// DefaultMinSize is the body size from which responses are compressed when
// Options.MinSize is 0.
const DefaultMinSize = 1024

// zstdWindow bounds the zstd window, and so each pooled encoder's memory,
// well under the 8 MB that HTTP zstd decoders must support.
const zstdWindow = 1 << 20

// Level is a compression level.
type Level int

// Compression levels. Each maps to the corresponding level of gzip and of
// zstd.
const (
	LevelDefault Level = iota
	LevelFastest
	LevelBetter
	LevelBest
)

// Options configures the middleware.
type Options struct {
	// MinSize is the smallest body, in bytes, that is compressed; 0 means
	// DefaultMinSize.
	MinSize int
	// Level is the compression level.
	Level Level
}

// coding is a content coding the middleware can produce.
type coding int

const (
	identity coding = iota
	codingGzip
	codingZstd
)

func (c coding) String() string {
	switch c {
	case codingGzip:
		return "gzip"
	case codingZstd:
		return "zstd"
	}
	return "identity"
}

// encoder is the common interface of *gzip.Writer and *zstd.Encoder.
type encoder interface {
	io.Writer
	Flush() error
	Close() error
	Reset(io.Writer)
}

// compressor holds the pooled encoders of one middleware.
type compressor struct {
	minSize int
	pools   [3]sync.Pool // indexed by coding
	// kept holds a few encoders per coding that, unlike the pool's, survive
	// garbage collection: a new gzip or zstd encoder allocates about 1 MB,
	// and under load GC empties the pool between two large responses.
	kept [3]chan encoder
}

// keptEncoders is how many encoders per coding survive garbage collection.
const keptEncoders = 2

// holdBufs recycles the buffers that hold the start of a body (MinSize
// bytes) while the middleware decides.
var holdBufs sync.Pool

// Middleware returns next wrapped with response compression.
func Middleware(next http.Handler, opts Options) http.Handler {
	c := newCompressor(opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead || r.Header.Get("Upgrade") != "" {
			next.ServeHTTP(w, r)
			return
		}
		enc := negotiate(r.Header.Values("Accept-Encoding"))
		if enc == identity {
			next.ServeHTTP(w, r)
			return
		}
		cw := &responseWriter{rw: w, c: c, coding: enc}
		next.ServeHTTP(cw, r)
		cw.finish()
	})
}

func newCompressor(opts Options) *compressor {
	c := &compressor{minSize: opts.MinSize}
	if c.minSize <= 0 {
		c.minSize = DefaultMinSize
	}
	for i := range c.kept {
		c.kept[i] = make(chan encoder, keptEncoders)
	}
	gzipLevel := gzip.DefaultCompression
	zstdLevel := zstd.SpeedDefault
	switch opts.Level {
	case LevelFastest:
		gzipLevel, zstdLevel = gzip.BestSpeed, zstd.SpeedFastest
	case LevelBetter:
		gzipLevel, zstdLevel = 7, zstd.SpeedBetterCompression
	case LevelBest:
		gzipLevel, zstdLevel = gzip.BestCompression, zstd.SpeedBestCompression
	}
	c.pools[codingGzip].New = func() any {
		w, err := gzip.NewWriterLevel(io.Discard, gzipLevel)
		if err != nil {
			panic("compress: gzip level " + strconv.Itoa(gzipLevel) + ": " + err.Error()) // unreachable: levels are constants
		}
		return w
	}
	c.pools[codingZstd].New = func() any {
		w, err := zstd.NewWriter(io.Discard,
			zstd.WithEncoderLevel(zstdLevel),
			zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(zstdWindow))
		if err != nil {
			panic("compress: zstd encoder: " + err.Error()) // unreachable: options are constants
		}
		return w
	}
	return c
}

func (c *compressor) get(cd coding, w io.Writer) encoder {
	var e encoder
	select {
	case e = <-c.kept[cd]:
	default:
		e = c.pools[cd].Get().(encoder)
	}
	e.Reset(w)
	return e
}

func (c *compressor) put(cd coding, e encoder) {
	e.Reset(io.Discard) // drop the reference to the response
	select {
	case c.kept[cd] <- e:
	default:
		c.pools[cd].Put(e)
	}
}

// compressible reports whether the media type of contentType is JSON.
func compressible(contentType string) bool {
	switch contentType {
	case "":
		return false
	case "application/json", "application/json; charset=utf-8":
		return true // the common case, without parsing
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	switch mt {
	case "application/json", "text/json", "application/x-ndjson", "application/jsonl":
		return true
	}
	return strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// negotiate picks the coding for the Accept-Encoding header values: zstd or
// gzip, whichever has the higher q-value (zstd on a tie), or identity when
// neither is acceptable.
func negotiate(values []string) coding {
	qZstd, qGzip, qAny := -1.0, -1.0, -1.0
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			name, params, _ := strings.Cut(part, ";")
			name = strings.ToLower(strings.TrimSpace(name))
			q := 1.0
			for p := range strings.SplitSeq(params, ";") {
				k, val, ok := strings.Cut(p, "=")
				if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
					continue
				}
				f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
				if err != nil || f < 0 || f > 1 || math.IsNaN(f) {
					f = 0 // a malformed q-value makes the coding unacceptable
				}
				q = f
			}
			switch name {
			case "zstd":
				qZstd = max(qZstd, q)
			case "gzip", "x-gzip":
				qGzip = max(qGzip, q)
			case "*":
				qAny = max(qAny, q)
			}
		}
	}
	if qZstd < 0 {
		qZstd = qAny
	}
	if qGzip < 0 {
		qGzip = qAny
	}
	switch {
	case qZstd <= 0 && qGzip <= 0:
		return identity
	case qZstd >= qGzip:
		return codingZstd
	default:
		return codingGzip
	}
}

// writerState is where a responseWriter is in deciding about compression.
type writerState int

const (
	buffering   writerState = iota // undecided; body bytes are held in buf
	passthrough                    // writes go straight to the response
	compressing                    // writes go through enc
)

// responseWriter buffers the start of a response to decide whether to
// compress it.
type responseWriter struct {
	rw     http.ResponseWriter
	c      *compressor
	coding coding

	state       writerState
	wroteHeader bool // the handler has set the final status
	status      int
	buf         []byte
	hold        *[]byte // where buf came from (holdBufs), to give it back
	enc         encoder
}

// Header returns the response header.
func (w *responseWriter) Header() http.Header { return w.rw.Header() }

// Unwrap returns the underlying ResponseWriter, for http.ResponseController.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.rw }

// WriteHeader records the status; the header is sent once the middleware
// has decided whether to compress.
func (w *responseWriter) WriteHeader(code int) {
	if w.state != buffering {
		w.rw.WriteHeader(code) // let net/http report a superfluous call
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		w.rw.WriteHeader(code) // informational responses go out at once
		return
	}
	if w.wroteHeader {
		return
	}
	w.wroteHeader, w.status = true, code

	h := w.rw.Header()
	if !bodyAllowed(code) || code == http.StatusPartialContent ||
		h.Get("Content-Encoding") != "" || !compressible(h.Get("Content-Type")) ||
		strings.Contains(strings.ToLower(h.Get("Cache-Control")), "no-transform") {
		w.startPassthrough()
		return
	}
	// The body's encoding now depends on Accept-Encoding.
	if len(h["Vary"]) == 0 {
		h["Vary"] = varyAcceptEncoding // shared: len == cap, so an append copies
	} else {
		h.Add("Vary", "Accept-Encoding")
	}
	if cl := h.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n < int64(w.c.minSize) {
			w.startPassthrough()
		}
	}
}

var varyAcceptEncoding = []string{"Accept-Encoding"}

func bodyAllowed(code int) bool {
	return code >= 200 && code != http.StatusNoContent && code != http.StatusNotModified
}

// Write buffers p until the body reaches MinSize, then compresses.
func (w *responseWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader && w.state == buffering {
		w.WriteHeader(http.StatusOK)
	}
	switch w.state {
	case passthrough:
		return w.rw.Write(p)
	case compressing:
		return w.enc.Write(p)
	}
	if len(w.buf)+len(p) < w.c.minSize {
		if w.buf == nil {
			w.hold, _ = holdBufs.Get().(*[]byte)
			if w.hold == nil || cap(*w.hold) < w.c.minSize {
				b := make([]byte, 0, w.c.minSize)
				w.hold = &b
			}
			w.buf = (*w.hold)[:0]
		}
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	if err := w.startCompressing(); err != nil {
		return 0, err
	}
	return w.enc.Write(p)
}

// Flush sends everything written so far. A response flushed before it
// reaches MinSize is sent uncompressed.
func (w *responseWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush returning the error, for http.ResponseController.
func (w *responseWriter) FlushError() error {
	switch w.state {
	case buffering:
		if !w.wroteHeader {
			w.WriteHeader(http.StatusOK)
		}
		if w.state == buffering {
			if err := w.startPassthrough(); err != nil {
				return err
			}
		}
	case compressing:
		if err := w.enc.Flush(); err != nil {
			return err
		}
	}
	return http.NewResponseController(w.rw).Flush()
}

// startPassthrough sends the held status and body bytes uncompressed.
func (w *responseWriter) startPassthrough() error {
	w.state = passthrough
	w.rw.WriteHeader(w.status)
	if len(w.buf) == 0 {
		return nil
	}
	buf := w.buf
	w.buf = nil
	_, err := w.rw.Write(buf)
	w.putHold()
	return err
}

// putHold recycles the buffer of Write once its bytes have been written.
func (w *responseWriter) putHold() {
	if w.hold == nil || cap(*w.hold) > 64<<10 {
		return
	}
	*w.hold = (*w.hold)[:0]
	holdBufs.Put(w.hold)
	w.hold = nil
}

// startCompressing sends the header for a compressed body and the held
// body bytes through a pooled encoder.
func (w *responseWriter) startCompressing() error {
	w.state = compressing
	h := w.rw.Header()
	h.Set("Content-Encoding", w.coding.String())
	h.Del("Content-Length")
	h.Del("Accept-Ranges")
	if etag := h.Get("ETag"); etag != "" && !strings.HasPrefix(etag, "W/") {
		// The compressed representation is not byte-identical.
		h.Set("ETag", "W/"+etag)
	}
	w.rw.WriteHeader(w.status)
	w.enc = w.c.get(w.coding, w.rw)
	if len(w.buf) == 0 {
		return nil
	}
	buf := w.buf
	w.buf = nil
	_, err := w.enc.Write(buf)
	w.putHold()
	return err
}

// autoContentLength: net/http gives a body shorter than this, written
// before the handler returns, a Content-Length itself (its chunking
// writer buffers 2048 bytes).
const autoContentLength = 2048

// finish completes the response after the handler returns.
func (w *responseWriter) finish() {
	switch w.state {
	case buffering:
		if !w.wroteHeader {
			return // nothing written: net/http sends an empty 200
		}
		if h := w.rw.Header(); h.Get("Content-Length") == "" && len(w.buf) >= autoContentLength {
			h.Set("Content-Length", strconv.Itoa(len(w.buf)))
		}
		_ = w.startPassthrough() // a failed write means the client is gone
	case compressing:
		_ = w.enc.Close()
		w.c.put(w.coding, w.enc)
		w.enc = nil
	}
}
