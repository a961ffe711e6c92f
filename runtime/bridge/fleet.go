package bridge

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

// Bridged calls across replicas (parked.go). The upstream request an
// input_required round asks for is parked on the replica whose upstream
// call waits; the requestState names that replica. A retry that a load
// balancer sends to another replica opens there (the state is sealed with
// the fleet's key) and is handed to the named replica ([Fleet.HandOver]);
// that replica serves it as if the client had sent it there, on a
// one-request connection ([relayConn]), and replies with the response:
// the call's result, or its next input_required round.

// retry is what travels from one replica to the other.
type retry struct {
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
	data, _ := json.Marshal(retry{Identity: id.Name, Method: id.Method, Request: raw, TimeoutMs: wait.Milliseconds()})
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

// ServeRetry serves a retry another replica handed over (what
// [Fleet.HandOver] sent) as if its client had sent it here, on a
// one-request connection, and returns the reply to send back: the
// response, encoded; nil when there is none (the retry is refused, or no
// response came within its wait or before ctx ended), and the sender
// times out.
func (b *Bridge) ServeRetry(ctx context.Context, data []byte) []byte {
	r, req, err := decodeRetry(data)
	if err != nil {
		b.g.Log().Warn("cluster: refused a handed-over retry from NATS", "err", err)
		return nil
	}
	c := &relayConn{peer: b.g.PeerOf(auth.Identity{Name: r.Identity, Method: r.Method}), req: req,
		resp: make(chan *jsonrpc.Response, 1), done: make(chan struct{})}
	defer c.Close()
	b.g.ServeOne(c)
	t := time.NewTimer(min(max(time.Duration(r.TimeoutMs)*time.Millisecond, time.Second), time.Hour))
	defer t.Stop()
	select {
	case resp := <-c.resp:
		if out, err := wire.Append(nil, resp); err == nil {
			return out
		}
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

// decodeRetry decodes a retry another replica handed over.
func decodeRetry(data []byte) (retry, *jsonrpc.Request, error) {
	var r retry
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

// relayConn is the one-request connection (a transports.OneRequest) of a
// retry another replica handed over ([Bridge.ServeRetry]): its response
// goes back to that replica; what else the call sends (progress, logs) is
// dropped.
type relayConn struct {
	peer any

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

// OverNATS is the Fleet of a replica over its cluster node: a retry goes
// by request/reply on <fleet>.replica.<replica>.retry.
func OverNATS(node *cluster.Node) Fleet { return natsFleet{node} }

type natsFleet struct{ node *cluster.Node }

func (f natsFleet) Replica() string { return f.node.Replica() }

func (f natsFleet) HandOver(ctx context.Context, replica string, retry []byte) ([]byte, error) {
	reply, err := f.node.Request(ctx, f.node.Subject("replica", cluster.Token(replica), "retry"), retry)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, ErrReplicaGone
	}
	return reply, err
}

// ServeRetries serves, until ctx ends, the retries other replicas hand to
// this one over node (ServeRetry), each on its own goroutine.
func (b *Bridge) ServeRetries(ctx context.Context, node *cluster.Node) error {
	subj := node.Subject("replica", cluster.Token(node.Replica()), "retry")
	_, err := node.Subscribe(subj, "a handed-over retry", func(m *cluster.Msg) {
		go func() {
			if reply := b.ServeRetry(ctx, m.Data); reply != nil {
				_ = m.Respond(reply)
			}
		}()
	})
	return err
}
