package gateway

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

func (fs *fleetSessions) startCalls() error {
	subj := fs.node.Subject("replica", cluster.Token(fs.node.Replica()), "call")
	sub, err := fs.node.Subscribe(subj, "a forwarded request", func(m *cluster.Msg) { go fs.serveCall(m) })
	if err != nil {
		return fmt.Errorf("subscribing to %s: %w", subj, err)
	}
	fs.calls = sub
	return nil
}

// remoteOwner is the replica owning the session's per-client upstream
// state, when it is another one.
func (s *session) remoteOwner() string {
	if p := s.owner.Load(); p != nil {
		return *p
	}
	return ""
}

// perClientTarget is the per_client upstream req goes to, if any.
func (s *session) perClientTarget(req *jsonrpc.Request) *upstream {
	var u *upstream
	switch req.Method {
	case "tools/call", "prompts/get":
		k := kindTools
		if req.Method == "prompts/get" {
			k = kindPrompts
		}
		if name, ok := wire.String(req.Params, "name"); ok {
			if it := s.catalogue().index[k][name]; it != nil {
				u = it.up
			}
		}
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		if uri, ok := wire.String(req.Params, "uri"); ok {
			u = s.g.route.catalogue().resource(uri)
		}
	}
	if u == nil || !u.perClient() {
		return nil
	}
	return u
}

// toOwner sends req to the owner of the session's per-client upstream
// session when it is another replica; false means serve it here.
func (s *session) toOwner(req *jsonrpc.Request) bool {
	owner := s.remoteOwner()
	fs := s.g.fleetSess.Load()
	if owner == "" || fs == nil {
		return false
	}
	u := s.perClientTarget(req)
	if u == nil {
		return false
	}
	go fs.callOwner(s, owner, u, req)
	return true
}

// callOwner waits for the owner's answer to req and writes it to the
// client; when the owner is gone it takes the session over.
func (fs *fleetSessions) callOwner(s *session, owner string, u *upstream, req *jsonrpc.Request) {
	raw, err := wire.Append(nil, req)
	if err != nil {
		s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: encoding the request: %v", err)
		return
	}
	wait := u.cfg.Timeout + ownerMargin
	b, _ := json.Marshal(fleetCall{Session: s.conn.SessionID(), Request: raw, TimeoutMs: wait.Milliseconds()})
	ctx, cancel := context.WithTimeout(s.ctx, wait)
	defer cancel()
	reply, err := fs.node.Request(ctx, fs.node.Subject("replica", cluster.Token(owner), "call"), b)
	if errors.Is(err, nats.ErrNoResponders) || (err == nil && string(reply) == errNotOwner) {
		fs.log.Warn("cluster: the replica that held this client's upstream session is gone; re-creating it here",
			"server", u.name, "owner", owner, "identity", s.id.Name)
		s.owner.Store(nil)
		fs.put(sessionRecord{ID: s.conn.SessionID(), Owner: fs.node.Replica()})
		s.handleCall(req)
		return
	}
	if err != nil {
		s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: the replica holding this client's session with server %q did not answer: %v", u.name, err)
		return
	}
	msg, err := wire.Decode(reply)
	resp, ok := msg.(*jsonrpc.Response)
	if err != nil || !ok {
		fs.log.Warn("cluster: refused an owner's answer from NATS", "owner", owner, "err", err)
		s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: the replica holding this client's session answered garbage")
		return
	}
	resp.ID = req.ID
	s.write(s.ctx, resp)
}

// serveCall serves a request another replica sent for a session this
// replica owns, and replies with its response.
func (fs *fleetSessions) serveCall(m *cluster.Msg) {
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
	s := v.(*session)
	id, _ := jsonrpc.MakeID("fleet:" + strconv.FormatInt(fs.seq.Add(1), 10))
	orig := req.ID
	req.ID = id
	ch := s.capture(id)
	defer s.release(id)
	s.handleCall(req)
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
	case <-s.ctx.Done():
		_ = m.Respond([]byte(errNotOwner))
	}
}

// captures are responses to requests other replicas forwarded here: they
// go back over NATS instead of to the client.
type captures struct {
	mu sync.Mutex
	m  map[jsonrpc.ID]chan *jsonrpc.Response
}

func (s *session) capture(id jsonrpc.ID) chan *jsonrpc.Response {
	ch := make(chan *jsonrpc.Response, 1)
	s.caught.mu.Lock()
	if s.caught.m == nil {
		s.caught.m = map[jsonrpc.ID]chan *jsonrpc.Response{}
	}
	s.caught.m[id] = ch
	s.caught.mu.Unlock()
	s.capturing.Add(1)
	return ch
}

func (s *session) release(id jsonrpc.ID) {
	s.caught.mu.Lock()
	delete(s.caught.m, id)
	s.caught.mu.Unlock()
	s.capturing.Add(-1)
}

// caughtResponse takes msg when it answers a forwarded request.
func (s *session) caughtResponse(msg jsonrpc.Message) bool {
	r, ok := msg.(*jsonrpc.Response)
	if !ok {
		return false
	}
	s.caught.mu.Lock()
	ch := s.caught.m[r.ID]
	delete(s.caught.m, r.ID)
	s.caught.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- r
	return true
}
