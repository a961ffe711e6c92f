// Package tasks is the gateway's side of MCP tasks: a tools/call that an
// upstream answers with a task (2025-11-25: `{"task":{"taskId":…}}` when
// the client asked with a `task` param; the 2026-07-28 tasks extension,
// io.modelcontextprotocol/tasks: `{"resultType":"task","taskId":…}` when
// the server chooses) is given a task id of the gateway's own, random and
// unguessable, recorded with the upstream (and the per-client link) that
// holds the task and the client that owns it. tasks/get, tasks/result,
// tasks/cancel and tasks/update name that id: the gateway finds the
// upstream, puts the upstream's id in its place, forwards, and puts its
// own id back into the answer. A client that names an id it does not own
// gets the same "unknown task" error as for an id that never existed.
// tasks/list is answered here, from the caller's own tasks only (a
// tasks/get upstream for each). Status notifications reach the owner
// only.
//
// The owner of a task is the 2025 session that created it; for a
// 2026-07-28 client, which has no session, the identity it authenticated
// as (anonymous clients hold their ids as bearer capabilities: the ids
// carry 130 random bits).
//
// A task's result (tasks/result; the extension's tasks/get inlines it)
// passes the result policies of the tool that created the task.
//
// The package never sees the gateway's types: it talks to a session
// through [Session] and to the gateway through [Gateway].
package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"iter"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/internal/budget"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/transports"
)

// MetaRelatedTask is the _meta key relating a message to a task.
const MetaRelatedTask = "io.modelcontextprotocol/related-task"

// Extension is the 2026-07-28 tasks extension's capability key.
const Extension = "io.modelcontextprotocol/tasks"

// codeMissingCapability is 2026-07-28's MissingRequiredClientCapability.
const codeMissingCapability = -32021

// Session is a downstream session as the task table sees it. The gateway
// gives one comparable value per session (the table keys its maps by it),
// valid for the session's life. Its methods may be called from any
// goroutine; what is written after the session closed is dropped.
type Session interface {
	// Owner is who owns the tasks the session creates: the session for a
	// 2025 client, its identity for a 2026-07-28 one.
	Owner() Owner
	// Modern reports whether the session's requests follow 2026-07-28.
	Modern() bool
	// Declared is the clientCapabilities of a 2026-07-28 request's _meta.
	Declared() json.RawMessage
	// Write sends resp to the client.
	Write(resp *jsonrpc.Response)
	// Notify sends a notification related to the client's request rel
	// (an invalid id: to none).
	Notify(rel jsonrpc.ID, method string, params json.RawMessage)
	// Listening returns the id of the session's open 2026-07-28
	// subscriptions/listen, if any; Tag puts it into a notification's
	// params.
	Listening() (jsonrpc.ID, bool)
	Tag(params json.RawMessage, id jsonrpc.ID) json.RawMessage
	// Forward sends req upstream to where task e lives, with params (the
	// upstream's task id in place); the answers of tasks/get and
	// tasks/result pass the result policies of e.Tool. The answer comes
	// back through [Table.Answer].
	Forward(req *jsonrpc.Request, e *Entry, params json.RawMessage)
	// Get asks the link task e lives on for tasks/get with params, within
	// the upstream's timeout. A *jsonrpc.Error is the server's answer; any
	// other error means the task cannot be reached now.
	Get(e *Entry, params json.RawMessage) (json.RawMessage, error)
	// Account acquires the client-memory account of the session's
	// identity; the caller releases it.
	Account() *budget.Account
}

// Gateway is what the table asks of the gateway. Its methods may be
// called from any goroutine.
type Gateway interface {
	// UpstreamCapabilities yields the server capabilities of every
	// upstream connected now (its shared link's).
	UpstreamCapabilities() iter.Seq[map[string]json.RawMessage]
	// Sessions are the sessions the gateway serves now.
	Sessions() []Session
}

// Call is a forwarded call whose answer [Table.Answer] completes.
type Call struct {
	Method string
	ID     jsonrpc.ID // the client's
	// Sent is set when the call went upstream; Where is then where a task
	// it creates lives (its UpID empty).
	Sent  bool
	Where Key
	// Tool and Args are the upstream tool's name and the arguments the
	// result policies saw.
	Tool string
	Args json.RawMessage
	Log  *slog.Logger // the upstream's
}

