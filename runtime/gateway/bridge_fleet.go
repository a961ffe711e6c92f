package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/nats-io/nats.go"

	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
)

// Bridged calls across replicas (bridge.go). The upstream request an
// input_required round asks for is parked on the replica whose upstream
// call waits; the requestState names that replica. A retry that a load
// balancer sends to another replica opens there (the state is sealed with
// the fleet's key) and is handed to the named replica with request/reply
// on <fleet>.replica.<replica>.retry; that replica serves it as if the
// client had sent it there, on a one-request connection, and replies with
// the response: the call's result, or its next input_required round.

// fleetRetry is what travels on <fleet>.replica.<replica>.retry.
type fleetRetry struct {
	Identity  string          `json:"identity"`
	Method    string          `json:"method"` // how the identity authenticated
	Request   json.RawMessage `json:"request"`
	TimeoutMs int64           `json:"timeoutMs"`
}

// replicaName is this replica's name in its fleet, "" outside one.
func (g *Gateway) replicaName() string {
	if fs := g.fleetSess.Load(); fs != nil {
		return fs.node.Replica()
	}
	return ""
}

// startRetries serves the retries other replicas hand to this one.
func (fs *fleetSessions) startRetries() error {
	subj := fs.node.Subject("replica", cluster.Token(fs.node.Replica()), "retry")
	if _, err := fs.node.Subscribe(subj, "a handed-over retry", func(m *cluster.Msg) { go fs.serveRetry(m) }); err != nil {
		return err
	}
	return nil
}

// retryElsewhere hands a retry whose parked requests wait on replica to
// it, and writes its answer to the client.
func (s *session) retryElsewhere(req *jsonrpc.Request, replica, server string) {
	fs := s.g.fleetSess.Load()
	wait := ownerMargin
	if u := s.g.route.upstreams().byName[server]; u != nil {
		wait += u.cfg.Timeout
	}
	raw, err := wire.Append(nil, req)
	if err != nil || fs == nil {
		s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: the call this requestState belongs to waits on replica %q, which cannot be reached from here", replica)
		return
	}
	b, _ := json.Marshal(fleetRetry{Identity: s.id.Name, Method: s.id.Method, Request: raw, TimeoutMs: wait.Milliseconds()})
	ctx, cancel := context.WithTimeout(s.ctx, wait)
	defer cancel()
	reply, err := fs.node.Request(ctx, fs.node.Subject("replica", cluster.Token(replica), "retry"), b)
	if err != nil {
		reason := err.Error()
		if errors.Is(err, nats.ErrNoResponders) {
			reason = "it is gone, and the call with it"
		}
		s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: the call this requestState belongs to waits on replica %q: %s", replica, reason)
		return
	}
	msg, err := wire.Decode(reply)
	resp, ok := msg.(*jsonrpc.Response)
	if err != nil || !ok {
		fs.log.Warn("cluster: refused a retry's answer from NATS", "replica", replica, "err", err)
		s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: replica %q answered the retry with garbage", replica)
		return
	}
	resp.ID = req.ID
	s.write(s.ctx, resp)
}

// serveRetry serves a retry another replica handed over, and replies with
// its response.
func (fs *fleetSessions) serveRetry(m *cluster.Msg) {
	var r fleetRetry
	err := json.Unmarshal(m.Data, &r)
	var req *jsonrpc.Request
	if err == nil {
		msg, derr := wire.Decode(r.Request)
		var ok bool
		if req, ok = msg.(*jsonrpc.Request); derr != nil || !ok || !req.IsCall() || r.Identity == "" {
			err = errors.New("not a request of an identity")
		}
	}
	if err != nil {
		fs.log.Warn("cluster: refused a handed-over retry from NATS", "err", err)
		return // the sender times out
	}
	c := &relayConn{peer: &peer{id: auth.Identity{Name: r.Identity, Method: r.Method}, transport: transportStreamable},
		req: req, resp: make(chan *jsonrpc.Response, 1), done: make(chan struct{})}
	defer c.Close()
	fs.g.serveOne(c)
	t := time.NewTimer(min(max(time.Duration(r.TimeoutMs)*time.Millisecond, time.Second), time.Hour))
	defer t.Stop()
	select {
	case resp := <-c.resp:
		if b, err := wire.Append(nil, resp); err == nil {
			_ = m.Respond(b)
		}
	case <-t.C:
	case <-fs.g.ctx.Done():
	}
}

// relayConn is the one-request connection of a retry another replica
// handed over: its response goes back over NATS; what else the call sends
// (progress, logs) is dropped.
type relayConn struct {
	peer *peer

	mu      sync.Mutex
	req     *jsonrpc.Request
	resp    chan *jsonrpc.Response // capacity 1
	done    chan struct{}
	closed  bool
	onClose func()
}

func (c *relayConn) SessionID() string { return "" }
func (c *relayConn) PeerInfo() any     { return c.peer }

func (c *relayConn) TakeRequest() *jsonrpc.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	req := c.req
	c.req = nil
	return req
}

func (c *relayConn) OnClose(f func()) { c.onClose = f }

func (c *relayConn) Read(ctx context.Context) (jsonrpc.Message, error) {
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

func (c *relayConn) Write(_ context.Context, msg jsonrpc.Message) error {
	if r, ok := msg.(*jsonrpc.Response); ok {
		select {
		case c.resp <- r:
		default:
		}
	}
	return nil
}

func (c *relayConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	f := c.onClose
	c.mu.Unlock()
	if f != nil {
		f()
	}
	return nil
}
