package transports

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Header names of the streamable HTTP transport, in canonical form.
const (
	hdrSessionID       = "Mcp-Session-Id"
	hdrProtocolVersion = "Mcp-Protocol-Version"
	hdrLastEventID     = "Last-Event-Id"
)

const (
	defaultMaxMessageBytes = 64 << 20
	// maxErrorBody is how much of a non-2xx response body is read, looking
	// for a JSON-RPC error; maxErrorSnippet is how much of it is quoted in a
	// synthesized error.
	maxErrorBody    = 64 << 10
	maxErrorSnippet = 512
	// deleteTimeout bounds the best-effort DELETE sent by Close.
	deleteTimeout = 2 * time.Second
	// answeredGrace is how long a response stream may stay open after it
	// carried the answer before it is cut, so that a server that never
	// ends its streams cannot pin a goroutine and a TCP connection per call.
	answeredGrace = 10 * time.Second
	// maxResumeAttempts is how many times in a row a response stream is
	// resumed without receiving anything before the call is given up.
	maxResumeAttempts = 5
)

// Backoff of reconnections: response stream resumption and the standalone
// stream.
var (
	resumeBackoff     = backoff{base: 100 * time.Millisecond, max: 5 * time.Second}
	standaloneBackoff = backoff{base: 250 * time.Millisecond, max: 30 * time.Second}
)

// StreamableClientTransport connects to an MCP server over streamable HTTP
// (2025-03-26 and later).
//
// Concurrency and lifetime: the transport is a value to configure and must
// not be changed after the first Connect; Connect may be called
// concurrently and every call returns an independent connection. On the
// connection, Write may be called concurrently (each call is one POST);
// Read must not be called concurrently with itself. Close cancels the
// requests in flight and the standalone GET stream, deletes the session
// (best effort), waits for the connection's goroutines and unblocks Read,
// which returns [ErrClosed]; a connection that failed (the server dropped
// the session: [ErrSessionExpired]) ends Read with the failure after the
// messages already queued.
type StreamableClientTransport struct {
	// URL is the server's MCP endpoint.
	URL string
	// Header is sent on every request (e.g. Authorization from config).
	Header http.Header
	// HTTPClient sends the requests; nil means a shared client tuned for
	// many concurrent keep-alive requests to one host. The client must not
	// have a Timeout: response streams last as long as their calls.
	HTTPClient *http.Client
	// Logger receives warnings and debug messages; nil discards them.
	Logger *slog.Logger
	// MaxMessageBytes caps one incoming message; 0 means 64 MiB.
	MaxMessageBytes int
	// Budget, when not nil, is charged with the bytes of every incoming
	// message while it is read and buffered, until Read returns it: a
	// response with a Content-Length is charged before its body is read,
	// other bodies and event streams as they arrive. A call whose answer
	// cannot get its bytes within a second is answered with a local error
	// (see [IsLocal]) naming the budget, and the rest of that answer is
	// dropped unread (its HTTP request is cancelled); on the standalone
	// stream the event is dropped and the stream reopened. See
	// [ByteBudget] for what is not counted.
	Budget *ByteBudget
	// OAuthHandler, when not nil, puts its token on every request and is
	// asked to authorize on a 401 (or a 403 insufficient_scope), after
	// which the request is sent once more (go-sdk's contract).
	OAuthHandler auth.OAuthHandler
	// NoStandalone leaves the standalone GET stream closed: for a server
	// that sends nothing unasked (an interceptor server), it would only
	// hold a connection.
	NoStandalone bool
}

// maxResponseHeaderBytes bounds an upstream's response headers, 1xx
// responses included (net/http counts those against the same limit and
// fails the request past it).
const maxResponseHeaderBytes = 1 << 20

// sharedHTTPClient is net/http's Transport tuned for a gateway: many idle
// connections kept per upstream, response headers bounded. A POST's body
// is a postBody, which net/http writes in one write with the headers.
var sharedHTTPClient = sync.OnceValue(func() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 1024
	tr.MaxIdleConnsPerHost = 512
	tr.IdleConnTimeout = 90 * time.Second
	tr.MaxResponseHeaderBytes = maxResponseHeaderBytes
	return &http.Client{Transport: tr}
})

// SharedHTTPClient is the HTTP client the streamable transport uses when
// given none: net/http's Transport keeping many idle connections per host
// (512; net/http's default keeps 2, so more concurrent requests to one
// host than that dial and close a TCP connection each), response headers
// bounded. Other clients of remote MCP servers (interceptor servers)
// share it.
func SharedHTTPClient() *http.Client { return sharedHTTPClient() }

