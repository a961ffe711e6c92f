// Package interceptors connects edge-mcp to interceptor servers: MCP
// servers hosting SEP-2624 interceptors, discovered with interceptors/list
// and invoked with interceptor/invoke over streamable HTTP. A remote
// interceptor is a policy/intercept Interceptor like any other, so it
// joins the same chain as Wasm modules. Register serves a set of
// interceptors the same way from a go-sdk server.
package interceptors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

// Defaults of ServerOptions.
const (
	DefaultMaxResultBytes  = 4 << 20
	DefaultMaxInterceptors = 1024
)

// ErrTooLarge is the error of an answer larger than MaxResultBytes.
var ErrTooLarge = errors.New("answer too large")

// ServerOptions configure the connection to one interceptor server.
type ServerOptions struct {
	// URL is the server's streamable HTTP endpoint.
	URL string
	// Header is added to every request (e.g. Authorization).
	Header http.Header
	// HTTPClient carries the requests (http.DefaultClient when nil).
	HTTPClient *http.Client
	// MaxResultBytes caps one answer (DefaultMaxResultBytes when 0).
	MaxResultBytes int
	// MaxInterceptors caps interceptors/list (DefaultMaxInterceptors when 0).
	MaxInterceptors int
	// Logger receives the go-sdk client's log; nil discards.
	Logger *slog.Logger
	// Transport, when set, carries the session instead of streamable HTTP
	// at URL (legacy SSE, WebSocket, stdio); it is connected again on a
	// redial, so it must be reusable. Header and HTTPClient are then the
	// transport's business.
	Transport mcp.Transport
	// OnReconnect, when set, is called after a call found the session
	// gone and dialed a new one (the server may list other interceptors
	// now).
	OnReconnect func()
	// SessionGone, when set, also reports errors that mean the session
	// is gone (the request was not processed, a new session may be asked)
	// beyond go-sdk's own: those Transport's connection answers with.
	SessionGone func(error) bool
}

// Client is a connection to one interceptor server. A call that finds
// the session gone (the server restarted, the connection closed) dials
// again, at most once a second, and retries once.
type Client struct {
	name string
	opts ServerOptions
	dial func(ctx context.Context) (*mcp.ClientSession, error)

	mu       sync.Mutex
	cs       *mcp.ClientSession
	lastDial time.Time
}

// rawParams and rawResult carry the interceptor methods' params and results
// as raw JSON, so that nothing is lost or reshaped before the chain checks
// it.
type rawParams struct {
	mcp.ParamsBase
	raw json.RawMessage
}

func (p *rawParams) MarshalJSON() ([]byte, error) {
	if len(p.raw) == 0 {
		return []byte("{}"), nil
	}
	return p.raw, nil
}

func (p *rawParams) UnmarshalJSON(b []byte) error {
	p.raw = append(p.raw[:0], b...)
	return nil
}

type rawResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (r *rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

func (r *rawResult) UnmarshalJSON(b []byte) error {
	r.raw = append(r.raw[:0], b...)
	return nil
}

// headerTransport adds a fixed header to every request.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.header {
		r.Header[k] = vs
	}
	return t.base.RoundTrip(r)
}

// HeaderClient returns hc (http.DefaultClient when nil) adding header to
// every request; hc itself when header is empty.
func HeaderClient(hc *http.Client, header http.Header) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	if len(header) == 0 {
		return hc
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c := *hc
	c.Transport = &headerTransport{base: base, header: header}
	return &c
}

// lasting is a transport whose connection outlives the ctx of Connect
// (go-sdk's SSE client ties its event stream to that ctx) while Connect
// still gives up at ctx's end: the connection has a context of its own,
// cancelled when it is closed or when Connect gives up.
type lasting struct{ mcp.Transport }

type lastingConn struct {
	mcp.Connection
	cancel context.CancelFunc
}

func (c lastingConn) Close() error {
	err := c.Connection.Close()
	c.cancel()
	return err
}

