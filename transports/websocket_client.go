package transports

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/auth"
)

// WebSocketClientTransport connects to an MCP server over WebSocket
// (subprotocol "mcp", one JSON-RPC message per text frame).
//
// Concurrency and lifetime: the transport must not be changed after the
// first Connect; Connect may be called concurrently. On the connection,
// Write may be called concurrently (writes are serialized and bounded by a
// 30 s timeout, never by the ctx passed to Write) and Read must not be
// called concurrently with itself; a background goroutine reads the socket
// and another sends keepalive pings. Close sends a close frame, waits at
// most 2 s for the server's, stops both goroutines and makes a pending Read
// return [ErrClosed]; a normal close by the server makes Read return io.EOF
// after the messages that came before it.
type WebSocketClientTransport struct {
	// URL is the server's endpoint, ws:// or wss:// (http:// and https://
	// are accepted as synonyms).
	URL string
	// Header is sent with the opening handshake (e.g. Authorization).
	Header http.Header
	// HTTPClient performs the opening handshake; nil means
	// http.DefaultClient. A Timeout on it bounds the handshake only.
	HTTPClient *http.Client
	// Logger receives warnings and debug messages; nil discards them.
	Logger *slog.Logger
	// MaxMessageBytes caps one incoming message; 0 means 64 MiB. A larger
	// message closes the connection with status 1009.
	MaxMessageBytes int64
	// PingInterval is how long the connection may receive nothing before a
	// ping is sent; a pong must come back within the same interval or the
	// connection is closed. Zero means 30 s; negative disables pings.
	PingInterval time.Duration
	// DisableCompression stops offering permessage-deflate.
	DisableCompression bool
	// HandshakeTimeout bounds the opening handshake (connecting, the
	// upgrade request and its answer), besides the ctx of Connect, so that
	// a server that accepts the connection and never answers cannot hold
	// Connect forever. Zero means 30 s; negative means no bound but ctx.
	HandshakeTimeout time.Duration
	// Budget, when not nil, is charged with the bytes of every incoming
	// message as they arrive, until Read returns it. A message that cannot
	// get its bytes within a second is read on and discarded without being
	// kept; when it was a response, Read returns a local error response
	// (see [IsLocal]) naming the budget in its place. See [ByteBudget] for
	// what is not counted.
	Budget *ByteBudget
	// OAuthHandler, when not nil, puts its token on the opening handshake
	// and is asked to authorize on a 401 (or a 403 insufficient_scope),
	// after which the handshake is tried once more.
	OAuthHandler auth.OAuthHandler
}

// wsDefaultHandshakeTimeout is the default HandshakeTimeout.
const wsDefaultHandshakeTimeout = 30 * time.Second

// Connect performs the opening handshake, bounded by ctx and by
// HandshakeTimeout, and returns the connection. It fails when the server
// does not select the "mcp" subprotocol. Cancelling ctx after Connect returned does not affect the
// connection.
//
// Writes are serialized and bounded by an internal timeout, never by the
// context passed to Write (an expiring context would close the whole
// WebSocket). Messages arrive in order through Read; a message that is not
// a valid JSON-RPC message is logged and dropped.
func (t *WebSocketClientTransport) Connect(ctx context.Context) (Connection, error) {
	u, err := url.Parse(t.URL)
	if err != nil {
		return nil, fmt.Errorf("connecting to WebSocket server: parsing URL: %w", err)
	}
	switch u.Scheme {
	case "ws", "wss", "http", "https":
	default:
		return nil, fmt.Errorf("connecting to WebSocket server: URL %q is not ws, wss, http or https", t.URL)
	}
	log := t.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hc := t.HTTPClient
	if hc == nil && t.OAuthHandler != nil {
		hc = http.DefaultClient
	}
	opts := &websocket.DialOptions{
		HTTPClient:      WithOAuth(hc, t.OAuthHandler),
		HTTPHeader:      t.Header,
		Subprotocols:    []string{wsSubprotocol},
		CompressionMode: websocket.CompressionContextTakeover,
	}
	if t.DisableCompression {
		opts.CompressionMode = websocket.CompressionDisabled
	}
	if d := t.HandshakeTimeout; d >= 0 {
		if d == 0 {
			d = wsDefaultHandshakeTimeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	ws, resp, err := websocket.Dial(ctx, t.URL, opts)
	if err != nil {
		if resp != nil && resp.Body != nil {
			if s := readSnippet(resp.Body); s != "" {
				return nil, fmt.Errorf("connecting to WebSocket server %s: %w (response: %s)", u.Redacted(), err, s)
			}
		}
		return nil, fmt.Errorf("connecting to WebSocket server %s: %w", u.Redacted(), err)
	}
	if p := ws.Subprotocol(); p != wsSubprotocol {
		_ = ws.Close(websocket.StatusProtocolError, "subprotocol mcp required")
		return nil, fmt.Errorf("connecting to WebSocket server %s: the server did not select the %q subprotocol (selected %q)",
			u.Redacted(), wsSubprotocol, p)
	}
	c := newWSConn(ws, log, true, "", t.MaxMessageBytes, t.PingInterval)
	c.budget = t.Budget
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.readLoop()
	}()
	return c, nil
}