// Connect returns a connection to the server. No request is sent until the
// first Write. Values of ctx (not its cancellation) are kept for the
// connection's background requests.
//
// Each Write POSTs one message. Messages the server sends on the response
// stream of a request X are read in the background and delivered by Read in
// order; requests and notifications among them are marked with
// [SetRelated](msg, X). Every request that Write accepts gets exactly one
// response from Read: the server's, or one synthesized when the server fails
// to answer (HTTP error, stream ended without the answer, session expired).
func (t *StreamableClientTransport) Connect(ctx context.Context) (Connection, error) {
	u, err := url.Parse(t.URL)
	if err != nil {
		return nil, fmt.Errorf("connecting to streamable HTTP server: parsing URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("connecting to streamable HTTP server: URL %q is not http or https", t.URL)
	}
	c := &streamableClientConn{
		url:    u,
		client: t.HTTPClient,
		logger: t.Logger,
		maxMsg: t.MaxMessageBytes,
		budget: t.Budget,
		notify: make(chan struct{}, 1),
		done:   make(chan struct{}),
		getOn:  t.NoStandalone, // as if started: never started
	}
	if c.client == nil {
		c.client = sharedHTTPClient()
	}
	c.client = WithOAuth(c.client, t.OAuthHandler)
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.maxMsg <= 0 {
		c.maxMsg = defaultMaxMessageBytes
	}
	c.header = make(http.Header, len(t.Header))
	for k, v := range t.Header {
		k = http.CanonicalHeaderKey(k)
		c.header[k] = append(c.header[k], v...)
	}
	c.ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return c, nil
}

// streamableClientConn is the Connection of a StreamableClientTransport.
type streamableClientConn struct {
	url    *url.URL
	client *http.Client
	logger *slog.Logger
	maxMsg int
	budget *ByteBudget // charged for incoming messages until the Read after the one that returns them
	held   heldBytes   // the charge of the message Read returned last
	header http.Header // configured headers; never modified

	// ctx is the parent of every HTTP request; cancel ends them all (Close,
	// session expiry).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // background readers; Add only under mu while !closed

	notify chan struct{} // a message was queued or the connection failed
	done   chan struct{} // closed by Close

	mu        sync.Mutex
	closed    bool
	failErr   error
	sessionID string
	version   string
	stateless bool                              // 2026-07-28 or later: see SetProtocolVersion
	aborts    map[jsonrpc.ID]context.CancelFunc // stateless: ends the POST of a call in flight
	postHdr   http.Header                       // cached POST headers; rebuilt when nil
	pending   map[jsonrpc.ID]struct{}           // calls written and not answered yet
	getOn     bool                              // the standalone stream was started
	queue     []queued                          // messages for Read; queue[head:] unread
	head      int
}

// SessionID returns the session id the server assigned in its answer to
// initialize, or "" before that and for servers without sessions.
func (c *streamableClientConn) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// Read returns the next message from the server. Messages of one stream
// come in the order the server sent them. After the connection failed, Read
// first returns the messages already queued (including the answers
// synthesized for the requests in flight), then the failure, which wraps
// [ErrSessionExpired] when the server dropped the session. After Close it
// returns [ErrClosed].
func (c *streamableClientConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	c.held.release(c.budget)
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		if c.head < len(c.queue) {
			q := c.queue[c.head]
			c.queue[c.head] = queued{}
			c.head++
			if c.head == len(c.queue) {
				c.queue, c.head = c.queue[:0], 0
			}
			c.mu.Unlock()
			c.held.hold(c.budget, q.charge)
			return q.msg, nil
		}
		err := c.failErr
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-c.notify:
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Write POSTs msg to the server and returns once the server accepted it
// (the response headers arrived). The answer to a request is read in the
// background and delivered by Read; an HTTP error on a request becomes an
// error response delivered by Read, while on a notification or response it
// is returned. When Write returns an error for a request, Read delivers no
// answer to it; otherwise exactly one. ctx bounds only the wait for the
// response headers.
func (c *streamableClientConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	return c.write(ctx, msg, inlineRead{})
}

// WriteAndRead is Write for a caller with nothing else to do until the
// call is over (the gateway's forwarding workers): when the answer to a
// request comes as an event stream, the stream is read on the calling
// goroutine instead of one started for it, so it returns when the stream
// ends. See [StreamReader] for answer.
func (c *streamableClientConn) WriteAndRead(ctx context.Context, msg jsonrpc.Message, answer func(*jsonrpc.Response)) error {
	return c.write(ctx, msg, inlineRead{inline: true, answer: answer})
}

// StreamReader is implemented by connections with WriteAndRead (streamable
// HTTP clients).
//
// WriteAndRead writes msg as Write does and, for a request, reads the
// server's answer on the calling goroutine before it returns. When answer
// is not nil and the response to msg is the first message the server sends
// for it (as a plain JSON body, or first on its event stream), the response
// is given to answer, on the calling goroutine, instead of being queued for
// Read: one hand-off less per call. A response after other messages of its
// stream (progress, server requests) comes through Read like them, so the
// order of one stream is kept. Either way a request gets exactly one
// answer.
type StreamReader interface {
	WriteAndRead(ctx context.Context, msg jsonrpc.Message, answer func(*jsonrpc.Response)) error
}

// inlineRead is how a POST's answer is read: on the calling goroutine
// (inline), and given to answer when it comes first (see StreamReader).
type inlineRead struct {
	inline bool
	answer func(*jsonrpc.Response)
}

// write is Write; inline reads a response stream on the calling goroutine.
func (c *streamableClientConn) write(ctx context.Context, msg jsonrpc.Message, how inlineRead) error {
	var call *jsonrpc.Request
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m == nil {
			return errors.New("writing to streamable HTTP server: nil request")
		}
		if m.IsCall() {
			call = m
		}
	case *jsonrpc.Response:
		if m == nil {
			return errors.New("writing to streamable HTTP server: nil response")
		}
	default:
		return fmt.Errorf("writing to streamable HTTP server: unsupported message type %T", msg)
	}

	c.mu.Lock()
	if err := c.unusableLocked(); err != nil {
		c.mu.Unlock()
		return fmt.Errorf("writing %s: %w", describeMsg(msg), err)
	}
	if call != nil {
		if _, dup := c.pending[call.ID]; dup {
			c.mu.Unlock()
			return fmt.Errorf("writing %s: request id %v is already in flight", call.Method, call.ID.Raw())
		}
		if c.pending == nil {
			c.pending = make(map[jsonrpc.ID]struct{})
		}
		c.pending[call.ID] = struct{}{}
	}
	hdr := c.postHeaderLocked()
	sentSession := c.sessionID != ""
	stateless := c.stateless
	c.mu.Unlock()
	if stateless {
		hdr = methodHeaders(hdr, msg) // a copy
	} else if c.client.Jar != nil {
		hdr = hdr.Clone() // the client adds cookies to it
	}

	body, err := encodeBody(msg)
	if err != nil {
		if call != nil && !c.forget(call) {
			return nil // answered by a failure meanwhile
		}
		return fmt.Errorf("writing %s: %w", describeMsg(msg), err)
	}
	reqCtx, cancelReq := context.WithCancel(c.ctx)
	if stateless {
		c.trackCall(msg, call, cancelReq)
	}
	rd, _ := body.reader()
	req := (&http.Request{
		Method:        http.MethodPost,
		URL:           c.url,
		Header:        hdr,
		Body:          rd,
		GetBody:       body.reader,
		ContentLength: int64(len(body)),
	}).WithContext(reqCtx)
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, cancelReq)
	}
	resp, err := c.send(req)
	if stop != nil && !stop() {
		// ctx ended while waiting for the response headers.
		if err == nil {
			resp.Body.Close()
		}
		err = ctx.Err()
	}
	if err != nil {
		cancelReq()
		pending := c.forget(call)
		c.mu.Lock()
		closed, uerr := c.closed, c.unusableLocked()
		c.mu.Unlock()
		if call != nil && !pending && !closed {
			// The connection failed meanwhile and answered the call: Read
			// delivers that answer, so this Write must not report an error.
			return nil
		}
		if uerr != nil {
			err = uerr
		}
		return fmt.Errorf("posting %s to %s: %w", describeMsg(msg), c.url.Redacted(), err)
	}
	return c.handlePOSTResponse(msg, call, resp, sentSession, reqCtx, cancelReq, how)
}