func (l lasting) Connect(ctx context.Context) (mcp.Connection, error) {
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	conn, err := l.Transport.Connect(life)
	if !stop() || err != nil {
		cancel()
		if err == nil {
			_ = conn.Close()
			err = ctx.Err()
		}
		return nil, err
	}
	return lastingConn{conn, cancel}, nil
}

// Dial connects to the interceptor server named name.
func Dial(ctx context.Context, name string, opts ServerOptions) (*Client, error) {
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = DefaultMaxResultBytes
	}
	if opts.MaxInterceptors <= 0 {
		opts.MaxInterceptors = DefaultMaxInterceptors
	}
	hc := HeaderClient(opts.HTTPClient, opts.Header)
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "edge-mcp", Version: "interceptors"}, &mcp.ClientOptions{Logger: logger})
	for _, m := range []string{intercept.MethodList, intercept.MethodInvoke} {
		if err := mcp.AddSendingCustomMethod[*rawParams, *rawResult](client, m); err != nil {
			return nil, err
		}
	}
	c := &Client{name: name, opts: opts}
	c.dial = func(ctx context.Context) (*mcp.ClientSession, error) {
		var tr mcp.Transport = &mcp.StreamableClientTransport{Endpoint: opts.URL, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}
		if opts.Transport != nil {
			tr = lasting{opts.Transport}
		}
		cs, err := client.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			return nil, fmt.Errorf("connecting to interceptor server %q: %w", name, err)
		}
		return cs, nil
	}
	cs, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.cs, c.lastDial = cs, time.Now()
	return c, nil
}

func (c *Client) session() *mcp.ClientSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cs
}

// redial replaces the session old, unless another call already did or the
// last dial was less than a second ago.
func (c *Client) redial(ctx context.Context, old *mcp.ClientSession) (*mcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cs != old {
		return c.cs, nil
	}
	if time.Since(c.lastDial) < time.Second {
		return nil, fmt.Errorf("interceptor server %q: reconnected less than a second ago", c.name)
	}
	c.lastDial = time.Now()
	cs, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	_ = old.Close()
	c.cs = cs
	if c.opts.OnReconnect != nil {
		go c.opts.OnReconnect()
	}
	return cs, nil
}

// Name returns the server's name.
func (c *Client) Name() string { return c.name }

// Close ends the session.
func (c *Client) Close() error { return c.session().Close() }

// call sends one interceptor method and returns its raw result, or an
// *intercept.RPCError for a JSON-RPC error.
func (c *Client) call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	cs := c.session()
	res, err := mcp.CallCustomMethod[*rawParams, *rawResult](ctx, cs, method, &rawParams{raw: params})
	if sessionGone(err) || c.opts.SessionGone != nil && c.opts.SessionGone(err) {
		if cs, rerr := c.redial(ctx, cs); rerr == nil {
			res, err = mcp.CallCustomMethod[*rawParams, *rawResult](ctx, cs, method, &rawParams{raw: params})
		}
	}
	var wire *jsonrpc.Error
	if errors.As(err, &wire) {
		return nil, &intercept.RPCError{Code: wire.Code, Message: wire.Message}
	}
	if err != nil {
		return nil, err
	}
	if len(res.raw) > c.opts.MaxResultBytes {
		return nil, fmt.Errorf("%w: %s answer of %d bytes, limit %d", ErrTooLarge, method, len(res.raw), c.opts.MaxResultBytes)
	}
	return res.raw, nil
}

// codeRejected is go-sdk's JSON-RPC code for a request its transport did
// not deliver (jsonrpc2.ErrRejected): a 404 for a session the server no
// longer knows comes back as it.
const codeRejected = -32005

// sessionGone reports whether err means the session is gone and a new one
// may answer: the request was not processed, so it is safe to send again.
func sessionGone(err error) bool {
	var wire *jsonrpc.Error
	return errors.Is(err, mcp.ErrSessionMissing) || errors.Is(err, mcp.ErrConnectionClosed) ||
		errors.As(err, &wire) && wire.Code == codeRejected
}

