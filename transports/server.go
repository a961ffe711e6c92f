package transports

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/budget"
	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// The plumbing shared by the HTTP server transports (streamable HTTP,
// HTTP+SSE, WebSocket): request bodies, JSON-RPC error answers, the table
// of live sessions and the inbox between HTTP handlers and Read.

const (
	// defaultMaxBody is the default cap of a POST body.
	defaultMaxBody = 4 << 20
	// defaultKeepAlive is the default silence before an SSE keepalive.
	defaultKeepAlive = 25 * time.Second
	// incomingQueue is the capacity of the queue between the HTTP handlers
	// and Read.
	incomingQueue = 64
	// streamWriteTimeout bounds one write of queued SSE events to a client.
	streamWriteTimeout = 30 * time.Second

	// codeServerError is the JSON-RPC code of transport-level rejections.
	codeServerError = -32000
)

var (
	ctJSON        = []string{"application/json"}
	ctEventStream = []string{"text/event-stream"}
	noCache       = []string{"no-cache"}
	sseKeepAlive  = []byte(": keepalive\n\n")

	// noID is the id of error answers that belong to no request (null).
	noID jsonrpc.ID
)

// decodeMessage decodes one JSON-RPC message. On failure msg is nil and status,
// code and reason describe the error response.
func decodeMessage(body []byte) (msg jsonrpc.Message, status int, code int64, reason string) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "empty request body"
	}
	if trimmed[0] == '[' {
		return nil, http.StatusBadRequest, jsonrpc.CodeInvalidRequest,
			"JSON-RPC batches are not supported: send one message per POST"
	}
	msg, err := wire.Decode(body)
	if err == nil {
		return msg, 0, 0, ""
	}
	if !json.Valid(body) {
		return nil, http.StatusBadRequest, jsonrpc.CodeParseError, fmt.Sprintf("parse error: %v", err)
	}
	return nil, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid JSON-RPC message: %v", err)
}

var (
	errBodyTooLarge  = errors.New("request body too large")
	errSessionClosed = errors.New("session closed")
)

// preallocBody is the largest announced body allocated before it arrives.
const preallocBody = 16 << 10

// readBody reads the whole body, at most max bytes. A body of known length
// up to preallocBody is allocated once; a longer one is buffered as it
// arrives, so that a client announcing megabytes and sending them a byte
// at a time costs the server what it sent, not what it announced. The
// returned slice is owned by the caller.
func readBody(r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, errBodyTooLarge
	}
	if r.ContentLength >= 0 && r.ContentLength <= preallocBody {
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, fmt.Errorf("reading %d bytes: %w", len(b), err)
		}
		return b, nil
	}
	if r.ContentLength > 0 {
		var buf bytes.Buffer
		buf.Grow(preallocBody)
		n, err := buf.ReadFrom(io.LimitReader(r.Body, r.ContentLength))
		if err == nil && n < r.ContentLength {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return nil, fmt.Errorf("reading %d bytes: %w", r.ContentLength, err)
		}
		return buf.Bytes(), nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading chunked body: %w", err)
	}
	if int64(len(b)) > max {
		return nil, errBodyTooLarge
	}
	return b, nil
}

// acceptsTypes reports whether the Accept header values allow JSON and SSE.
func acceptsTypes(values []string) (jsonOK, sseOK bool) {
	for _, v := range values {
		for v != "" {
			var tok string
			tok, v, _ = strings.Cut(v, ",")
			tok, _, _ = strings.Cut(tok, ";")
			tok = strings.TrimSpace(tok)
			switch {
			case tok == "*/*":
				jsonOK, sseOK = true, true
			case strings.EqualFold(tok, "application/json"), strings.EqualFold(tok, "application/*"):
				jsonOK = true
			case strings.EqualFold(tok, "text/event-stream"), strings.EqualFold(tok, "text/*"):
				sseOK = true
			}
		}
	}
	return jsonOK, sseOK
}

// prefersSSE reports whether the Accept header values list
// text/event-stream before application/json (the client's order of
// preference when no q-values distinguish them).
func prefersSSE(values []string) bool {
	for _, v := range values {
		for v != "" {
			var tok string
			tok, v, _ = strings.Cut(v, ",")
			tok, _, _ = strings.Cut(tok, ";")
			switch tok = strings.TrimSpace(tok); {
			case strings.EqualFold(tok, "text/event-stream"):
				return true
			case strings.EqualFold(tok, "application/json"):
				return false
			}
		}
	}
	return false
}