// handlePOSTResponse handles the response to the POST of msg; call is msg
// when it is a request with an id.
// how says whether a response stream is read on the calling goroutine.
func (c *streamableClientConn) handlePOSTResponse(msg jsonrpc.Message, call *jsonrpc.Request, resp *http.Response, sentSession bool, reqCtx context.Context, cancelReq context.CancelFunc, how inlineRead) error {
	code := resp.StatusCode
	if code >= 200 && code < 300 && !sentSession {
		if v := resp.Header[hdrSessionID]; len(v) > 0 && v[0] != "" {
			c.mu.Lock()
			if c.sessionID == "" {
				c.sessionID = v[0]
				c.postHdr = nil
			}
			c.mu.Unlock()
		}
	}
	switch {
	case code == http.StatusNotFound && sentSession:
		drainClose(resp.Body)
		cancelReq()
		err := fmt.Errorf("streamable HTTP server %s answered %s with 404: %w", c.url.Redacted(), describeMsg(msg), ErrSessionExpired)
		c.fail(err) // answers call, which is pending
		if call != nil {
			return nil
		}
		return err
	case code < 200 || code >= 300:
		defer cancelReq()
		if call != nil {
			c.answer(c.httpErrorResponse(call.ID, resp))
			return nil
		}
		body := readSnippet(resp.Body)
		resp.Body.Close()
		c.logger.Warn("streamable HTTP server rejected a message", "message", describeMsg(msg), "status", code, "body", body)
		return fmt.Errorf("posting %s: server returned HTTP %d %s: %s", describeMsg(msg), code, http.StatusText(code), body)
	}

	if call == nil {
		drainClose(resp.Body)
		cancelReq()
		if m, ok := msg.(*jsonrpc.Request); ok && m.Method == "notifications/initialized" {
			c.startStandalone()
		}
		return nil
	}

	isInit := call.Method == "initialize"
	switch mediaType(resp.Header.Get("Content-Type")) {
	case "text/event-stream":
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			resp.Body.Close()
			cancelReq()
			return fmt.Errorf("posting %s: %w", describeMsg(msg), ErrClosed)
		}
		c.wg.Add(1)
		c.mu.Unlock()
		st := &streamState{call: call, isInit: isInit, cancel: cancelReq}
		if how.inline {
			st.direct = how.answer
			c.readResponseStream(reqCtx, st, resp.Body)
		} else {
			go c.readResponseStream(reqCtx, st, resp.Body)
		}
	case "application/json":
		c.readJSONResponse(&streamState{call: call, isInit: isInit, direct: how.answer}, resp)
		cancelReq()
	default:
		drainClose(resp.Body)
		cancelReq()
		what := fmt.Sprintf("unsupported Content-Type %q", resp.Header.Get("Content-Type"))
		if code == http.StatusAccepted || code == http.StatusNoContent {
			what = "no body"
		}
		c.answer(errorResponse(call.ID, fmt.Sprintf("upstream answered with HTTP %d and %s", code, what)))
	}
	return nil
}

