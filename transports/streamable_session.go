package transports

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/budget"
)

// This file is a client session: the Connection handed to accept, its
// streams' queues, Write, Close and the idle timeout.

// streamableSession is one client session; it is the [Connection] handed
// to accept. Its id is the Mcp-Session-Id.
//
// Read must not be called concurrently with itself; Write and Close may be
// called concurrently with anything, and Close more than once. Close, a
// DELETE from the client, the idle timeout and [StreamableServer.Close] end
// the session: Read then returns io.EOF, pending HTTP handlers return and
// Write fails with [ErrClosed].
type streamableSession struct {
	serverSession
	srv  *StreamableServer
	refs atomic.Int32 // HTTP requests in flight
	last atomic.Int64 // time of the last request end, since srv.epoch

	mu         sync.Mutex
	closed     bool
	timer      *time.Timer
	calls      map[jsonrpc.ID]*responseStream // open POST streams by request id
	standalone *responseStream                // the open GET stream, if any
	backlog    []*[]byte                      // standalone messages while no GET is open
	store      *eventStore                    // nil when resumption is off
	seq        uint64                         // seq of the newest event id
	nextNum    uint64                         // number of the next POST stream
	detached   map[uint64]*responseStream     // POST streams awaiting a resuming GET
}

// responseStream is the queue of encoded messages waiting to be written to one
// HTTP response. Its fields other than notify and ka are guarded by the
// session's mu; only the handler goroutine writes to the response.
type responseStream struct {
	id      jsonrpc.ID
	num     uint64 // stream number in event ids; 0 for the standalone stream
	isInit  bool
	primed  bool // a priming event was written: the client may resume
	q       []*[]byte
	spare   []*[]byte
	final   bool // the response is queued; the stream ends after it
	errResp bool // the queued response is an error
	failed  bool // the queue overflowed
	notify  chan struct{}
	ka      *time.Timer
}

func (st *responseStream) signal() {
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

func newStream() *responseStream { return &responseStream{notify: make(chan struct{}, 1)} }

// Write queues msg for the client without waiting for it. A response goes to
// the POST of its request and is dropped (returning nil) when that POST has
// ended; a request or notification goes to the POST of the request named by
// [RelatedFromContext] while it is open, else to the standalone stream.
func (sess *streamableSession) Write(ctx context.Context, msg jsonrpc.Message) error {
	bp, err := encodePooled(msg)
	if err != nil {
		return fmt.Errorf("streamable session %s: encoding message: %w", sess.id, err)
	}

	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		putEncodeBuf(bp)
		return fmt.Errorf("streamable session %s: %w", sess.id, ErrClosed)
	}
	switch m := msg.(type) {
	case *jsonrpc.Response:
		st := sess.calls[m.ID]
		if st == nil {
			sess.mu.Unlock()
			putEncodeBuf(bp)
			sess.srv.log.Debug("dropping response for a request whose HTTP stream has ended",
				"session", sess.id, "id", m.ID.Raw())
			return nil
		}
		delete(sess.calls, m.ID)
		st.final = true
		st.errResp = m.Error != nil
		st.q = append(st.q, bp) // the final message may exceed the bound by one
		st.signal()
	default:
		var st *responseStream
		if id, ok := RelatedFromContext(ctx); ok {
			st = sess.calls[id]
		}
		if st == nil {
			st = sess.standalone
		}
		var failedID jsonrpc.ID
		failed, dropped := false, 0
		if st != nil && len(st.q) >= maxStreamQueue {
			failed, failedID = true, st.id
			sess.failLocked(st)
			st = nil
		}
		if st == nil && sess.srv.fleet != nil {
			sess.mu.Unlock()
			if sess.elsewhere(bp) {
				putEncodeBuf(bp)
				return nil
			}
			sess.mu.Lock()
			if sess.closed {
				sess.mu.Unlock()
				putEncodeBuf(bp)
				return fmt.Errorf("streamable session %s: %w", sess.id, ErrClosed)
			}
			if st = sess.standalone; st != nil && len(st.q) >= maxStreamQueue {
				st = nil
			}
		}
		if st == nil {
			dropped = sess.backlogLocked(bp)
		} else {
			st.q = append(st.q, bp)
			st.signal()
		}
		sess.mu.Unlock()
		if failed {
			sess.srv.log.Warn("streamable client too slow: failing its stream",
				"session", sess.id, "request", failedID.Raw(), "queued", maxStreamQueue)
		}
		if dropped > 0 {
			sess.srv.log.Warn("standalone stream backlog full: dropped oldest messages",
				"session", sess.id, "dropped", dropped)
		}
		return nil
	}
	sess.mu.Unlock()
	return nil
}