// writeJSONRPCError writes a JSON-RPC error response with the given HTTP status.
// An invalid id is written as null.
func writeJSONRPCError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, message string, data []byte) {
	b := make([]byte, 0, 96+len(message)+len(data))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = appendID(b, id)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, code, 10)
	b = append(b, `,"message":`...)
	m, _ := json.Marshal(message)
	b = append(b, m...)
	if len(data) > 0 {
		b = append(b, `,"data":`...)
		b = append(b, data...)
	}
	b = append(b, "}}"...)
	h := w.Header()
	h["Content-Type"] = ctJSON
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func appendID(b []byte, id jsonrpc.ID) []byte {
	switch v := id.Raw().(type) {
	case int64:
		return strconv.AppendInt(b, v, 10)
	case string:
		s, _ := json.Marshal(v)
		return append(b, s...)
	default:
		return append(b, "null"...)
	}
}

// serverBase is what the HTTP server types share: the accept function,
// logger, limits and guard fixed at construction, and the admission of a
// request. It is immutable after newServerBase.
type serverBase struct {
	accept    func(Connection)
	log       *slog.Logger
	maxBody   int64
	keepAlive time.Duration
	// bodyTimeout is the BodyReadTimeout option: 0 defers to the request
	// context (see bodyReadTimeout), negative disables it.
	bodyTimeout time.Duration
	guard       *Guard
	// streams returns the client-memory account an open stream of a peer
	// is charged to (stream_budget.go); nil charges nothing.
	streams func(peer any) *budget.Account
}

// newServerBase applies the defaults: a discarding logger, defaultMaxBody
// for maxBody <= 0 and defaultKeepAlive for a zero keepAlive.
func newServerBase(accept func(Connection), log *slog.Logger, maxBody int64, keepAlive time.Duration, guard GuardOptions) serverBase {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if maxBody <= 0 {
		maxBody = defaultMaxBody
	}
	if keepAlive == 0 {
		keepAlive = defaultKeepAlive
	}
	return serverBase{accept: accept, log: log, maxBody: maxBody, keepAlive: keepAlive, guard: NewGuard(guard)}
}

// admit passes r through the guard and refuses it with 503 when the server
// is closed; it returns false when it wrote an answer.
func (b *serverBase) admit(w http.ResponseWriter, r *http.Request, closed bool) bool {
	if !b.guard.allow(w, r) {
		return false
	}
	if closed {
		writeRejection(w, http.StatusServiceUnavailable, "server is shutting down")
		return false
	}
	return true
}

// readPOSTMessage reads the body of a POST, at most b.maxBody bytes, and
// decodes the one JSON-RPC message in it. On failure it writes the error
// answer (413; 408 when the body did not arrive within the body read
// timeout; or 400 with a parse or invalid-request error) and returns nil.
func (b *serverBase) readPOSTMessage(w http.ResponseWriter, r *http.Request) jsonrpc.Message {
	body, err := readBodyWithin(w, r, b.maxBody, bodyReadTimeout(r, b.bodyTimeout))
	if err != nil {
		switch {
		case errors.Is(err, errBodyTooLarge):
			writeJSONRPCError(w, http.StatusRequestEntityTooLarge, noID, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("request body exceeds %d bytes", b.maxBody), nil)
		case errors.Is(err, os.ErrDeadlineExceeded):
			writeJSONRPCError(w, http.StatusRequestTimeout, noID, codeServerError,
				"request body not received in time", nil)
		default:
			writeJSONRPCError(w, http.StatusBadRequest, noID, jsonrpc.CodeParseError,
				fmt.Sprintf("reading request body: %v", err), nil)
		}
		return nil
	}
	msg, status, code, reason := decodeMessage(body)
	if msg == nil {
		writeJSONRPCError(w, status, noID, code, reason, nil)
	}
	return msg
}

// readBodyWithin is readBody with a read deadline of timeout (none when it
// is not positive) on the connection while the body is read. The deadline
// is cleared when the body was read, so that it cannot cut the response
// stream that may follow; after a failure it is left in place, so that
// net/http cannot wait on the rest of a trickled body either (it then
// closes the connection, and resets the deadline of a connection it keeps).
func readBodyWithin(w http.ResponseWriter, r *http.Request, max int64, timeout time.Duration) ([]byte, error) {
	if timeout <= 0 || r.ContentLength == 0 {
		return readBody(r, max)
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(timeout)) != nil {
		return readBody(r, max) // not supported by this ResponseWriter
	}
	body, err := readBody(r, max)
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return body, err
}