// List sends interceptors/list (filtered by event when not empty) and
// returns the raw result.
func (c *Client) List(ctx context.Context, event string) (json.RawMessage, error) {
	params := json.RawMessage("{}")
	if event != "" {
		params, _ = json.Marshal(map[string]string{"event": event})
	}
	return c.call(ctx, intercept.MethodList, params)
}

// Invoke sends interceptor/invoke with raw params and returns the raw
// result.
func (c *Client) Invoke(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	return c.call(ctx, intercept.MethodInvoke, params)
}

// Interceptors lists the server's interceptors. An invalid descriptor is
// skipped and reported in skipped (each error names it); a list longer
// than MaxInterceptors, or an answer that is not a list, is an error.
func (c *Client) Interceptors(ctx context.Context) (ics []intercept.Interceptor, skipped []error, err error) {
	raw, err := c.List(ctx, "")
	if err != nil {
		return nil, nil, fmt.Errorf("interceptor server %q: %s: %w", c.name, intercept.MethodList, err)
	}
	var list struct {
		Interceptors []json.RawMessage `json:"interceptors"`
	}
	if err := json.Unmarshal(raw, &list); err != nil || list.Interceptors == nil {
		return nil, nil, fmt.Errorf("interceptor server %q: %s answered %.120q, not a list of interceptors", c.name, intercept.MethodList, raw)
	}
	if n := len(list.Interceptors); n > c.opts.MaxInterceptors {
		return nil, nil, fmt.Errorf("interceptor server %q lists %d interceptors, at most %d", c.name, n, c.opts.MaxInterceptors)
	}
	seen := map[string]bool{}
	for _, r := range list.Interceptors {
		d, err := intercept.ParseDescriptor(r)
		if err == nil && seen[d.Name] {
			err = fmt.Errorf("interceptor %q listed twice", d.Name)
		}
		if err != nil {
			skipped = append(skipped, fmt.Errorf("interceptor server %q: %w", c.name, err))
			continue
		}
		seen[d.Name] = true
		ics = append(ics, &remote{c: c, desc: d})
	}
	return ics, skipped, nil
}

// remote is one interceptor of a server.
type remote struct {
	c    *Client
	desc intercept.Descriptor
}

func (r *remote) Describe() intercept.Descriptor { return r.desc }

// Invoke sends interceptor/invoke and checks the answer: the right type
// and shape, the interceptor's own name, within the size cap.
func (r *remote) Invoke(ctx context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
	in := *inv
	in.Name = r.desc.Name
	params, err := json.Marshal(&in)
	if err != nil {
		return nil, err
	}
	raw, err := r.c.Invoke(ctx, params)
	if err != nil {
		kind := intercept.ErrFailed
		var rpc *intercept.RPCError
		switch {
		case errors.As(err, &rpc) && rpc.Code == intercept.CodeServerError || ctx.Err() != nil:
			kind = intercept.ErrTimeout
		case errors.Is(err, ErrTooLarge):
			kind = intercept.ErrBadResult
		}
		return nil, &intercept.FailError{Interceptor: inv.Name, Kind: kind, Err: fmt.Errorf("interceptor server %q: %w", r.c.name, err)}
	}
	res, err := intercept.ParseResult(raw, r.desc.Type)
	if err == nil && res.Interceptor != "" && res.Interceptor != r.desc.Name {
		err = fmt.Errorf("result names interceptor %q", res.Interceptor)
	}
	if err != nil {
		return nil, &intercept.FailError{Interceptor: inv.Name, Kind: intercept.ErrBadResult, Err: fmt.Errorf("interceptor server %q: %w", r.c.name, err)}
	}
	return res, nil
}

// EnforcesDeadline reports that a call returns at its context's deadline
// (intercept.DeadlineEnforcer).
func (r *remote) EnforcesDeadline() bool { return true }