// readJSONResponse reads an application/json answer to call.
func (c *streamableClientConn) readJSONResponse(st *streamState, resp *http.Response) {
	call := st.call
	defer resp.Body.Close() // unread when the body was refused: the connection is dropped
	body, charge, failure := c.readJSONBody(resp)
	if failure != "" {
		c.answer(errorResponse(call.ID, failure))
		return
	}
	msg, err := wire.Decode(body)
	if err != nil {
		c.budget.Release(charge)
		c.answer(errorResponse(call.ID, fmt.Sprintf("decoding upstream response: %v", err)))
		return
	}
	if !c.handleIncoming(msg, st, charge) {
		c.answer(errorResponse(call.ID, "upstream response did not answer the request"))
	}
}

// readJSONBody reads the body of an application/json answer, at most
// c.maxMsg bytes, charging the budget for it: a body with a known length
// before it is read, another as its buffer grows. It returns the body and
// the bytes charged, or the text of the local error response.
func (c *streamableClientConn) readJSONBody(resp *http.Response) ([]byte, int64, string) {
	ctx := c.ctx
	if resp.Request != nil {
		ctx = resp.Request.Context() // ends with the connection
	}
	n := resp.ContentLength
	if n > int64(c.maxMsg) {
		return nil, 0, fmt.Sprintf("upstream response of %d bytes exceeds the limit of %d bytes", n, c.maxMsg)
	}
	if n >= 0 {
		if err := c.budget.acquireWithin(ctx, n); err != nil {
			c.logger.Warn("dropping an upstream response over the in-flight budget", "bytes", n, "err", err)
			return nil, 0, budgetErrorText(c.budget)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, body); err != nil {
			c.budget.Release(n)
			return nil, 0, fmt.Sprintf("reading upstream response: %v", err)
		}
		return body, n, ""
	}
	body, charge, err := readAllCharged(ctx, resp.Body, c.maxMsg, c.budget)
	switch {
	case err == nil:
		return body, charge, ""
	case errors.Is(err, errTooLarge):
		return nil, 0, fmt.Sprintf("upstream response exceeds the limit of %d bytes", c.maxMsg)
	case errors.Is(err, ErrOverBudget):
		c.logger.Warn("dropping an upstream response over the in-flight budget", "err", err)
		return nil, 0, budgetErrorText(c.budget)
	default:
		return nil, 0, fmt.Sprintf("reading upstream response: %v", err)
	}
}

