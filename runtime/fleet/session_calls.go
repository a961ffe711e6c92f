package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/nats-io/nats.go"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
)

// Per-client upstream state across replicas. An upstream with "session":
// "per_client" gives each downstream session an upstream session of its
// own, on the replica that opened the downstream session (its owner, in
// the token). Another replica sends such a request to the owner with
// request/reply on <fleet>.replica.<owner>.call; the owner serves it on
// its copy of the session, as if the client had sent it there, and
// replies with the response. When the owner is gone (no responders, or it
// no longer has the session), the replica becomes the owner: it re-creates
// the upstream session here, and says so in the log.

// ownerMargin is added to the upstream's timeout when waiting for the
// owner's answer.
const ownerMargin = 5 * time.Second

// fleetCall is what travels on <fleet>.replica.<owner>.call.
type fleetCall struct {
	Session   string          `json:"session"`
	Request   json.RawMessage `json:"request"`
	TimeoutMs int64           `json:"timeoutMs"`
}

// errNotOwner is the owner's answer when it does not have the session.
const errNotOwner = "not the owner"

func (fs *Sessions) startCalls() error {
	subj := fs.node.Subject("replica", cluster.Token(fs.node.Replica()), "call")
	sub, err := fs.node.Subscribe(subj, "a forwarded request", func(m *cluster.Msg) { go fs.serveCall(m) })
	if err != nil {
		return fmt.Errorf("subscribing to %s: %w", subj, err)
	}
	fs.calls = sub
	return nil
}

// ToOwner sends req of session s to the owner of its per-client upstream
// session when it is another replica; false means serve it here.
func (f *Fleet) ToOwner(s Session, req *jsonrpc.Request) bool {
	p := s.State().owner.Load()
	fs := f.Sessions()
	if p == nil || fs == nil {
		return false
	}
	server, timeout, ok := s.PerClient(req)
	if !ok {
		return false
	}
	go fs.callOwner(s, *p, server, timeout, req)
	return true
}

// callOwner waits for the owner's answer to req and writes it to the
// client; when the owner is gone it takes the session over.
func (fs *Sessions) callOwner(s Session, owner, server string, timeout time.Duration, req *jsonrpc.Request) {
	raw, err := wire.Append(nil, req)
	if err != nil {
		replyError(s, req.ID, "edge-mcp: encoding the request: %v", err)
		return
	}
	wait := timeout + ownerMargin
	b, _ := json.Marshal(fleetCall{Session: s.ID(), Request: raw, TimeoutMs: wait.Milliseconds()})
	ctx, cancel := context.WithTimeout(s.Context(), wait)
	defer cancel()
	reply, err := fs.node.Request(ctx, fs.node.Subject("replica", cluster.Token(owner), "call"), b)
	if errors.Is(err, nats.ErrNoResponders) || (err == nil && string(reply) == errNotOwner) {
		fs.log.Warn("cluster: the replica that held this client's upstream session is gone; re-creating it here",
			"server", server, "owner", owner, "identity", s.Identity())
		s.State().owner.Store(nil)
		fs.Put(SessionRecord{ID: s.ID(), Owner: fs.node.Replica()})
		s.Serve(req)
		return
	}
	if err != nil {
		replyError(s, req.ID, "edge-mcp: the replica holding this client's session with server %q did not answer: %v", server, err)
		return
	}
	msg, err := wire.Decode(reply)
	resp, ok := msg.(*jsonrpc.Response)
	if err != nil || !ok {
		fs.log.Warn("cluster: refused an owner's answer from NATS", "owner", owner, "err", err)
		replyError(s, req.ID, "edge-mcp: the replica holding this client's session answered garbage")
		return
	}
	resp.ID = req.ID
	s.Write(resp)
}

// replyError answers the client's request id with an internal error.
func replyError(s Session, id jsonrpc.ID, format string, args ...any) {
	s.Write(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(format, args...)}})
}

// serveCall serves a request another replica sent for a session this
// replica owns, and replies with its response.
func (fs *Sessions) serveCall(m *cluster.Msg) {
	var c fleetCall
	if err := json.Unmarshal(m.Data, &c); err != nil {
		fs.log.Warn("cluster: refused a forwarded request from NATS", "err", err)
		_ = m.Respond([]byte(errNotOwner))
		return
	}
	msg, err := wire.Decode(c.Request)
	req, ok := msg.(*jsonrpc.Request)
	v, found := fs.local.Load(c.Session)
	if err != nil || !ok || !req.IsCall() || !found {
		if err != nil || !ok {
			fs.log.Warn("cluster: refused a forwarded request from NATS", "err", err)
		}
		_ = m.Respond([]byte(errNotOwner))
		return
	}
	s := v.(Session)
	id, _ := jsonrpc.MakeID("fleet:" + strconv.FormatInt(fs.seq.Add(1), 10))
	orig := req.ID
	req.ID = id
	st := s.State()
	ch := st.capture(id)
	defer st.release(id)
	s.Serve(req)
	wait := min(max(time.Duration(c.TimeoutMs)*time.Millisecond, time.Second), time.Hour)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case resp := <-ch:
		resp.ID = orig
		b, err := wire.Append(nil, resp)
		if err == nil {
			_ = m.Respond(b)
		}
	case <-t.C:
	case <-s.Context().Done():
		_ = m.Respond([]byte(errNotOwner))
	}
}

// captures are responses to requests other replicas forwarded here: they
// go back over NATS instead of to the client.
type captures struct {
	mu sync.Mutex
	m  map[jsonrpc.ID]chan *jsonrpc.Response
}

func (st *SessionState) capture(id jsonrpc.ID) chan *jsonrpc.Response {
	ch := make(chan *jsonrpc.Response, 1)
	st.caught.mu.Lock()
	if st.caught.m == nil {
		st.caught.m = map[jsonrpc.ID]chan *jsonrpc.Response{}
	}
	st.caught.m[id] = ch
	st.caught.mu.Unlock()
	st.capturing.Add(1)
	return ch
}

func (st *SessionState) release(id jsonrpc.ID) {
	st.caught.mu.Lock()
	delete(st.caught.m, id)
	st.caught.mu.Unlock()
	st.capturing.Add(-1)
}

// Caught takes msg, a message the session is writing to its client, when
// it answers a request another replica forwarded here (it goes back over
// NATS instead).
func (st *SessionState) Caught(msg jsonrpc.Message) bool {
	return st.capturing.Load() > 0 && st.take(msg)
}

func (st *SessionState) take(msg jsonrpc.Message) bool {
	r, ok := msg.(*jsonrpc.Response)
	if !ok {
		return false
	}
	st.caught.mu.Lock()
	ch := st.caught.m[r.ID]
	delete(st.caught.m, r.ID)
	st.caught.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- r
	return true
}
