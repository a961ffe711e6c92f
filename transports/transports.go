// Package transports carries JSON-RPC messages between edge-mcp and its peers:
// client transports reach upstream MCP servers, server transports accept
// downstream MCP clients. Every transport yields a [Connection]; nothing here
// knows about tools, routing or policies.
//
// Client side: [StreamableClientTransport], [WebSocketClientTransport] and
// [CommandTransport] (stdio) each return one Connection from Connect.
// Server side: [StreamableServer], [SSEServer] and [WebSocketServer] are
// http.Handlers that hand a Connection per client session to their accept
// function. [Guard] is the Origin/Host check of all of them, exported so that
// every other HTTP surface can sit behind the same rules.
//
// # Hostile and slow peers
//
// Downstream: serve the server transports with [NewHTTPServer] on a
// listener wrapped by [LimitListener], with [DefaultHTTPLimits] or
// [HTTPLimits] of your own: request headers, POST bodies and idle
// keep-alive connections are then bounded in time, and connections in
// number, while SSE streams and WebSockets live as long as their sessions.
//
// Upstream: give every client transport the same [ByteBudget] (their
// Budget field) to bound the bytes of upstream messages held in memory at
// once; a call whose answer does not fit is answered with a local error.
//
// # Stream resumption
//
// [StreamableServer] gives every event of its event streams an SSE id and
// keeps the recent ones in a bounded store per session
// ([StreamableServerOptions].EventStoreSize, 256 messages and at most 4 MiB
// by default). A client that reconnects with GET and Last-Event-ID gets the
// events it missed on that stream, in order, then the live stream (for a
// POST stream whose response is still due, the rest up to the response).
// When the missed events are no longer stored, or the id is unknown to the
// session, the stream starts fresh with notifications/tools/list_changed,
// prompts/list_changed and resources/list_changed so that the client
// re-lists; a malformed Last-Event-ID gets 400. Clients of protocol
// 2025-11-25 get a priming event (id, "retry:", empty data) at the start of
// each event stream (SEP-1699). The store is guarded by its session's lock
// and is dropped with the session.
//
// # Why streamable HTTP is implemented here
//
// streamable_client.go and the server files, one per stage
// (streamable_server.go: options and session table; _post: a POST and its
// call; _get: the standalone and resuming GET streams and DELETE; _stream:
// writing a response stream; _session: a session's queues and idle reaper;
// _resume, _stateless, _fleet and _v2026), speak the protocol that
// go-sdk's mcp/streamable.go speaks, and go-sdk's StreamableHTTPHandler and StreamableClientTransport
// would serve a plain client or server. A gateway needs what they do not
// offer as hooks: a [ByteBudget] charged with an upstream answer's bytes
// while they are read, shared by every upstream, so that greedy servers
// get an error instead of the process's memory; the [StreamableFleet]
// hooks, with which replicas of a fleet name sessions, adopt each other's
// session ids and hand standalone-stream messages to the replica holding
// the GET; resumption bounded per session ([StreamableServerOptions].EventStoreSize)
// that falls back to a fresh stream announcing list_changed; one Connection
// per 2026-07-28 request ([OneRequest]); an answer handed to the call on
// the goroutine that posted it ([StreamReader]); and a synthesized answer
// for every accepted request the server fails to answer. The cost is a
// second implementation of one protocol. So that the two cannot drift,
// runtime/gateway's TestConformance2026ThroughGateway runs every server
// scenario of the conformance suite (--suite all, and each revision's
// required set) against go-sdk's everything-server directly and through
// edge-mcp, which is this package on both sides, and fails on any check
// that passes directly but not through; TestStreamableServerGoSDKClient
// and the go-sdk clients of the gateway tests speak to the server side.
//
// # Concurrency and lifetime
//
// Every Connection of this package follows the go-sdk's contract: Read must
// not be called concurrently with itself; Write may be called concurrently
// (with itself and with Read), and the ctx passed to it bounds at most that
// Write's own wait: its end never tears down the shared connection; Close
// may be called at any time, from any goroutine, more than once, and
// unblocks a pending Read, which then returns an error (io.EOF or
// [ErrClosed], as each type says). Read also returns when its ctx ends,
// leaving the connection usable.
//
// A server type's Close ends every session it accepted (their Reads return)
// and answers later requests with 503; it does not wait for the gateway to
// stop reading. Options structs, transports and servers are not to be
// changed after their first use; servers and [Guard] are safe for
// concurrent use.
package transports