// streamState is what the reader of an event stream keeps across events and
// reconnections.
type streamState struct {
	call     *jsonrpc.Request // the request whose response stream it is; nil for the standalone stream
	isInit   bool
	cancel   context.CancelFunc // ends the stream's requests
	lastID   string             // last event id, for Last-Event-ID
	retry    time.Duration      // reconnection time set by the server, when > 0
	received int                // events received on the current stream
	answered bool
	// direct, when set, takes the answer to call if nothing of this
	// stream was queued for Read before it (see StreamReader); queuedAny
	// says whether something was.
	direct    func(*jsonrpc.Response)
	queuedAny bool
	grace     *time.Timer
}

// readResponseStream delivers the messages of the response stream of
// st.call, resuming it when it breaks before the answer, and answers the call
// itself when it cannot get the server's answer.
func (c *streamableClientConn) readResponseStream(ctx context.Context, st *streamState, body io.ReadCloser) {
	defer c.wg.Done()
	defer st.cancel()
	defer func() {
		if st.grace != nil {
			st.grace.Stop()
		}
	}()
	fails := 0
	for {
		before := st.lastID
		err := c.consumeStream(ctx, body, st)
		body.Close()
		if st.answered || ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrOverBudget) {
			c.logger.Warn("dropping an upstream response over the in-flight budget", "request", st.call.Method, "err", err)
			c.answer(errorResponse(st.call.ID, budgetErrorText(c.budget)))
			return
		}
		if errors.Is(err, errSSETooLarge) {
			c.answer(errorResponse(st.call.ID, fmt.Sprintf("upstream message exceeds the limit of %d bytes", c.maxMsg)))
			return
		}
		if st.received > 0 || st.lastID != before {
			fails = 0
		}
		for {
			fails++
			if st.lastID == "" || fails > maxResumeAttempts {
				c.answer(errorResponse(st.call.ID, "upstream closed the response stream before answering"))
				return
			}
			delay := st.retry
			if delay <= 0 {
				delay = resumeBackoff.delay(fails)
			}
			if !sleepCtx(ctx, delay) {
				return
			}
			resp, err := c.openStream(ctx, st.lastID)
			if err == nil {
				body = resp.Body
				break
			}
			if ctx.Err() != nil || errors.Is(err, ErrSessionExpired) {
				return
			}
			c.logger.Debug("resuming a response stream failed", "request", st.call.Method, "attempt", fails, "err", err)
			if se := (*statusError)(nil); errors.As(err, &se) && se.permanent() {
				c.answer(errorResponse(st.call.ID, "upstream closed the response stream before answering"))
				return
			}
		}
	}
}

// runStandalone keeps the standalone GET stream open until Close.
func (c *streamableClientConn) runStandalone() {
	defer c.wg.Done()
	st := &streamState{}
	fails := 0
	for {
		resp, err := c.openStream(c.ctx, st.lastID)
		if err == nil {
			before := st.lastID
			err = c.consumeStream(c.ctx, resp.Body, st)
			resp.Body.Close()
			if st.received > 0 || st.lastID != before {
				fails = 0
			}
		}
		if c.ctx.Err() != nil || errors.Is(err, ErrSessionExpired) {
			return
		}
		var se *statusError
		if errors.As(err, &se) && se.permanent() {
			if se.code != http.StatusMethodNotAllowed {
				c.logger.Warn("streamable HTTP server refused the standalone stream", "err", err)
			}
			return
		}
		if errors.Is(err, ErrOverBudget) {
			c.logger.Warn("dropped a message of the standalone stream over the in-flight budget; reconnecting", "err", err)
		} else {
			c.logger.Debug("standalone stream ended; reconnecting", "err", err)
		}
		fails++
		delay := st.retry
		if delay <= 0 {
			delay = standaloneBackoff.delay(fails)
		}
		if !sleepCtx(c.ctx, delay) {
			return
		}
	}
}

// consumeStream delivers the messages of one event stream until it ends,
// and returns the error that ended it (io.EOF at a clean end).
func (c *streamableClientConn) consumeStream(ctx context.Context, body io.Reader, st *streamState) error {
	sr := newSSEReader(body, c.maxMsg)
	defer sr.release()
	if c.budget != nil {
		sr.charge(ctx, c.budget)
		defer func() { c.budget.Release(sr.takeCharge()) }()
	}
	sr.lastID = append(sr.lastID, st.lastID...) // the last event id outlives a connection
	st.received = 0
	for {
		ev, err := sr.next()
		if id := sr.lastEventID(); string(id) != st.lastID {
			st.lastID = string(id)
		}
		if d, ok := sr.reconnectTime(); ok {
			st.retry = d
		}
		if err != nil {
			return err
		}
		st.received++
		charge := sr.takeCharge()
		if len(ev.data) == 0 || (len(ev.name) > 0 && string(ev.name) != "message") {
			c.budget.Release(charge)
			continue
		}
		msg, err := wire.Decode(ev.data)
		if err != nil {
			c.budget.Release(charge)
			c.logger.Warn("dropping an undecodable message from the streamable HTTP server", "err", err)
			continue
		}
		if c.handleIncoming(msg, st, charge) && !st.answered {
			// The server should end the stream now; don't wait forever.
			st.answered = true
			st.grace = time.AfterFunc(answeredGrace, st.cancel)
		}
	}
}