// failLocked detaches an overflowing stream: its handler ends the response.
// A POST stream's pending request is then cancelled towards the gateway.
func (sess *streamableSession) failLocked(st *responseStream) {
	st.failed = true
	if st == sess.standalone {
		sess.standalone = nil
	} else if sess.calls[st.id] == st {
		delete(sess.calls, st.id)
	}
	st.signal()
}

// backlogLocked keeps standalone messages until a GET stream opens, dropping
// the oldest beyond maxBacklog. It returns how many it dropped.
func (sess *streamableSession) backlogLocked(bps ...*[]byte) int {
	sess.backlog = append(sess.backlog, bps...)
	over := len(sess.backlog) - maxBacklog
	if over <= 0 {
		return 0
	}
	for _, b := range sess.backlog[:over] {
		putEncodeBuf(b)
	}
	n := copy(sess.backlog, sess.backlog[over:])
	clear(sess.backlog[n:])
	sess.backlog = sess.backlog[:n]
	return over
}

// Close ends the session: pending handlers return and Read returns io.EOF.
func (sess *streamableSession) Close() error {
	sess.close()
	return nil
}

func (sess *streamableSession) close() {
	s := sess.srv
	closed := sess.end(io.EOF, func() {
		s.sessions.remove(sess.id, sess)
		sess.mu.Lock()
		sess.closed = true
		backlog := sess.backlog
		sess.backlog = nil
		for num, st := range sess.detached {
			delete(sess.detached, num)
			if sess.calls[st.id] == st {
				delete(sess.calls, st.id)
			}
		}
		if sess.timer != nil {
			sess.timer.Stop()
		}
		var acct *budget.Account
		if sess.store != nil {
			acct = sess.store.acct
			sess.store.close()
		}
		sess.mu.Unlock()
		if acct != nil {
			acct.Unregister(sess.store)
			acct.Release()
		}
		for _, b := range backlog {
			putEncodeBuf(b)
		}
	})
	if closed {
		s.log.Debug("streamable session closed", "session", sess.id)
	}
}

func (sess *streamableSession) closedStatus() int {
	if sess.srv.sessions.isClosed() {
		return http.StatusServiceUnavailable
	}
	return http.StatusNotFound
}

func (sess *streamableSession) touch() { sess.last.Store(int64(time.Since(sess.srv.epoch))) }

func (sess *streamableSession) enter() { sess.refs.Add(1) }

func (sess *streamableSession) leave() {
	sess.touch()
	sess.refs.Add(-1)
}

// idleCheck runs on the idle timer: it closes the session when no request is
// in flight and none ended within the idle timeout, and re-arms otherwise.
func (sess *streamableSession) idleCheck() {
	idle := sess.srv.idle
	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		return
	}
	if sess.refs.Load() > 0 {
		sess.timer.Reset(idle)
		sess.mu.Unlock()
		return
	}
	since := time.Since(sess.srv.epoch) - time.Duration(sess.last.Load())
	if since < idle {
		sess.timer.Reset(idle - since)
		sess.mu.Unlock()
		return
	}
	sess.mu.Unlock()
	sess.srv.log.Info("closing idle streamable session", "session", sess.id, "idle", since)
	sess.close()
}
