package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// Bridged calls across replicas (parked.go). The upstream request an
// input_required round asks for is parked on the replica whose upstream
// call waits; the requestState names that replica. A retry that a load
// balancer sends to another replica opens there (the state is sealed with
// the fleet's key) and is handed to the named replica ([Fleet.HandOver]);
// that replica serves it as if the client had sent it there, on a
// one-request connection ([RelayConn]), and replies with the response:
// the call's result, or its next input_required round.

// Retry is what travels from one replica to the other.
type Retry struct {
	Identity  string          `json:"identity"`
	Method    string          `json:"method"` // how the identity authenticated
	Request   json.RawMessage `json:"request"`
	TimeoutMs int64           `json:"timeoutMs"`
}

// retryElsewhere hands a retry of s whose parked requests wait on replica
// to it, and writes its answer to the client.
func (b *Bridge) retryElsewhere(s Session, req *jsonrpc.Request, replica, server string) {
	f := b.g.Fleet()
	wait := b.g.RetryWait(server)
	raw, err := wire.Append(nil, req)
	if err != nil || f == nil {
		replyError(s, req.ID, jsonrpc.CodeInternalError, "edge-mcp: the call this requestState belongs to waits on replica %q, which cannot be reached from here", replica)
		return
	}
	id := s.Identity()
	data, _ := json.Marshal(Retry{Identity: id.Name, Method: id.Method, Request: raw, TimeoutMs: wait.Milliseconds()})
	ctx, cancel := context.WithTimeout(s.Context(), wait)
	defer cancel()
	answer, err := f.HandOver(ctx, replica, data)
	if err != nil {
		replyError(s, req.ID, jsonrpc.CodeInternalError, "edge-mcp: the call this requestState belongs to waits on replica %q: %s", replica, err.Error())
		return
	}
	msg, err := wire.Decode(answer)
	resp, ok := msg.(*jsonrpc.Response)
	if err != nil || !ok {
		b.g.Log().Warn("cluster: refused a retry's answer from NATS", "replica", replica, "err", err)
		replyError(s, req.ID, jsonrpc.CodeInternalError, "edge-mcp: replica %q answered the retry with garbage", replica)
		return
	}
	resp.ID = req.ID
	s.Write(s.Context(), resp)
}

// DecodeRetry decodes a retry another replica handed over.
func DecodeRetry(data []byte) (Retry, *jsonrpc.Request, error) {
	var r Retry
	if err := json.Unmarshal(data, &r); err != nil {
		return r, nil, err
	}
	msg, err := wire.Decode(r.Request)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok || !req.IsCall() || r.Identity == "" {
		return r, nil, errors.New("not a request of an identity")
	}
	return r, req, nil
}

// Wait is how long the replica serving r waits for its response.
func (r Retry) Wait() time.Duration {
	return min(max(time.Duration(r.TimeoutMs)*time.Millisecond, time.Second), time.Hour)
}

// RelayConn is the one-request connection (a transports.OneRequest) of a
// retry another replica handed over: its response goes back to that
// replica; what else the call sends (progress, logs) is dropped. It ends
// with Close.
type RelayConn struct {
	peer any

	mu      sync.Mutex
	req     *jsonrpc.Request
	resp    chan *jsonrpc.Response // capacity 1
	done    chan struct{}
	closed  bool
	onClose func()
}

// NewRelayConn makes the connection serving req for peer (what PeerInfo
// returns).
func NewRelayConn(peer any, req *jsonrpc.Request) *RelayConn {
	return &RelayConn{peer: peer, req: req, resp: make(chan *jsonrpc.Response, 1), done: make(chan struct{})}
}

// Response waits for the response, at most wait or until done is closed;
// nil when none came.
func (c *RelayConn) Response(wait time.Duration, done <-chan struct{}) *jsonrpc.Response {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case resp := <-c.resp:
		return resp
	case <-t.C:
	case <-done:
	}
	return nil
}

func (c *RelayConn) SessionID() string { return "" }
func (c *RelayConn) PeerInfo() any     { return c.peer }

func (c *RelayConn) TakeRequest() *jsonrpc.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	req := c.req
	c.req = nil
	return req
}

func (c *RelayConn) OnClose(f func()) { c.onClose = f }

func (c *RelayConn) Read(ctx context.Context) (jsonrpc.Message, error) {
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

func (c *RelayConn) Write(_ context.Context, msg jsonrpc.Message) error {
	if r, ok := msg.(*jsonrpc.Response); ok {
		select {
		case c.resp <- r:
		default:
		}
	}
	return nil
}

func (c *RelayConn) Close() error {
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