// Request routes tasks/get, tasks/result, tasks/cancel and tasks/update by
// params.taskId to the upstream holding the task, and answers tasks/list.
func (t *Table) Request(g Gateway, s Session, req *jsonrpc.Request) {
	modern := s.Modern()
	v1, _, ext := support(g)
	offered := v1 && !modern || ext && modern
	id, named := wire.String(req.Params, "taskId")
	if !offered && (!named || t.lookup(id, s.Owner()) == nil) {
		// No upstream offers tasks (and the caller has none left): as a
		// server without tasks would answer.
		replyError(s, req.ID, jsonrpc.CodeMethodNotFound, "method not found: "+req.Method+" (no server offers tasks)")
		return
	}
	switch {
	case modern && (req.Method == "tasks/list" || req.Method == "tasks/result"):
		replyError(s, req.ID, jsonrpc.CodeMethodNotFound,
			"method not found: "+req.Method+" is not part of the tasks extension ("+Extension+"); tasks/get carries the result")
		return
	case modern && !DeclaresExtension(s.Declared()):
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{Extension: map[string]any{}}}})
		s.Write(&jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: codeMissingCapability,
			Message: req.Method + " needs the client capability extensions[\"" + Extension + "\"]", Data: data}})
		return
	case req.Method == "tasks/list":
		go t.list(s, req)
		return
	}
	if !named {
		replyError(s, req.ID, jsonrpc.CodeInvalidParams, req.Method+": params.taskId must be a string")
		return
	}
	e := t.lookup(id, s.Owner())
	if e == nil {
		replyError(s, req.ID, jsonrpc.CodeInvalidParams, req.Method+": unknown task "+strconv.Quote(id))
		return
	}
	params, err := wire.SetField(req.Params, "taskId", wire.AppendString(nil, e.Key.UpID))
	if err != nil {
		replyError(s, req.ID, jsonrpc.CodeInvalidParams, req.Method+": "+err.Error())
		return
	}
	t.track(s, req.ID, e)
	s.Forward(req, e, params)
}

func replyError(s Session, id jsonrpc.ID, code int64, msg string) {
	s.Write(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: msg}})
}

// DeclaresExtension reports whether client capabilities declare the
// tasks extension.
func DeclaresExtension(caps json.RawMessage) bool {
	ext, ok, _ := wire.Field(caps, "extensions")
	if !ok {
		return false
	}
	_, ok, _ = wire.Field(ext, Extension)
	return ok
}

// Answer completes the answer out to the client's forwarded call c: a
// task created upstream gets a gateway id; the answer to a tasks/* call
// gets the gateway id back in place of the upstream's. Everything else
// passes untouched.
func (t *Table) Answer(g Gateway, s Session, c Call, out *jsonrpc.Response) {
	switch c.Method {
	case "tools/call":
		if out.Error != nil || !c.Sent || !bytes.Contains(out.Result, []byte(`"taskId"`)) {
			return
		}
		out.Result = t.created(g, s, c, out.Result)
	case "tasks/get", "tasks/result", "tasks/cancel", "tasks/update":
		e := t.untrack(s, c.ID)
		if e != nil && out.Error == nil {
			out.Result = RewriteID(out.Result, e.Key.UpID, e.ID)
		}
	}
}

// created records the task a tools/call result res created, if it is
// one, and returns res with the gateway's id for it.
func (t *Table) created(g Gateway, s Session, c Call, res json.RawMessage) json.RawMessage {
	upID, ttl, ok := Created(res)
	if !ok {
		return res
	}
	key := c.Where
	key.UpID = upID
	e, err := t.add(key, s.Owner(), ttl, c.Tool, c.Args, s.Account())
	if err != nil {
		return toolError("edge-mcp: " + err.Error())
	}
	if e == nil {
		// The server gave another client's task id again: never hand it on.
		c.Log.Warn("a server answered a tools/call with a task id it gave another client; withheld")
		return toolError("edge-mcp: the server answered with a task that belongs to another client")
	}
	for _, n := range t.takeHeld(key) {
		// Sent before the result upstream: so downstream, on its stream.
		deliver(g, e, n, c.ID)
	}
	return RewriteID(res, upID, e.ID)
}

// toolError is a tools/call result reporting text as the tool's error.
func toolError(text string) json.RawMessage {
	b := append([]byte(`{"content":[{"type":"text","text":`), wire.AppendString(nil, text)...)
	return append(b, `}],"isError":true}`...)
}

