package transports

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// This file is the 2026-07-28 side of [StreamableServer]: that revision has
// no sessions, so each POST is served on its own one-request [Connection].

// Protocol2026 is the sessionless protocol revision; a POST that names it in
// its MCP-Protocol-Version header, or whose request carries the _meta key
// [MetaProtocolVersion], is served without a session.
const Protocol2026 = "2026-07-28"

// MetaProtocolVersion is the per-request _meta key of a 2026-07-28 request
// that names its protocol revision.
const MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

const (
	hdrMcpMethod      = "Mcp-Method"
	hdrMcpName        = "Mcp-Name"
	hdrMcpParamPrefix = "Mcp-Param-"

	// codeHeaderMismatch is the 2026-07-28 HeaderMismatch code: an HTTP
	// header disagrees with the request body.
	codeHeaderMismatch = -32020
	// codeMissingCapability is the 2026-07-28 MissingRequiredClientCapability code.
	codeMissingCapability = -32021
)

// ParamHeaders is the Extra of a request delivered by a one-request
// connection when its POST carried Mcp-Param-* headers: those headers,
// unchanged, for the gateway to forward upstream (intermediaries must pass
// on the ones they do not know).
type ParamHeaders http.Header

// ParamHeadersOf returns the Mcp-Param-* headers the request arrived with,
// or nil.
func ParamHeadersOf(req *jsonrpc.Request) http.Header {
	if h, ok := req.Extra.(ParamHeaders); ok {
		return http.Header(h)
	}
	return nil
}

// isStatelessPOST reports whether a POST follows the 2026-07-28 revision.
func isStatelessPOST(r *http.Request, msg jsonrpc.Message) bool {
	if v := r.Header[hdrProtocolVersion]; len(v) > 0 && v[0] == Protocol2026 {
		return true
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return false
	}
	_, ok = metaVersion(req.Params)
	return ok
}

// metaVersion returns params._meta's protocol version, if it has one.
func metaVersion(params json.RawMessage) (string, bool) {
	meta, ok, err := wire.Field(params, "_meta")
	if err != nil || !ok {
		return "", false
	}
	return wire.String(meta, MetaProtocolVersion)
}

// rejectedPOST is why a 2026-07-28 POST is refused before it reaches the
// gateway.
type rejectedPOST struct {
	status int
	code   int64
	msg    string
	data   []byte
}

// checkStateless compares the headers of a 2026-07-28 request with its
// body: MCP-Protocol-Version with _meta's protocol version, Mcp-Method with
// the method and Mcp-Name with the name or URI the method targets.
func checkStateless(h http.Header, req *jsonrpc.Request) *rejectedPOST {
	header := h.Get(hdrProtocolVersion)
	body, ok := metaVersion(req.Params)
	switch {
	case header == "":
		return mismatch("%s header is required for requests carrying _meta %q", hdrProtocolVersion, MetaProtocolVersion)
	case !ok:
		return &rejectedPOST{http.StatusBadRequest, jsonrpc.CodeInvalidParams,
			fmt.Sprintf("missing or invalid _meta field %q", MetaProtocolVersion), nil}
	case header != body:
		return mismatch("%s header %q does not match _meta %q %q", hdrProtocolVersion, header, MetaProtocolVersion, body)
	case !slices.Contains(supportedVersions, body):
		reason, data := unsupportedVersion(body)
		return &rejectedPOST{http.StatusBadRequest, codeUnsupportedVersion, reason, data}
	}
	method := h.Get(hdrMcpMethod)
	if method == "" {
		return mismatch("missing required %s header", hdrMcpMethod)
	}
	if method != req.Method {
		return mismatch("%s header %q does not match the method %q", hdrMcpMethod, method, req.Method)
	}
	key := nameParam(req.Method)
	if key == "" {
		return nil
	}
	if key == "taskId" && h.Get(hdrMcpName) == "" {
		return nil // the tasks extension's header: checked when sent
	}
	name, ok := wire.String(req.Params, key)
	if !ok {
		return &rejectedPOST{http.StatusBadRequest, jsonrpc.CodeInvalidParams,
			fmt.Sprintf("%s: params.%s must be a string", req.Method, key), nil}
	}
	if got := h.Get(hdrMcpName); got != name {
		if got == "" {
			return mismatch("missing required %s header for %s", hdrMcpName, req.Method)
		}
		return mismatch("%s header %q does not match params.%s %q", hdrMcpName, got, key, name)
	}
	return nil
}

