package transports

import (
	"crypto/rand"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-mcp/edge-mcp/internal/budget"
)

// WebSocketServerOptions configures a [WebSocketServer].
type WebSocketServerOptions struct {
	// Logger receives warnings and debug messages; nil discards them.
	Logger *slog.Logger
	// MaxMessageBytes caps one incoming message; 0 means 64 MiB. A larger
	// message closes the connection with status 1009.
	MaxMessageBytes int64
	// PingInterval is how long a connection may receive nothing before a
	// keepalive ping is sent; a pong must come back within the same
	// interval or the connection is closed. Zero means 30 s; negative
	// disables pings.
	PingInterval time.Duration
	// AllowedOrigins lists Origin header values accepted besides loopback
	// origins (for loopback hosts) and same-origin requests. "*" accepts any
	// Origin. The rules are those of [Guard].
	AllowedOrigins []string
	// AllowedHosts lists Host header values (with or without port) accepted
	// on a loopback listener besides loopback names. "*" accepts any Host.
	AllowedHosts []string
	// DisableCompression stops accepting permessage-deflate.
	DisableCompression bool
	// MessageReadTimeout bounds the reading of one message from its first
	// frame to its last, as BodyReadTimeout bounds a POST body of the
	// other server transports: a client that trickles a message has its
	// connection closed. Zero means the BodyReadTimeout of the
	// [HTTPLimits] of the [NewHTTPServer] that serves the request, or 30 s
	// under any other server; negative means no limit. The wait between
	// messages is not bounded by it (see PingInterval).
	MessageReadTimeout time.Duration
	// Budget, when set, returns the client-memory account each open
	// connection is charged to, a fixed estimate, from the peer of
	// [PeerFromContext]; one over it is refused with 429 before the
	// upgrade.
	Budget func(peer any) *budget.Account
}

// WebSocketServer accepts MCP clients over WebSocket at one endpoint. It is
// an [http.Handler]: a GET upgrade request offering the "mcp" subprotocol
// becomes a [Connection]; a request that does not offer it gets 400.
//
// A text frame that is not a JSON-RPC message is answered with a JSON-RPC
// error (id null; -32700 for malformed JSON, -32600 otherwise) and the
// connection stays open; a binary frame closes the connection with status
// 1003.
//
// Concurrency and lifetime: a WebSocketServer is safe for concurrent use;
// its options are fixed by [NewWebSocketServer]. Every request first passes
// the server's [Guard]. ServeHTTP runs the connection's read loop and
// returns when the connection has ended. On the Connection, Write may be
// called concurrently (writes are serialized; one the client does not take
// within 30 s closes the connection) and Read must not be called
// concurrently with itself. Close (of the Connection) sends a close frame,
// waits at most 2 s for the client's, and makes Read return [ErrClosed]; a
// normal close by the client makes Read return io.EOF after the messages
// that came before it. [WebSocketServer.Close] closes every connection with
// status 1001, waiting for them, and answers later requests with 503.
type WebSocketServer struct {
	serverBase  // its maxBody and keepAlive are unused
	maxMsg      int64
	ping        time.Duration
	msgTimeout  time.Duration // MessageReadTimeout
	compression websocket.CompressionMode
	conns       sessionTable[*wsConn]
}

// NewWebSocketServer returns a handler for one WebSocket endpoint. accept
// (not nil) is called synchronously in the HTTP handler with the Connection
// of every new WebSocket, before any of its messages is read; the caller
// reads from it until Read returns an error (io.EOF after a normal close by
// the client). The handler returns when the connection has ended.
func NewWebSocketServer(accept func(Connection), opts WebSocketServerOptions) *WebSocketServer {
	s := &WebSocketServer{
		serverBase: newServerBase(accept, opts.Logger, 0, 0,
			GuardOptions{AllowedOrigins: opts.AllowedOrigins, AllowedHosts: opts.AllowedHosts}),
		maxMsg:      opts.MaxMessageBytes,
		ping:        opts.PingInterval,
		msgTimeout:  opts.MessageReadTimeout,
		compression: websocket.CompressionNoContextTakeover,
	}
	s.streams = opts.Budget
	if opts.DisableCompression {
		s.compression = websocket.CompressionDisabled
	}
	return s
}

// Close closes every connection with status 1001 (going away) and makes
// later requests fail with 503.
func (s *WebSocketServer) Close() error {
	var wg sync.WaitGroup
	for _, c := range s.conns.shutdown() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.closeWith(websocket.StatusGoingAway, "server shutting down")
		}()
	}
	wg.Wait()
	return nil
}

// ServeHTTP implements [http.Handler]. It returns when the WebSocket has
// ended.
func (s *WebSocketServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.admit(w, r, s.conns.isClosed()) {
		return
	}
	if wsHeaderHasToken(r.Header, "Upgrade", "websocket") && !wsHeaderHasToken(r.Header, "Sec-Websocket-Protocol", wsSubprotocol) {
		http.Error(w, `Bad Request: the WebSocket subprotocol "mcp" is required (send Sec-WebSocket-Protocol: mcp)`,
			http.StatusBadRequest)
		return
	}
	release := holdStream(w, PeerFromContext(r.Context()), s.streams)
	if release == nil {
		return
	}
	defer release()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols: []string{wsSubprotocol},
		// The origin was checked above, with the rules of the other
		// server transports.
		InsecureSkipVerify: true,
		CompressionMode:    s.compression,
	})
	if err != nil {
		// Accept has written the error response.
		s.log.Debug("rejected WebSocket handshake", "remote", r.RemoteAddr, "error", err)
		return
	}
	log := s.log.With("remote", r.RemoteAddr)
	c := newWSConn(ws, log, false, rand.Text(), s.maxMsg, s.ping)
	c.peer = PeerFromContext(r.Context())
	c.setMessageTimeout(bodyReadTimeout(r, s.msgTimeout))
	if !s.conns.add(c.id, c) {
		c.end(ErrClosed, nil)
		c.cancel()
		_ = ws.CloseNow()
		c.wg.Wait()
		return
	}
	log.Debug("WebSocket connection opened", "session", c.id)

	s.accept(c)
	c.readLoop()
	c.wg.Wait()

	s.conns.remove(c.id, c)
	log.Debug("WebSocket connection closed", "session", c.id)
}

// wsHeaderHasToken reports whether a comma-separated header contains token
// (case-insensitively).
func wsHeaderHasToken(h http.Header, key, token string) bool {
	for _, v := range h[key] {
		for v != "" {
			var t string
			t, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