// handleIncoming delivers msg, which arrived on the stream st (st.call nil:
// the standalone stream) and holds charge bytes of the budget, and reports
// whether it answers st.call.
func (c *streamableClientConn) handleIncoming(msg jsonrpc.Message, st *streamState, charge int64) bool {
	call, isInit := st.call, st.isInit
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if call != nil {
			SetRelated(m, call.ID)
		}
		c.mu.Lock()
		queued := !c.closed && c.failErr == nil
		if queued {
			c.pushLocked(m, charge)
			st.queuedAny = true
		}
		c.mu.Unlock()
		if !queued {
			c.budget.Release(charge)
		}
		return false
	case *jsonrpc.Response:
		isAnswer := call != nil && m.ID == call.ID
		if isAnswer && isInit && m.Error == nil {
			if v, ok := wire.String(m.Result, "protocolVersion"); ok && v != "" {
				c.mu.Lock()
				if c.version != v {
					c.version, c.postHdr = v, nil
				}
				c.mu.Unlock()
			}
		}
		if isAnswer && st.direct != nil && !st.queuedAny && c.answerDirect(m, st.direct) {
			c.budget.Release(charge)
			return true
		}
		st.queuedAny = true
		c.answerCharged(m, charge)
		return isAnswer
	}
	c.budget.Release(charge)
	return false
}

// answer delivers resp when its request is still waiting for an answer, and
// drops it otherwise, so that every request gets exactly one.
func (c *streamableClientConn) answer(resp *jsonrpc.Response) { c.answerCharged(resp, 0) }

// answerDirect gives resp to direct instead of queueing it, when its
// request is still waiting for an answer; it reports whether it did.
func (c *streamableClientConn) answerDirect(resp *jsonrpc.Response, direct func(*jsonrpc.Response)) bool {
	c.mu.Lock()
	_, take := c.pending[resp.ID]
	take = take && !c.closed
	if take {
		delete(c.pending, resp.ID)
		delete(c.aborts, resp.ID)
	}
	c.mu.Unlock()
	if take {
		direct(resp)
	}
	return take
}

// answerCharged is answer for a response that holds charge bytes of the
// budget, released when it is dropped or read.
func (c *streamableClientConn) answerCharged(resp *jsonrpc.Response, charge int64) {
	c.mu.Lock()
	_, ok := c.pending[resp.ID]
	if ok {
		delete(c.pending, resp.ID)
		delete(c.aborts, resp.ID)
		c.pushLocked(resp, charge)
	}
	c.mu.Unlock()
	if !ok {
		c.budget.Release(charge)
		c.logger.Debug("dropping a response to no request in flight", "id", resp.ID.Raw())
	}
}

// queued is a message waiting for Read, with the bytes of the budget it
// holds until then.
type queued struct {
	msg    jsonrpc.Message
	charge int64
}

