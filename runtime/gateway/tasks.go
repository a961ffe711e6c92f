package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"iter"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/budget"
	"github.com/edge-mcp/edge-mcp/runtime/bridge"
	"github.com/edge-mcp/edge-mcp/runtime/tasks"
)

// The gateway's side of tasks (runtime/tasks): the router's tasks.Table
// records the tasks clients created; taskSession and taskOps are how the
// table reaches a session and the gateway.

// taskOps implements tasks.Gateway for a gateway.
type taskOps struct{ g *Gateway }

var _ tasks.Gateway = taskOps{}

func (o taskOps) UpstreamCapabilities() iter.Seq[map[string]json.RawMessage] {
	return func(yield func(map[string]json.RawMessage) bool) {
		for _, u := range o.g.route.upstreams().list {
			if l := u.current(); l != nil && !yield(l.caps) {
				return
			}
		}
	}
}

func (o taskOps) Sessions() []tasks.Session {
	all := o.g.route.allSessions()
	out := make([]tasks.Session, len(all))
	for i, s := range all {
		out[i] = taskSession{s}
	}
	return out
}

// taskSession implements tasks.Session for a session; equal values are
// the same session.
type taskSession struct{ s *session }

var _ tasks.Session = taskSession{}

func (t taskSession) Owner() tasks.Owner {
	if t.s.modern.Load() {
		return tasks.Owner{Identity: t.s.id.Method + "\x00" + t.s.id.Name}
	}
	return tasks.Owner{Session: t}
}

func (t taskSession) Modern() bool { return t.s.modern.Load() }

func (t taskSession) Declared() json.RawMessage { return t.s.bridging.Declared() }

func (t taskSession) Write(resp *jsonrpc.Response) { t.s.write(t.s.ctx, resp) }

func (t taskSession) Notify(rel jsonrpc.ID, method string, params json.RawMessage) {
	t.s.notify(rel, method, params)
}

func (t taskSession) Listening() (jsonrpc.ID, bool) { return t.s.bridging.Subscription("") }

func (t taskSession) Tag(params json.RawMessage, id jsonrpc.ID) json.RawMessage {
	return bridge.Tag(params, id)
}

func (t taskSession) Forward(req *jsonrpc.Request, e *tasks.Entry, params json.RawMessage) {
	s, u := t.s, e.Key.Upstream.(*upstream)
	info := forwardInfo{kind: kindTools, upName: e.Tool}
	var sc callScope
	if req.Method == "tasks/result" || req.Method == "tasks/get" {
		// The tool's result arrives here: it passes the tool's result
		// policies as a tools/call result would (filterResult).
		sc = policyScope(&s.g.pol, kindTools, u.name, e.Tool)
		if pg := sc.Gen; pg != nil && resultPolicy(pg.Chain(), kindTools, u.name, e.Tool) {
			info.pg, info.args = pg, e.Args
		}
		info.waited = sc.Held()
	}
	s.forwardScoped(sc, req, u, params, info)
}

func (t taskSession) Get(e *tasks.Entry, params json.RawMessage) (json.RawMessage, error) {
	u := e.Key.Upstream.(*upstream)
	l, _ := e.Key.Link.(*link)
	if l == nil {
		l = u.current()
	} else if u.clientLink(t.s) != l {
		l = nil // the per-client session it lived in is gone
	}
	if l == nil {
		return nil, errors.New("the task's server is not connected")
	}
	ctx, cancel := context.WithTimeout(t.s.ctx, u.cfg.Timeout)
	defer cancel()
	return l.call(ctx, "tasks/get", params)
}

func (t taskSession) Account() *budget.Account {
	return t.s.g.clientMem.Acquire(t.s.id.Name, budgetShared(t.s.id))
}

// taskKey is where a task created on l lives (its UpID empty).
func (l *link) taskKey() tasks.Key {
	key := tasks.Key{Upstream: l.u}
	if l.owner != nil {
		key.Link = l
	}
	return key
}

// task describes c, which went on l (nil: not sent), to the task table.
func (c *call) task(l *link) tasks.Call {
	tc := tasks.Call{Method: c.method, ID: c.origID, Tool: c.upName, Args: c.args}
	if l != nil {
		tc.Sent, tc.Where, tc.Log = true, l.taskKey(), l.u.log
	}
	return tc
}

// inlined is the tools/call whose result policies a task's result,
// inlined in c's tasks/get answer, passes.
func (c *call) inlined() *call {
	return &call{method: "tools/call", kind: c.kind, server: c.server, upName: c.upName, args: c.args, pg: c.pg, ic: c.ic}
}

// taskTarget returns the session that owns the task a server→client
// request relates to (its _meta related-task, as a server sends while a
// task waits for input), the owner's tasks/result call for the task in
// flight on l if any (noID: none; the request then goes on the session's
// own stream), and the request's params with the gateway's id for the
// task; ok false when the request names no task of a 2025 session.
func (l *link) taskTarget(req *jsonrpc.Request) (s *session, rel jsonrpc.ID, params json.RawMessage, ok bool) {
	e, params, ok := l.u.g.route.tasks.Related(l.taskKey(), req.Params)
	if !ok || e.Owner.Session == nil {
		return nil, noID, nil, false
	}
	return e.Owner.Session.(taskSession).s, l.resultCall(e), params, true
}

// resultCall returns the client id of the newest tasks/result call for
// task e of its owner in flight on l (noID: none).
func (l *link) resultCall(e *tasks.Entry) jsonrpc.ID {
	owner := e.Owner.Session.(taskSession).s
	var candidates []*call
	l.mu.Lock()
	for _, c := range l.pending {
		if c.sess == owner && c.method == "tasks/result" {
			candidates = append(candidates, c)
		}
	}
	l.mu.Unlock()
	var found *call
	for _, c := range candidates {
		if l.u.g.route.tasks.Tracked(taskSession{c.sess}, c.origID) == e && (found == nil || c.start.After(found.start)) {
			found = c
		}
	}
	if found == nil {
		return noID
	}
	return found.origID
}