// serverSession is what the streamable HTTP and HTTP+SSE sessions share:
// their id, who opened them, the inbox that HTTP handlers deliver to and
// Read takes from, and their end. Embedded, it provides SessionID, PeerInfo
// and Read of the session's [Connection].
//
// deliver and Read may be called concurrently; end may be called any number
// of times from any goroutine: the first call closes done, which unblocks
// every pending Read and deliver.
type serverSession struct {
	ending
	id   string
	peer any // who opened it; see Peer
	in   chan jsonrpc.Message
}

func (b *serverSession) init(peer any) {
	b.id = rand.Text()
	b.peer = peer
	b.in = make(chan jsonrpc.Message, incomingQueue)
	b.ending.init()
}

// SessionID returns the session's id.
func (b *serverSession) SessionID() string { return b.id }

// PeerInfo returns who opened the session (see Peer).
func (b *serverSession) PeerInfo() any { return b.peer }

// Read returns the next delivered message, in delivery order; io.EOF once
// the session has ended (even when messages are still queued); or the
// context's error.
func (b *serverSession) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-b.done:
		return nil, io.EOF
	default:
	}
	select {
	case msg := <-b.in:
		return msg, nil
	case <-b.done:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// deliver hands msg to Read. It returns errSessionClosed or the request
// context's error when msg could not be delivered.
func (b *serverSession) deliver(ctx context.Context, msg jsonrpc.Message) error {
	select {
	case b.in <- msg:
		return nil
	case <-b.done:
		return errSessionClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sessionTable is the set of live sessions of a server by id, and whether
// the server has been closed. It is safe for concurrent use.
type sessionTable[S comparable] struct {
	closed atomic.Bool
	mu     sync.Mutex
	m      map[string]S
}

// add registers s under id; it returns false, registering nothing, once
// the table has been shut down.
func (t *sessionTable[S]) add(id string, s S) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed.Load() {
		return false
	}
	if t.m == nil {
		t.m = make(map[string]S)
	}
	t.m[id] = s
	return true
}

// addNew registers s under id unless a session is registered there
// already; it returns that one and false, or the zero S and false once the
// table has been shut down.
func (t *sessionTable[S]) addNew(id string, s S) (S, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var zero S
	if t.closed.Load() {
		return zero, false
	}
	if cur, ok := t.m[id]; ok {
		return cur, false
	}
	if t.m == nil {
		t.m = make(map[string]S)
	}
	t.m[id] = s
	return s, true
}

// get returns the session registered under id.
func (t *sessionTable[S]) get(id string) (S, bool) {
	t.mu.Lock()
	s, ok := t.m[id]
	t.mu.Unlock()
	return s, ok
}

// remove unregisters s, when it is still the session registered under id.
func (t *sessionTable[S]) remove(id string, s S) {
	t.mu.Lock()
	if cur, ok := t.m[id]; ok && cur == s {
		delete(t.m, id)
	}
	t.mu.Unlock()
}

// isClosed reports whether shutdown has been called.
func (t *sessionTable[S]) isClosed() bool { return t.closed.Load() }

// shutdown makes later adds fail and returns the sessions registered now,
// for the caller to close (they remove themselves).
func (t *sessionTable[S]) shutdown() []S {
	t.closed.Store(true)
	t.mu.Lock()
	defer t.mu.Unlock()
	all := make([]S, 0, len(t.m))
	for _, s := range t.m {
		all = append(all, s)
	}
	return all
}

// encodeBufs recycles the buffers messages are encoded into.
var encodeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// maxPooledEncodeBuf is the largest encode buffer returned to the pool.
const maxPooledEncodeBuf = 64 << 10

// encodePooled encodes msg into a buffer from encodeBufs; give it back with
// putEncodeBuf.
func encodePooled(msg jsonrpc.Message) (*[]byte, error) {
	bp := encodeBufs.Get().(*[]byte)
	b, err := wire.Append((*bp)[:0], msg)
	if err != nil {
		putEncodeBuf(bp)
		return nil, err
	}
	*bp = b
	return bp, nil
}

func putEncodeBuf(bp *[]byte) {
	if cap(*bp) > maxPooledEncodeBuf {
		return
	}
	*bp = (*bp)[:0]
	encodeBufs.Put(bp)
}