// Created decodes the task a tools/call result creates: the upstream's
// task id and how long the server keeps it.
func Created(res json.RawMessage) (upID string, ttl time.Duration, ok bool) {
	task, isV1, _ := wire.Field(res, "task") // 2025-11-25: CreateTaskResult{task}
	ttlKey := "ttl"
	if !isV1 {
		if rt, _ := wire.String(res, "resultType"); rt != "task" {
			return "", 0, false
		}
		task, ttlKey = res, "ttlMs" // the tasks extension: flat Result & Task
	}
	upID, ok = wire.String(task, "taskId")
	if !ok || upID == "" {
		return "", 0, false
	}
	ttl = ttlDefault
	if raw, ok, _ := wire.Field(task, ttlKey); ok {
		if ms, err := strconv.ParseFloat(string(raw), 64); err == nil && ms > 0 && ms < float64(ttlDefault/time.Millisecond) {
			ttl = time.Duration(ms) * time.Millisecond
		}
	}
	return upID, ttl, true
}

// RewriteID replaces the task id from with to where a task result names
// it: at the top (Task, DetailedTask, the extension's CreateTaskResult),
// in task (2025-11-25's CreateTaskResult) and in _meta's related-task.
// Every other byte passes unchanged.
func RewriteID(obj json.RawMessage, from, to string) json.RawMessage {
	out := obj
	if id, ok := wire.String(out, "taskId"); ok && id == from {
		if next, err := wire.SetField(out, "taskId", wire.AppendString(nil, to)); err == nil {
			out = next
		}
	}
	for _, path := range [][]string{{"task"}, {"_meta", MetaRelatedTask}} {
		out = rewriteNested(out, path, from, to)
	}
	return out
}

// rewriteNested applies RewriteID's top-level rule to the object at path
// inside obj.
func rewriteNested(obj json.RawMessage, path []string, from, to string) json.RawMessage {
	inner, ok, err := wire.Field(obj, path[0])
	if !ok || err != nil || len(inner) == 0 || inner[0] != '{' {
		return obj
	}
	var next json.RawMessage
	if len(path) > 1 {
		next = rewriteNested(inner, path[1:], from, to)
	} else if id, ok := wire.String(inner, "taskId"); ok && id == from {
		next, err = wire.SetField(inner, "taskId", wire.AppendString(nil, to))
		if err != nil {
			return obj
		}
	}
	if next == nil || bytes.Equal(next, inner) {
		return obj
	}
	out, err := wire.SetField(obj, path[0], next)
	if err != nil {
		return obj
	}
	return out
}

// list answers a 2025 session's tasks/list with its own tasks: each asked
// for upstream with tasks/get, in the order they were created; a task its
// server no longer knows is forgotten.
func (t *Table) list(s Session, req *jsonrpc.Request) {
	entries := t.owned(s.Owner())
	tasks := make([]json.RawMessage, len(entries))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, e := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			tasks[i] = t.fetch(s, e)
		}()
	}
	wg.Wait()
	out := []byte(`{"tasks":[`)
	n := 0
	for _, task := range tasks {
		if task == nil {
			continue
		}
		if n++; n > 1 {
			out = append(out, ',')
		}
		out = append(out, task...)
	}
	s.Write(&jsonrpc.Response{ID: req.ID, Result: append(out, "]}"...)})
}

// fetch asks e's upstream for the task's state, with the gateway's id in
// it; nil when it cannot be had.
func (t *Table) fetch(s Session, e *Entry) json.RawMessage {
	params := append(append([]byte(`{"taskId":`), wire.AppendString(nil, e.Key.UpID)...), '}')
	res, err := s.Get(e, params)
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && rpcErr.Code == jsonrpc.CodeInvalidParams {
		t.remove(e) // expired or unknown upstream
		return nil
	}
	if err != nil || len(res) == 0 || res[0] != '{' {
		return nil
	}
	if res, err = wire.DeleteField(res, "_meta"); err != nil {
		return nil
	}
	return RewriteID(res, e.Key.UpID, e.ID)
}

// Notification routes a task status notification (2025-11-25:
// notifications/tasks/status; the extension: notifications/tasks) that
// arrived where (its UpID empty) to the task's owner, with the gateway's
// id; a task the gateway does not know is nobody's to see.
func (t *Table) Notification(g Gateway, where Key, n *jsonrpc.Request, log *slog.Logger) {
	upID, ok := wire.String(n.Params, "taskId")
	if !ok {
		return
	}
	key := where
	key.UpID = upID
	e := t.At(key)
	if e == nil {
		// Maybe its tools/call result is on its way (the server sent the
		// status first): held until then, briefly (created).
		if !t.hold(key, n) {
			log.Debug("dropping a status notification of a task no client owns", "method", n.Method)
		}
		return
	}
	deliver(g, e, n, jsonrpc.ID{})
}