// pushLocked queues msg, which holds charge bytes of the budget, for Read;
// c.mu is held.
func (c *streamableClientConn) pushLocked(msg jsonrpc.Message, charge int64) {
	if c.head > 64 && 2*c.head >= len(c.queue) {
		n := copy(c.queue, c.queue[c.head:])
		clear(c.queue[n:])
		c.queue, c.head = c.queue[:n], 0
	}
	c.queue = append(c.queue, queued{msg, charge})
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// forget removes a call whose POST failed from the calls in flight, and
// reports whether it was still there (not answered yet).
func (c *streamableClientConn) forget(call *jsonrpc.Request) bool {
	if call == nil {
		return false
	}
	c.mu.Lock()
	_, ok := c.pending[call.ID]
	delete(c.pending, call.ID)
	delete(c.aborts, call.ID)
	c.mu.Unlock()
	return ok
}

// fail breaks the connection: every call in flight is answered with an
// error, background requests end, and Read returns err once the queue is
// drained.
func (c *streamableClientConn) fail(err error) {
	c.mu.Lock()
	if c.closed || c.failErr != nil {
		c.mu.Unlock()
		return
	}
	c.failErr = err
	for id := range c.pending {
		c.pushLocked(errorResponse(id, sessionExpiredMessage), 0)
	}
	clear(c.pending)
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
	c.cancel()
}

// unusableLocked returns why the connection cannot send, or nil.
func (c *streamableClientConn) unusableLocked() error {
	if c.closed {
		return ErrClosed
	}
	return c.failErr
}

// startStandalone opens the standalone stream once the session is set up.
func (c *streamableClientConn) startStandalone() {
	c.mu.Lock()
	if c.getOn || c.closed || c.failErr != nil || c.sessionID == "" || c.stateless {
		c.mu.Unlock()
		return
	}
	c.getOn = true
	c.wg.Add(1)
	c.mu.Unlock()
	go c.runStandalone()
}

// Close ends the connection: requests in flight and the standalone stream
// are cancelled, the session is deleted on the server (best effort, for at
// most 2 s) and pending and later Reads fail. Close waits for the
// connection's goroutines to end; it may be called more than once.
func (c *streamableClientConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	sid, failed := c.sessionID, c.failErr != nil
	hdr := c.baseHeaderLocked()
	var charged int64
	for _, q := range c.queue[c.head:] {
		charged += q.charge
	}
	c.queue, c.head = nil, 0
	clear(c.pending)
	c.mu.Unlock()
	c.budget.Release(charged)
	c.held.close(c.budget)
	close(c.done)
	c.cancel()
	if sid != "" && !failed {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), deleteTimeout)
		req := (&http.Request{Method: http.MethodDelete, URL: c.url, Header: hdr}).WithContext(ctx)
		if resp, err := c.client.Do(req); err != nil {
			c.logger.Debug("deleting the upstream session", "err", err)
		} else {
			drainClose(resp.Body)
		}
		cancel()
	}
	c.wg.Wait()
	return nil
}

// openStream GETs an event stream: the standalone stream, or with lastID the
// resumption of a stream. A 404 while a session is set fails the connection.
func (c *streamableClientConn) openStream(ctx context.Context, lastID string) (*http.Response, error) {
	c.mu.Lock()
	hdr := c.baseHeaderLocked()
	sentSession := c.sessionID != ""
	c.mu.Unlock()
	hdr["Accept"] = []string{"text/event-stream"}
	if lastID != "" {
		hdr[hdrLastEventID] = []string{lastID}
	}
	req := (&http.Request{Method: http.MethodGet, URL: c.url, Header: hdr}).WithContext(ctx)
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("opening an event stream: %w", err)
	}
	code := resp.StatusCode
	if code >= 200 && code < 300 && mediaType(resp.Header.Get("Content-Type")) == "text/event-stream" {
		return resp, nil
	}
	body := readSnippet(resp.Body)
	resp.Body.Close()
	if code == http.StatusNotFound && sentSession {
		err := fmt.Errorf("streamable HTTP server %s answered GET with 404: %w", c.url.Redacted(), ErrSessionExpired)
		c.fail(err)
		return nil, err
	}
	return nil, &statusError{code: code, contentType: resp.Header.Get("Content-Type"), body: body}
}

// statusError is an unusable answer to a GET.
type statusError struct {
	code        int
	contentType string
	body        string
}

func (e *statusError) Error() string {
	if e.code >= 200 && e.code < 300 {
		return fmt.Sprintf("event stream request answered with Content-Type %q", e.contentType)
	}
	return fmt.Sprintf("event stream request answered with HTTP %d %s: %s", e.code, http.StatusText(e.code), e.body)
}

// permanent reports whether retrying the request is pointless.
func (e *statusError) permanent() bool {
	switch {
	case e.code >= 200 && e.code < 300:
		return true // not an event stream
	case e.code == http.StatusRequestTimeout, e.code == http.StatusConflict, e.code == http.StatusTooManyRequests:
		return false
	default:
		return e.code >= 400 && e.code < 500
	}
}

// postHeaderLocked returns the headers of a POST. The map is shared and must
// not be modified. c.mu is held.
func (c *streamableClientConn) postHeaderLocked() http.Header {
	if c.postHdr == nil {
		h := c.baseHeaderLocked()
		h["Content-Type"] = []string{"application/json"}
		h["Accept"] = []string{"application/json, text/event-stream"}
		c.postHdr = h
	}
	return c.postHdr
}

// baseHeaderLocked returns a new map of the configured headers with the
// session id and protocol version. c.mu is held.
func (c *streamableClientConn) baseHeaderLocked() http.Header {
	h := make(http.Header, len(c.header)+4)
	for k, v := range c.header {
		h[k] = v
	}
	if c.sessionID != "" {
		h[hdrSessionID] = []string{c.sessionID}
	}
	if c.version != "" {
		h[hdrProtocolVersion] = []string{c.version}
	}
	return h
}

