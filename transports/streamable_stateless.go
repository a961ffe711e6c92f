package transports

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
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
	c := &statelessConn{out: make(chan jsonrpc.Message, maxStreamQueue)}
	c.init(PeerFromContext(r.Context()))
	s.accept(c)
	defer c.Close()
	if err := c.deliver(r.Context(), req); err != nil {
		writeJSONRPCError(w, http.StatusServiceUnavailable, req.ID, codeServerError, "request not delivered: "+err.Error(), nil)
		return
	}
	o := streamOut{w: w, preferSSE: prefersSSE(r.Header["Accept"])}
	c.pump(r.Context(), &o, req.ID, s.keepAlive)
	o.finish()
}

// statelessConn is the [Connection] of one 2026-07-28 request: Read returns
// that request, Write queues what the gateway answers, and the POST's
// handler writes it; the connection ends with the response.
type statelessConn struct {
	serverSession
	out chan jsonrpc.Message
}

// SessionID is empty: the request belongs to no session.
func (c *statelessConn) SessionID() string { return "" }

// Write queues msg for the POST's response; a message that does not fit
// the bounded queue is dropped, unless it is the response.
func (c *statelessConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if _, isResp := msg.(*jsonrpc.Response); !isResp {
		select {
		case c.out <- msg:
		case <-c.done:
			return fmt.Errorf("stateless request: %w", ErrClosed)
		default: // the client does not keep up: progress and logs are best effort
		}
		return nil
	}
	select {
	case c.out <- msg:
		return nil
	case <-c.done:
		return fmt.Errorf("stateless request: %w", ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("stateless request: %w", ctx.Err())
	}
}

// Close ends the connection; Read returns io.EOF.
func (c *statelessConn) Close() error {
	c.end(io.EOF, nil)
	return nil
}

// pump writes what the gateway sends until the response to id, the end of
// the connection or the client's departure.
func (c *statelessConn) pump(ctx context.Context, o *streamOut, id jsonrpc.ID, ka time.Duration) {
	var kaC <-chan time.Time
	if ka > 0 {
		t := time.NewTicker(ka)
		defer t.Stop()
		kaC = t.C
	}
	for {
		select {
		case msg := <-c.out:
			resp, final := msg.(*jsonrpc.Response)
			final = final && resp.ID == id
			if final && !o.started {
				o.status = statelessStatus(msg)
			}
			bp, err := encodePooled(msg)
			if err != nil {
				continue
			}
			err = o.writeBatch([]*[]byte{bp}, final)
			putEncodeBuf(bp)
			if err != nil || final {
				return
			}
		case <-kaC:
			if o.keepAlive() != nil {
				return
			}
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

// unsupportedVersion is the message and data of an UnsupportedProtocolVersion
// error for version.
func unsupportedVersion(version string) (string, []byte) {
	data, _ := json.Marshal(struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}{supportedVersions, version})
	return fmt.Sprintf("unsupported protocol version %q (supported: %s)", version, strings.Join(supportedVersions, ", ")), data
}