// deliver sends the status notification n of task e to its owner, with
// the gateway's id; rel is the owner's request it relates to (invalid:
// none).
func deliver(g Gateway, e *Entry, n *jsonrpc.Request, rel jsonrpc.ID) {
	params := RewriteID(n.Params, e.Key.UpID, e.ID)
	if e.Owner.Session != nil {
		e.Owner.Session.Notify(rel, n.Method, params)
		return
	}
	if e.Owner.Identity == auth.ModeNone+"\x00"+auth.AnonymousName {
		return // anonymous 2026-07-28 clients cannot be told apart: poll with tasks/get
	}
	for _, s := range g.Sessions() {
		if id, ok := s.Listening(); ok && s.Owner() == e.Owner {
			s.Notify(id, n.Method, s.Tag(params, id))
		}
	}
}

// Related returns the upstream task id a server→client request relates to
// (its _meta related-task, as a server sends while a task waits for
// input), and the request's params with the gateway's id for it, when
// where (its UpID empty) holds that task.
func (t *Table) Related(where Key, params json.RawMessage) (e *Entry, out json.RawMessage, ok bool) {
	meta, ok, _ := wire.Field(params, "_meta")
	if !ok {
		return nil, nil, false
	}
	related, ok, _ := wire.Field(meta, MetaRelatedTask)
	if !ok {
		return nil, nil, false
	}
	upID, ok := wire.String(related, "taskId")
	if !ok {
		return nil, nil, false
	}
	where.UpID = upID
	e = t.At(where)
	if e == nil {
		return nil, nil, false
	}
	return e, rewriteNested(params, []string{"_meta", MetaRelatedTask}, upID, e.ID), true
}

// Capabilities adds to caps, the gateway's capabilities at version, the
// tasks the connected upstreams support, and returns caps: for 2025-11-25
// the tasks capability (list is the gateway's own; cancel and tools/call
// as far as some upstream offers them), for 2026-07-28 the tasks
// extension when some upstream offers it.
func Capabilities(g Gateway, caps map[string]any, version string) map[string]any {
	v1, cancel, ext := support(g)
	switch {
	case version == transports.Protocol2026 && ext:
		caps["extensions"] = map[string]any{Extension: map[string]any{}}
	case version != transports.Protocol2026 && v1:
		t := map[string]any{"list": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
		if cancel {
			t["cancel"] = map[string]any{}
		}
		caps["tasks"] = t
	}
	return caps
}

// support reports what the connected upstreams offer of tasks: the
// 2025-11-25 tasks for tools/call (v1) and tasks/cancel, and the
// 2026-07-28 tasks extension (ext).
func support(g Gateway) (v1, cancel, ext bool) {
	for caps := range g.UpstreamCapabilities() {
		if t, ok := caps["tasks"]; ok {
			req, _, _ := wire.Field(t, "requests")
			tools, _, _ := wire.Field(req, "tools")
			if _, call, _ := wire.Field(tools, "call"); call {
				v1 = true
				_, c, _ := wire.Field(t, "cancel")
				cancel = cancel || c
			}
		}
		ext = ext || offersExtension(caps)
	}
	return v1, cancel, ext
}

// offersExtension reports whether server capabilities offer the tasks
// extension.
func offersExtension(caps map[string]json.RawMessage) bool {
	ext, ok := caps["extensions"]
	if !ok {
		return false
	}
	_, ok, _ = wire.Field(ext, Extension)
	return ok
}

// FilterInlined runs filter (the result policies of a task's tool) on the
// result a tasks/get answer inlines (the tasks extension's DetailedTask),
// if any.
func FilterInlined(resp *jsonrpc.Response, filter func(*jsonrpc.Response) *jsonrpc.Response) *jsonrpc.Response {
	inner, ok, err := wire.Field(resp.Result, "result")
	if err != nil || !ok || len(inner) == 0 || inner[0] != '{' {
		return resp
	}
	filtered := filter(&jsonrpc.Response{ID: resp.ID, Result: inner})
	if filtered.Error != nil {
		return filtered
	}
	res, err := wire.SetField(resp.Result, "result", filtered.Result)
	if err != nil {
		return &jsonrpc.Response{ID: resp.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "edge-mcp: policy check ended: " + err.Error()}}
	}
	return &jsonrpc.Response{ID: resp.ID, Result: res}
}