// httpErrorResponse turns a non-2xx answer to the POST of request id into
// its error response: the JSON-RPC error the server sent, or one naming the
// status and quoting the start of the body.
func (c *streamableClientConn) httpErrorResponse(id jsonrpc.ID, resp *http.Response) *jsonrpc.Response {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	// The id of such an error may be missing or null (the server could not
	// tell which request failed), so only its "error" member is looked at.
	if raw, ok, err := wire.Field(body, "error"); err == nil && ok {
		var e jsonrpc.Error
		if json.Unmarshal(raw, &e) == nil && (e.Code != 0 || e.Message != "") {
			return &jsonrpc.Response{ID: id, Error: &e}
		}
	}
	text := fmt.Sprintf("upstream returned HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	if s := snippet(body); s != "" {
		text += ": " + s
	}
	return errorResponse(id, text)
}

// errorResponse makes up the answer to request id when the server cannot
// give one; it is marked with SetLocal.
// send performs one POST. A plain client (no cookie jar, timeout or
// redirect policy) goes straight to its transport: http.Client.Do would
// copy the headers of every request for redirects, which MCP POSTs never
// follow.
func (c *streamableClientConn) send(req *http.Request) (*http.Response, error) {
	if c.client.Jar != nil || c.client.Timeout != 0 || c.client.CheckRedirect != nil {
		return c.client.Do(req)
	}
	rt := c.client.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	resp, err := rt.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect) && req.GetBody != nil {
		// Some servers redirect /mcp to /mcp/: follow as Do would.
		resp.Body.Close()
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		again := req.Clone(req.Context())
		again.Body = body
		return c.client.Do(again)
	}
	return resp, err
}

// sessionExpiredMessage is the message of the answer a call in flight
// gets when the server drops the session (fail).
const sessionExpiredMessage = "upstream session expired"

// SessionExpired reports whether err is the answer a call in flight got
// because the server dropped the session (a JSON-RPC -32603 the
// connection made itself, as it reaches a caller through go-sdk): the
// server did not process it under a session it knows, so a new session
// may be asked again.
func SessionExpired(err error) bool {
	var e *jsonrpc.Error
	return errors.As(err, &e) && e.Code == jsonrpc.CodeInternalError && e.Message == sessionExpiredMessage
}

func errorResponse(id jsonrpc.ID, message string) *jsonrpc.Response {
	resp := &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: message}}
	SetLocal(resp)
	return resp
}

// readSnippet reads the start of an error body for a message.
func readSnippet(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, maxErrorSnippet))
	return snippet(b)
}

// snippet returns at most maxErrorSnippet bytes of b as valid, trimmed text.
func snippet(b []byte) string {
	if len(b) > maxErrorSnippet {
		b = b[:maxErrorSnippet]
	}
	return strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
}

// drainClose reads a little of body, so that the connection can be reused,
// and closes it.
func drainClose(body io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(body, 4<<10))
	body.Close()
}

// mediaType returns the media type of a Content-Type value, lower case.
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	for i := 0; i < len(ct); i++ {
		if 'A' <= ct[i] && ct[i] <= 'Z' {
			return strings.ToLower(ct)
		}
	}
	return ct
}

// describeMsg names msg in errors and logs.
func describeMsg(msg jsonrpc.Message) string {
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m != nil {
			return m.Method
		}
	case *jsonrpc.Response:
		if m != nil {
			return fmt.Sprintf("response to %v", m.ID.Raw())
		}
	}
	return "message"
}

// backoff computes reconnection delays: base doubling per attempt up to max,
// with jitter.
type backoff struct{ base, max time.Duration }

func (b backoff) delay(attempt int) time.Duration {
	d := b.base << min(attempt-1, 20)
	if d <= 0 || d > b.max {
		d = b.max
	}
	return d/2 + rand.N(d/2+1)
}

// sleepCtx waits for d or until ctx ends, and reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// postBody is the encoded body of one POST. It is a []byte of its own (not a
// pooled buffer) read through bytes.Reader, which net/http recognises as
// in memory: it then writes the request's headers and body in one write
// instead of flushing the headers first (one syscall less per POST here,
// and the server reads the request in one read instead of two).
type postBody []byte

func encodeBody(msg jsonrpc.Message) (postBody, error) {
	bp, err := encodePooled(msg)
	if err != nil {
		return nil, err
	}
	b := postBody(slices.Clone(*bp))
	putEncodeBuf(bp)
	return b, nil
}

// reader returns a new reader of the body (also for the HTTP client's
// retries and redirects, as GetBody).
func (b postBody) reader() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
