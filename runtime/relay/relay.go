package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Client is the client session an Out asks.
type Client interface {
	// Send writes the request numbered id to the client; rel is the
	// client request it relates to (invalid: none).
	Send(ctx context.Context, rel jsonrpc.ID, id int64, method string, params json.RawMessage) error
	// Cancelled tells the client that request id, related to rel, ended
	// before its answer: ctx is the one Ask was given, done.
	Cancelled(ctx context.Context, rel jsonrpc.ID, id int64)
}

// Out is one session's requests to its client, awaiting their answers.
type Out struct {
	next    atomic.Int64
	mu      sync.Mutex
	waiting map[int64]chan *jsonrpc.Response // made on first use
	closed  bool
}

var errGone = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "edge-mcp: the downstream client disconnected"}

// Ask sends a request to c (on behalf of an upstream) and waits for its
// answer, until ctx ends (then c is told it was cancelled) or Close.
func (o *Out) Ask(ctx context.Context, c Client, rel jsonrpc.ID, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	id := o.next.Add(1)
	ch := make(chan *jsonrpc.Response, 1)
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil, errGone
	}
	if o.waiting == nil {
		o.waiting = make(map[int64]chan *jsonrpc.Response)
	}
	o.waiting[id] = ch
	o.mu.Unlock()
	if err := c.Send(ctx, rel, id, method, params); err != nil {
		o.forget(id)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "edge-mcp: forwarding to the client: " + err.Error()}
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, errGone
		}
		if resp.Error != nil {
			if e, ok := resp.Error.(*jsonrpc.Error); ok {
				return nil, e
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: resp.Error.Error()}
		}
		return resp.Result, nil
	case <-ctx.Done():
		o.forget(id)
		c.Cancelled(ctx, rel, id)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "edge-mcp: request cancelled"}
	}
}

func (o *Out) forget(id int64) {
	o.mu.Lock()
	delete(o.waiting, id)
	o.mu.Unlock()
}

// Answer hands r to request number id, when it still waits.
func (o *Out) Answer(id int64, r *jsonrpc.Response) {
	o.mu.Lock()
	ch := o.waiting[id]
	delete(o.waiting, id)
	o.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

// Close ends the requests waiting (the client disconnected) and refuses
// new ones.
func (o *Out) Close() {
	o.mu.Lock()
	waiting := o.waiting
	o.waiting, o.closed = nil, true
	o.mu.Unlock()
	for _, ch := range waiting {
		close(ch)
	}
}

// Served is one link's requests from its upstream being served.
type Served struct {
	mu    sync.Mutex
	calls map[jsonrpc.ID]context.CancelFunc // made on first use
}

// Serve runs serve for the upstream's request id on its own goroutine,
// with a context of parent that Cancel(id) ends.
func (s *Served) Serve(parent context.Context, id jsonrpc.ID, serve func(context.Context)) {
	ctx, cancel := context.WithCancel(parent)
	s.mu.Lock()
	if s.calls == nil {
		s.calls = make(map[jsonrpc.ID]context.CancelFunc)
	}
	s.calls[id] = cancel
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			delete(s.calls, id)
			s.mu.Unlock()
			cancel()
		}()
		serve(ctx)
	}()
}

// Cancel cancels the request id being served, if it still is.
func (s *Served) Cancel(id jsonrpc.ID) {
	s.mu.Lock()
	cancel := s.calls[id]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Newest returns the newest of calls that belong to a session, when they
// all belong to one; sessions is the number of sessions the calls belong
// to (the call is nil when it is more than one: guessing could hand one
// client's request to another). of tells a call's session (ok false:
// none) and when it started.
func Newest[C comparable, S comparable](calls map[int64]C, of func(C) (s S, start time.Time, ok bool)) (found C, sessions int) {
	var none C
	var newest time.Time
	var one S              // the session of the first call seen
	var several map[S]bool // made only when a second session shows up
	seen := false
	for _, c := range calls {
		s, start, ok := of(c)
		if !ok {
			continue
		}
		if !seen {
			one, seen = s, true
		} else if s != one {
			if several == nil {
				several = map[S]bool{one: true}
			}
			several[s] = true
		}
		if found == none || start.After(newest) {
			found, newest = c, start
		}
	}
	switch {
	case len(several) > 1:
		return none, len(several)
	case found == none:
		return none, 0
	}
	return found, 1
}

// Unrelated says why a request related to no call cannot be given to a
// client: callSessions sessions have calls in flight to its server (more
// than one), or else connected sessions are connected ("" when exactly
// one is: the request is for it).
func Unrelated(callSessions, connected int) string {
	switch {
	case callSessions > 1:
		return fmt.Sprintf("%d client sessions have calls in flight to it", callSessions)
	case connected == 1:
		return ""
	case connected == 0:
		return "no client session is connected"
	default:
		return fmt.Sprintf("no client call is in flight to it and %d client sessions are connected", connected)
	}
}

// Refusal is the answer to a server→client request of server that
// belongs to no one client (why), and the attributes to log it with.
// perClient: the server is already "session": "per_client" (the request
// came on the gateway's own session, which lists the catalogue).
func Refusal(method, server, why string, perClient bool) (*jsonrpc.Error, []any) {
	what := method
	if i := strings.IndexByte(what, '/'); i > 0 {
		what = what[:i]
	}
	fix, hint := `set "session": "per_client" for this server`, fmt.Sprintf(`; set "session": "per_client" for server %q`, server)
	if perClient {
		why += "; it came on the gateway's own session (the catalogue), outside any client's call"
		fix, hint = "", ""
	}
	attrs := []any{"method", method, "reason", why}
	if fix != "" {
		attrs = append(attrs, "fix", fix)
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
		`edge-mcp: cannot tell which client this %s request belongs to (%s)%s`, what, why, hint)}, attrs
}