import (
	"context"
	"errors"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Connection is one logical JSON-RPC connection, the go-sdk's interface, so
// the go-sdk's own transports and the ones in this package are
// interchangeable.
//
// Read must not be called concurrently with itself; Write may be called
// concurrently; Close may be called at any time, more than once, and unblocks
// a pending Read, which then returns an error.
type Connection = mcp.Connection

// Sentinel errors shared by the transports.
var (
	// ErrSessionExpired is returned by client connections when the server no
	// longer knows the session (streamable HTTP 404): the caller should
	// re-initialize on a new connection.
	ErrSessionExpired = errors.New("session expired")
	// ErrClosed is returned by operations on a closed connection.
	ErrClosed = errors.New("connection closed")
)

// ending is the end of a connection or session, shared by the connections
// of this package: the first call of end runs its cleanup, records why the
// connection ended and closes done, which unblocks whatever waits on it
// (Read, handlers delivering messages, stream pumps); later calls do
// nothing. It is safe for concurrent use; err may be read once done is
// closed. Call init before use.
type ending struct {
	once sync.Once
	done chan struct{}
	err  error // why it ended; written before done is closed
}

func (e *ending) init() { e.done = make(chan struct{}) }

// end ends it for reason err, running cleanup (when not nil) before done
// is closed, the first time it is called; it reports whether this call
// did.
func (e *ending) end(err error, cleanup func()) bool {
	first := false
	e.once.Do(func() {
		first = true
		if cleanup != nil {
			cleanup()
		}
		e.err = err
		close(e.done)
	})
	return first
}

// ended reports whether end has been called and has returned.
func (e *ending) ended() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

type peerKey struct{}

// WithPeer returns a context that says who the peer of an HTTP request is
// (set by authentication middleware in front of a server transport). Server
// transports attach it to the connection a request opens; [Peer] reads it.
func WithPeer(ctx context.Context, peer any) context.Context {
	return context.WithValue(ctx, peerKey{}, peer)
}

// PeerFromContext returns the value set by [WithPeer], or nil.
func PeerFromContext(ctx context.Context) any { return ctx.Value(peerKey{}) }

// peered is implemented by connections that know their peer: the server
// connections of this package, and in-process connections of callers.
type peered interface{ PeerInfo() any }

// Peer returns who opened a server connection, as [WithPeer] said on the
// request that opened it, or nil. A connection made elsewhere can say who
// its peer is with a PeerInfo() any method.
func Peer(conn Connection) any {
	if p, ok := conn.(peered); ok {
		return p.PeerInfo()
	}
	return nil
}

type relatedKey struct{}

// WithRelated returns a context that marks messages written with it as sent
// in the context of the request with the given id. Server transports use it
// to pick the stream a request or notification travels on (for streamable
// HTTP: the response stream of that request, when it is still open).
func WithRelated(ctx context.Context, id jsonrpc.ID) context.Context {
	return context.WithValue(ctx, relatedKey{}, id)
}

// RelatedFromContext returns the id set by [WithRelated].
func RelatedFromContext(ctx context.Context) (jsonrpc.ID, bool) {
	id, ok := ctx.Value(relatedKey{}).(jsonrpc.ID)
	return id, ok && id.IsValid()
}

// related is stored in jsonrpc.Request.Extra by client transports that know
// which outgoing request a server-to-client message belongs to.
type related struct{ id jsonrpc.ID }

// SetRelated records on an incoming request or notification that it arrived in
// the context of the outgoing request id (for streamable HTTP: on that
// request's response stream).
func SetRelated(req *jsonrpc.Request, id jsonrpc.ID) { req.Extra = related{id} }

// RelatedTo reports the outgoing request an incoming message arrived with,
// when the transport knows it.
func RelatedTo(msg jsonrpc.Message) (jsonrpc.ID, bool) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return jsonrpc.ID{}, false
	}
	r, ok := req.Extra.(related)
	return r.id, ok
}

// local marks responses that a client transport made up itself because the
// server never answered (its stream ended, its HTTP request failed).
type local struct{}

// SetLocal marks resp as made up by the transport rather than sent by the
// server.
func SetLocal(resp *jsonrpc.Response) { resp.Extra = local{} }

// IsLocal reports whether resp was made up by the transport (see SetLocal).
func IsLocal(resp *jsonrpc.Response) bool {
	_, ok := resp.Extra.(local)
	return ok
}