func mismatch(format string, args ...any) *rejectedPOST {
	return &rejectedPOST{http.StatusBadRequest, codeHeaderMismatch, fmt.Sprintf(format, args...), nil}
}

// paramHeaders collects the Mcp-Param-* headers of a request, or nil.
func paramHeaders(h http.Header) ParamHeaders {
	var out ParamHeaders
	for k, v := range h {
		if strings.HasPrefix(k, hdrMcpParamPrefix) {
			if out == nil {
				out = ParamHeaders{}
			}
			out[k] = slices.Clone(v)
		}
	}
	return out
}

// statelessStatus is the HTTP status of a 2026-07-28 error response: the
// revision maps method-not-found to 404 and invalid params, an unsupported
// version and a missing client capability to 400.
func statelessStatus(msg jsonrpc.Message) int {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || resp.Error == nil {
		return 0
	}
	e, ok := resp.Error.(*jsonrpc.Error)
	if !ok {
		return 0
	}
	switch e.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, codeUnsupportedVersion, codeMissingCapability, codeHeaderMismatch:
		return http.StatusBadRequest
	}
	return 0
}

// serveStateless serves a 2026-07-28 POST: a request gets a one-request
// connection, answered once and closed; notifications and responses have
// no session to go to and are acknowledged.
func (s *StreamableServer) serveStateless(w http.ResponseWriter, r *http.Request, msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if rej := checkStateless(r.Header, req); rej != nil {
		writeJSONRPCError(w, rej.status, req.ID, rej.code, rej.msg, rej.data)
		return
	}
	if ph := paramHeaders(r.Header); ph != nil {
		req.Extra = ph
	}
	c := &statelessConn{peer: PeerFromContext(r.Context()), req: req, ready: make(chan struct{}, 1)}
	c.init()
	defer c.Close()
	s.accept(c)
	o := streamOut{w: w, preferSSE: prefersSSE(r.Header["Accept"])}
	c.pump(r.Context(), &o, req.ID, s.keepAlive)
	o.finish()
}

// OneRequest is implemented by the [Connection] of a 2026-07-28 request
// (one POST, one request, no session). Read returns that request once, as
// from any connection; a gateway that wants to spare itself a read loop
// takes it with TakeRequest instead and handles it at once, on the POST's
// goroutine, without blocking (the response is written only after accept
// returns), and gets told by OnClose when the connection ends.
type OneRequest interface {
	Connection
	// TakeRequest returns the request, the first time it is called (and
	// Read has not returned it); nil after.
	TakeRequest() *jsonrpc.Request
	// OnClose makes Close call f once, after the connection has ended.
	// Call it at most once, before the connection can close (in accept).
	OnClose(f func())
}

// statelessConn is the [Connection] of one 2026-07-28 request: Read
// returns that request, Write queues what the gateway answers, and the
// POST's handler writes it; the connection ends with the response. It
// allocates as little as it can: no session id, no inbound queue, and an
// outbound queue that grows only as messages arrive.
type statelessConn struct {
	ending
	peer    any
	onClose func()

	mu    sync.Mutex
	req   *jsonrpc.Request // the request, until Read or TakeRequest takes it
	out   []jsonrpc.Message
	ready chan struct{} // signalled (capacity 1) when out gains a message
}

// SessionID is empty: the request belongs to no session.
func (c *statelessConn) SessionID() string { return "" }

// PeerInfo returns who sent the request (see Peer).
func (c *statelessConn) PeerInfo() any { return c.peer }

// TakeRequest implements [OneRequest].
func (c *statelessConn) TakeRequest() *jsonrpc.Request {
	c.mu.Lock()
	req := c.req
	c.req = nil
	c.mu.Unlock()
	return req
}

// OnClose implements [OneRequest].
func (c *statelessConn) OnClose(f func()) { c.onClose = f }

// Read returns the request the first time, then waits for the end of the
// connection (io.EOF) or of ctx.
func (c *statelessConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-c.done:
		return nil, io.EOF
	default:
	}
	if req := c.TakeRequest(); req != nil {
		return req, nil
	}
	select {
	case <-c.done:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write queues msg for the POST's response. Of other messages (progress,
// logs) at most maxStreamQueue wait; more are dropped: the client does not
// keep up, and they are best effort. The response is always queued.
func (c *statelessConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	_, isResp := msg.(*jsonrpc.Response)
	c.mu.Lock()
	if c.ended() {
		c.mu.Unlock()
		return fmt.Errorf("stateless request: %w", ErrClosed)
	}
	if !isResp && len(c.out) >= maxStreamQueue {
		c.mu.Unlock()
		return nil
	}
	c.out = append(c.out, msg)
	c.mu.Unlock()
	select {
	case c.ready <- struct{}{}:
	default:
	}
	return nil
}

// next takes the oldest queued message, if there is one.
func (c *statelessConn) next() (jsonrpc.Message, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.out) == 0 {
		return nil, false
	}
	msg := c.out[0]
	c.out[0] = nil
	c.out = c.out[1:]
	return msg, true
}

// Close ends the connection; Read returns io.EOF. The first call runs the
// function given to OnClose.
func (c *statelessConn) Close() error {
	if c.end(io.EOF, nil) && c.onClose != nil {
		c.onClose()
	}
	return nil
}

// keepAliveTimers recycles the keep-alive timers of one-request streams.
var keepAliveTimers sync.Pool

// pump writes what the gateway sends until the response to id, the end of
// the connection or the client's departure.
func (c *statelessConn) pump(ctx context.Context, o *streamOut, id jsonrpc.ID, ka time.Duration) {
	var (
		kaC <-chan time.Time
		t   *time.Timer
	)
	if ka > 0 {
		if t, _ = keepAliveTimers.Get().(*time.Timer); t == nil {
			t = time.NewTimer(ka)
		} else {
			t.Reset(ka)
		}
		defer func() { t.Stop(); keepAliveTimers.Put(t) }()
		kaC = t.C
	}
	for {
		if msg, ok := c.next(); ok {
			if c.writeOne(o, msg, id) {
				return
			}
			continue
		}
		select {
		case <-c.ready:
		case <-kaC:
			if o.keepAlive() != nil {
				return
			}
			t.Reset(ka)
		case <-c.done:
			if !o.started {
				writeJSONRPCError(o.w, http.StatusServiceUnavailable, id, codeServerError, "request ended without a response", nil)
			}
			return
		case <-ctx.Done():
			return
		}
	}
}

// writeOne writes msg and reports whether the stream is over: msg was the
// response to id, or writing failed.
func (c *statelessConn) writeOne(o *streamOut, msg jsonrpc.Message, id jsonrpc.ID) bool {
	resp, final := msg.(*jsonrpc.Response)
	final = final && resp.ID == id
	if final && !o.started {
		o.status = statelessStatus(msg)
	}
	bp, err := encodePooled(msg)
	if err != nil {
		return false
	}
	err = o.writeBatch([]*[]byte{bp}, final)
	putEncodeBuf(bp)
	return err != nil || final
}

// unsupportedVersion is the message and data of an UnsupportedProtocolVersion
// error for version.
func unsupportedVersion(version string) (string, []byte) {
	data, _ := json.Marshal(struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}{supportedVersions, version})
	return fmt.Sprintf("unsupported protocol version %q (supported: %s)", version, strings.Join(supportedVersions, ", ")), data
}
