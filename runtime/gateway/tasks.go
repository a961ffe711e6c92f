package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/internal/budget"
	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// This file is tasks: a tools/call that an upstream answers with a task
// (2025-11-25: `{"task":{"taskId":…}}` when the client asked with a `task`
// param; the 2026-07-28 tasks extension, io.modelcontextprotocol/tasks:
// `{"resultType":"task","taskId":…}` when the server chooses) is given a
// task id of the gateway's own, random and unguessable, recorded with the
// upstream (and the per-client link) that holds the task and the client
// that owns it. tasks/get, tasks/result, tasks/cancel and tasks/update
// name that id: the gateway finds the upstream, puts the upstream's id in
// its place, forwards, and puts its own id back into the answer. A client
// that names an id it does not own gets the same "unknown task" error as
// for an id that never existed. tasks/list is answered here, from the
// caller's own tasks only (a tasks/get upstream for each). Status
// notifications reach the owner only.
//
// The owner of a task is the 2025 session that created it; for a
// 2026-07-28 client, which has no session, the identity it authenticated
// as (anonymous clients hold their ids as bearer capabilities: the ids
// carry 130 random bits).
//
// A task's result (tasks/result; the extension's tasks/get inlines it)
// passes the result policies of the tool that created the task.

// metaRelatedTask is the _meta key relating a message to a task.
const metaRelatedTask = "io.modelcontextprotocol/related-task"

// extTasks is the 2026-07-28 tasks extension's capability key.
const extTasks = "io.modelcontextprotocol/tasks"

// Bounds of the task table.
const (
	maxTasksPerOwner = 1000
	taskTTLDefault   = 24 * time.Hour  // a task whose server gives no ttl
	taskTTLSlack     = time.Minute     // the server may round its expiry up
	taskSweepEvery   = 5 * time.Minute // how often expired entries are dropped
	// Status notifications of a task not recorded yet are held this long,
	// at most heldTasks tasks and heldPerTask notifications each.
	heldFor     = 10 * time.Second
	heldTasks   = 256
	heldPerTask = 8
)

// taskTable maps the gateway's task ids to the tasks upstream. Its zero
// value is ready to use.
type taskTable struct {
	mu        sync.Mutex
	byID      map[string]*taskEntry
	byUp      map[taskKey]*taskEntry
	perOwner  map[taskOwner]int
	lastSweep time.Time
	// calls are the tasks/* calls in flight, by session and client id:
	// their answers get the gateway's task id back.
	calls map[*session]map[jsonrpc.ID]*taskEntry
	// held are status notifications of tasks not recorded yet, by
	// where the task lives, with when the first arrived.
	held   map[taskKey][]*jsonrpc.Request
	heldAt map[taskKey]time.Time
}

// taskKey is where a task lives: its upstream, the per-client link it was
// created on (nil: the upstream's shared link) and its upstream id.
type taskKey struct {
	u    *upstream
	l    *link
	upID string
}

// taskOwner is who may see a task: a 2025 session, or a 2026-07-28
// client's identity (sess nil).
type taskOwner struct {
	sess     *session
	identity string
}

type taskEntry struct {
	id      string // the gateway's id, the one the client sees
	key     taskKey
	owner   taskOwner
	created time.Time
	expires time.Time
	// tool is the upstream name of the tool whose call created the task
	// and args its arguments when result policies saw them: the task's
	// result passes the tool's result policies.
	tool string
	args json.RawMessage
	// acct is charged cost while the entry is recorded (clientmem.go).
	acct *budget.Account
	cost int64
}

// taskEntryOverhead is what the client-memory budget charges for a task
// entry besides its ids, tool name and arguments: the entry and its two
// map slots.
const taskEntryOverhead = 256

// taskOwner returns who owns the tasks s creates.
func (s *session) taskOwner() taskOwner {
	if s.modern.Load() {
		return taskOwner{identity: s.id.Method + "\x00" + s.id.Name}
	}
	return taskOwner{sess: s}
}

// add records a task created upstream and returns its gateway entry; a
// task already recorded (the server answered with an id it gave before)
// keeps its entry when the owner is the same, and gets none otherwise.
// The entry is charged to acct (the creator's identity's account, which
// add takes over): over it, the account's oldest tasks are forgotten
// first, and when nothing is left to forget the task is not recorded (an
// error naming the budget).
func (t *taskTable) add(key taskKey, owner taskOwner, ttl time.Duration, c *call, acct *budget.Account) (*taskEntry, error) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID == nil {
		t.byID, t.byUp, t.perOwner = map[string]*taskEntry{}, map[taskKey]*taskEntry{}, map[taskOwner]int{}
	}
	if now.Sub(t.lastSweep) > taskSweepEvery {
		t.sweepLocked(now)
	}
	if e := t.byUp[key]; e != nil {
		acct.Release()
		if e.owner == owner {
			return e, nil
		}
		return nil, nil
	}
	if t.perOwner[owner] >= maxTasksPerOwner {
		t.dropOldestLocked(func(e *taskEntry) bool { return e.owner == owner })
	}
	e := &taskEntry{id: "edge-" + rand.Text(), key: key, owner: owner, created: now, expires: now.Add(ttl + taskTTLSlack),
		tool: c.upName, args: c.args, acct: acct}
	e.cost = int64(len(e.id)+len(key.upID)+len(e.tool)+len(e.args)) + taskEntryOverhead
	for !acct.Charge(budget.Tasks, e.cost) {
		if !t.dropOldestLocked(func(o *taskEntry) bool { return o.acct == acct }) {
			acct.Refused(budget.Tasks)
			err := fmt.Errorf("over the client memory budget: the task cannot be recorded (identity %q holds %d of its %d bytes; limits.client_memory_per_identity, limits.client_memory)",
				acct.Identity(), acct.Used(), acct.Limit())
			acct.Release()
			return nil, err
		}
		acct.Dropped(budget.Tasks, 1)
	}
	t.byID[e.id], t.byUp[key] = e, e
	t.perOwner[owner]++
	return e, nil
}

// lookup returns the entry of id when owner owns it and it has not expired.
func (t *taskTable) lookup(id string, owner taskOwner) *taskEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil || e.owner != owner {
		return nil
	}
	if time.Now().After(e.expires) {
		t.removeLocked(e)
		return nil
	}
	return e
}

// at returns the entry of the task key names, if recorded.
func (t *taskTable) at(key taskKey) *taskEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byUp[key]
}

// owned returns owner's live entries, oldest first.
func (t *taskTable) owned(owner taskOwner) []*taskEntry {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*taskEntry
	for _, e := range t.byID {
		if e.owner == owner && now.Before(e.expires) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *taskEntry) int { return a.created.Compare(b.created) })
	return out
}

// remove forgets e.
func (t *taskTable) remove(e *taskEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(e)
}

// hold keeps the status notification n of a task not recorded yet, and
// reports whether it did (not when the bounds are reached).
func (t *taskTable) hold(key taskKey, n *jsonrpc.Request) bool {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held == nil {
		t.held, t.heldAt = map[taskKey][]*jsonrpc.Request{}, map[taskKey]time.Time{}
	}
	if _, ok := t.held[key]; !ok && len(t.held) >= heldTasks {
		for k, at := range t.heldAt {
			if now.Sub(at) > heldFor {
				delete(t.held, k)
				delete(t.heldAt, k)
			}
		}
		if len(t.held) >= heldTasks {
			return false
		}
	}
	if len(t.held[key]) >= heldPerTask {
		return false
	}
	if _, ok := t.heldAt[key]; !ok {
		t.heldAt[key] = now
	}
	t.held[key] = append(t.held[key], n)
	return true
}

// takeHeld returns and forgets the notifications held for key, unless
// they are older than heldFor.
func (t *taskTable) takeHeld(key taskKey) []*jsonrpc.Request {
	t.mu.Lock()
	defer t.mu.Unlock()
	notes, at := t.held[key], t.heldAt[key]
	delete(t.held, key)
	delete(t.heldAt, key)
	if time.Since(at) > heldFor {
		return nil
	}
	return notes
}

// track records the tasks/* call id of s about task e.
func (t *taskTable) track(s *session, id jsonrpc.ID, e *taskEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.calls == nil {
		t.calls = map[*session]map[jsonrpc.ID]*taskEntry{}
	}
	if t.calls[s] == nil {
		t.calls[s] = map[jsonrpc.ID]*taskEntry{}
	}
	t.calls[s][id] = e
}

// tracked returns the task of the tasks/* call id of s in flight.
func (t *taskTable) tracked(s *session, id jsonrpc.ID) *taskEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls[s][id]
}

// untrack forgets the tasks/* call id of s and returns its task.
func (t *taskTable) untrack(s *session, id jsonrpc.ID) *taskEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.calls[s][id]
	if e != nil {
		if delete(t.calls[s], id); len(t.calls[s]) == 0 {
			delete(t.calls, s)
		}
	}
	return e
}

// forgetSession forgets what an ended session left: its tasks/* calls
// and, of a 2025 session, its tasks: no other client may reach them.
func (t *taskTable) forgetSession(s *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.calls, s)
	if t.perOwner[taskOwner{sess: s}] == 0 {
		return
	}
	for _, e := range t.byID {
		if e.owner.sess == s {
			t.removeLocked(e)
		}
	}
}

func (t *taskTable) removeLocked(e *taskEntry) {
	if t.byID[e.id] != e {
		return
	}
	delete(t.byID, e.id)
	delete(t.byUp, e.key)
	if t.perOwner[e.owner]--; t.perOwner[e.owner] <= 0 {
		delete(t.perOwner, e.owner)
	}
	e.acct.Credit(budget.Tasks, e.cost)
	e.acct.Release()
}

func (t *taskTable) sweepLocked(now time.Time) {
	t.lastSweep = now
	for _, e := range t.byID {
		if now.After(e.expires) {
			t.removeLocked(e)
		}
	}
}

// dropOldestLocked forgets the oldest entry that of matches, and reports
// whether there was one.
func (t *taskTable) dropOldestLocked(of func(*taskEntry) bool) bool {
	var oldest *taskEntry
	for _, e := range t.byID {
		if of(e) && (oldest == nil || e.created.Before(oldest.created)) {
			oldest = e
		}
	}
	if oldest != nil {
		t.removeLocked(oldest)
	}
	return oldest != nil
}

// taskRequest routes tasks/get, tasks/result, tasks/cancel and
// tasks/update by params.taskId to the upstream holding the task, and
// answers tasks/list.
func (s *session) taskRequest(req *jsonrpc.Request) {
	modern := s.modern.Load()
	v1, _, ext := s.g.taskSupport()
	offered := v1 && !modern || ext && modern
	id, named := wire.String(req.Params, "taskId")
	if !offered && (!named || s.g.route.tasks.lookup(id, s.taskOwner()) == nil) {
		// No upstream offers tasks (and the caller has none left): as a
		// server without tasks would answer.
		s.replyError(req.ID, jsonrpc.CodeMethodNotFound, "method not found: %s (no server offers tasks)", req.Method)
		return
	}
	switch {
	case modern && (req.Method == "tasks/list" || req.Method == "tasks/result"):
		s.replyError(req.ID, jsonrpc.CodeMethodNotFound,
			"method not found: %s is not part of the tasks extension (%s); tasks/get carries the result", req.Method, extTasks)
		return
	case modern && !s.declaresTasks():
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{extTasks: map[string]any{}}}})
		s.write(s.ctx, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: codeMissingCapability,
			Message: req.Method + " needs the client capability extensions[\"" + extTasks + "\"]", Data: data}})
		return
	case req.Method == "tasks/list":
		go s.listTasks(req)
		return
	}
	if !named {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: params.taskId must be a string", req.Method)
		return
	}
	e := s.g.route.tasks.lookup(id, s.taskOwner())
	if e == nil {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: unknown task %q", req.Method, id)
		return
	}
	params, err := wire.SetField(req.Params, "taskId", wire.AppendString(nil, e.key.upID))
	if err != nil {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s: %v", req.Method, err)
		return
	}
	s.g.route.tasks.track(s, req.ID, e)
	info := forwardInfo{kind: kindTools, upName: e.tool}
	var sc callScope
	if req.Method == "tasks/result" || req.Method == "tasks/get" {
		// The tool's result arrives here: it passes the tool's result
		// policies as a tools/call result would (filterResult).
		sc = policyScope(&s.g.pol, kindTools, e.key.u.name, e.tool)
		if pg := sc.Gen; pg != nil && resultPolicy(pg.Chain(), kindTools, e.key.u.name, e.tool) {
			info.pg, info.args = pg, e.args
		}
		info.waited = sc.Held()
	}
	s.forwardScoped(sc, req, e.key.u, params, info)
}

// declaresTasks reports whether a 2026-07-28 request declared the tasks
// extension among its client capabilities.
func (s *session) declaresTasks() bool {
	s.mu.Lock()
	declared := s.declared
	s.mu.Unlock()
	return declaresTasks(declared)
}

func declaresTasks(caps json.RawMessage) bool {
	ext, ok, _ := wire.Field(caps, "extensions")
	if !ok {
		return false
	}
	_, ok, _ = wire.Field(ext, extTasks)
	return ok
}

// taskAnswer completes the answer out to the client's forwarded call c,
// which went on link l: a task created upstream gets a gateway id; the
// answer to a tasks/* call gets the gateway id back in place of the
// upstream's. Everything else passes untouched.
func (s *session) taskAnswer(c *call, l *link, out *jsonrpc.Response) {
	switch c.method {
	case "tools/call":
		if out.Error != nil || l == nil || !bytes.Contains(out.Result, []byte(`"taskId"`)) {
			return
		}
		out.Result = s.taskCreated(c, l, out.Result)
	case "tasks/get", "tasks/result", "tasks/cancel", "tasks/update":
		e := s.g.route.tasks.untrack(s, c.origID)
		if e != nil && out.Error == nil {
			out.Result = rewriteTaskID(out.Result, e.key.upID, e.id)
		}
	}
}

// taskCreated records the task a tools/call result res created on link l,
// if it is one, and returns res with the gateway's id for it.
func (s *session) taskCreated(c *call, l *link, res json.RawMessage) json.RawMessage {
	upID, ttl, ok := createdTask(res)
	if !ok {
		return res
	}
	key := taskKey{u: l.u, upID: upID}
	if l.owner != nil {
		key.l = l
	}
	e, err := s.g.route.tasks.add(key, s.taskOwner(), ttl, c, s.g.clientMem.Acquire(s.id.Name, budgetShared(s.id)))
	if err != nil {
		return toolError("edge-mcp: " + err.Error())
	}
	if e == nil {
		// The server gave another client's task id again: never hand it on.
		l.u.log.Warn("a server answered a tools/call with a task id it gave another client; withheld")
		return toolError("edge-mcp: the server answered with a task that belongs to another client")
	}
	for _, n := range s.g.route.tasks.takeHeld(key) {
		// Sent before the result upstream: so downstream, on its stream.
		s.g.deliverTaskNote(e, n, c.origID)
	}
	return rewriteTaskID(res, upID, e.id)
}

// createdTask decodes the task a tools/call result creates: the upstream's
// task id and how long the server keeps it.
func createdTask(res json.RawMessage) (upID string, ttl time.Duration, ok bool) {
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
	ttl = taskTTLDefault
	if raw, ok, _ := wire.Field(task, ttlKey); ok {
		if ms, err := strconv.ParseFloat(string(raw), 64); err == nil && ms > 0 && ms < float64(taskTTLDefault/time.Millisecond) {
			ttl = time.Duration(ms) * time.Millisecond
		}
	}
	return upID, ttl, true
}

// rewriteTaskID replaces the task id from with to where a task result
// names it: at the top (Task, DetailedTask, the extension's
// CreateTaskResult), in task (2025-11-25's CreateTaskResult) and in
// _meta's related-task. Every other byte passes unchanged.
func rewriteTaskID(obj json.RawMessage, from, to string) json.RawMessage {
	out := obj
	if id, ok := wire.String(out, "taskId"); ok && id == from {
		if next, err := wire.SetField(out, "taskId", wire.AppendString(nil, to)); err == nil {
			out = next
		}
	}
	for _, path := range [][]string{{"task"}, {"_meta", metaRelatedTask}} {
		out = rewriteNested(out, path, from, to)
	}
	return out
}

// rewriteNested applies rewriteTaskID's top-level rule to the object at
// path inside obj.
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

// listTasks answers a 2025 session's tasks/list with its own tasks: each
// asked for upstream with tasks/get, in the order they were created; a
// task its server no longer knows is forgotten.
func (s *session) listTasks(req *jsonrpc.Request) {
	entries := s.g.route.tasks.owned(s.taskOwner())
	tasks := make([]json.RawMessage, len(entries))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, e := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			tasks[i] = s.fetchTask(e)
		}()
	}
	wg.Wait()
	out := []byte(`{"tasks":[`)
	n := 0
	for _, t := range tasks {
		if t == nil {
			continue
		}
		if n++; n > 1 {
			out = append(out, ',')
		}
		out = append(out, t...)
	}
	s.reply(req.ID, append(out, "]}"...))
}

// fetchTask asks e's upstream for the task's state, with the gateway's id
// in it; nil when it cannot be had.
func (s *session) fetchTask(e *taskEntry) json.RawMessage {
	l := e.key.l
	if l == nil {
		l = e.key.u.current()
	} else if e.key.u.clientLink(s) != l {
		l = nil // the per-client session it lived in is gone
	}
	if l == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, e.key.u.cfg.Timeout)
	defer cancel()
	params := append(append([]byte(`{"taskId":`), wire.AppendString(nil, e.key.upID)...), '}')
	res, err := l.call(ctx, "tasks/get", params)
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && rpcErr.Code == jsonrpc.CodeInvalidParams {
		s.g.route.tasks.remove(e) // expired or unknown upstream
		return nil
	}
	if err != nil || len(res) == 0 || res[0] != '{' {
		return nil
	}
	if res, err = wire.DeleteField(res, "_meta"); err != nil {
		return nil
	}
	return rewriteTaskID(res, e.key.upID, e.id)
}

// taskNotification routes a task status notification (2025-11-25:
// notifications/tasks/status; the extension: notifications/tasks) to the
// task's owner, with the gateway's id; a task the gateway does not know
// is nobody's to see.
func (l *link) taskNotification(n *jsonrpc.Request) {
	upID, ok := wire.String(n.Params, "taskId")
	if !ok {
		return
	}
	key := taskKey{u: l.u, upID: upID}
	if l.owner != nil {
		key.l = l
	}
	e := l.u.g.route.tasks.at(key)
	if e == nil {
		// Maybe its tools/call result is on its way (the server sent the
		// status first): held until then, briefly (taskCreated).
		if !l.u.g.route.tasks.hold(key, n) {
			l.u.log.Debug("dropping a status notification of a task no client owns", "method", n.Method)
		}
		return
	}
	l.u.g.deliverTaskNote(e, n, noID)
}

// deliverTaskNote sends the status notification n of task e to its owner,
// with the gateway's id; rel is the owner's request it relates to (noID:
// none).
func (g *Gateway) deliverTaskNote(e *taskEntry, n *jsonrpc.Request, rel jsonrpc.ID) {
	params := rewriteTaskID(n.Params, e.key.upID, e.id)
	if e.owner.sess != nil {
		e.owner.sess.notify(rel, n.Method, params)
		return
	}
	if e.owner.identity == auth.ModeNone+"\x00"+auth.AnonymousName {
		return // anonymous 2026-07-28 clients cannot be told apart: poll with tasks/get
	}
	for _, s := range g.route.allSessions() {
		if id, ok := s.subscription(""); ok && s.taskOwner() == e.owner {
			s.notify(id, n.Method, s.tagSubscription(params, id))
		}
	}
}

// addTaskCapabilities adds to caps, the gateway's capabilities at version,
// the tasks the connected upstreams support: for 2025-11-25 the tasks
// capability (list is the gateway's own; cancel and tools/call as far as
// some upstream offers them), for 2026-07-28 the tasks extension when some
// upstream offers it.
func (g *Gateway) addTaskCapabilities(caps map[string]any, version string) {
	v1, cancel, ext := g.taskSupport()
	switch {
	case version == protocol2026 && ext:
		caps["extensions"] = map[string]any{extTasks: map[string]any{}}
	case version != protocol2026 && v1:
		t := map[string]any{"list": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
		if cancel {
			t["cancel"] = map[string]any{}
		}
		caps["tasks"] = t
	}
}

// taskSupport reports what the connected upstreams offer of tasks: the
// 2025-11-25 tasks for tools/call (v1) and tasks/cancel, and the
// 2026-07-28 tasks extension (ext).
func (g *Gateway) taskSupport() (v1, cancel, ext bool) {
	for _, u := range g.route.upstreams().list {
		l := u.current()
		if l == nil {
			continue
		}
		if t, ok := l.caps["tasks"]; ok {
			req, _, _ := wire.Field(t, "requests")
			tools, _, _ := wire.Field(req, "tools")
			if _, call, _ := wire.Field(tools, "call"); call {
				v1 = true
				_, c, _ := wire.Field(t, "cancel")
				cancel = cancel || c
			}
		}
		ext = ext || l.offersTasks()
	}
	return v1, cancel, ext
}

// capabilities is what the gateway offers at version: serverCapabilities
// and the tasks its upstreams support.
func (g *Gateway) capabilities(version string) map[string]any {
	caps := serverCapabilities(version)
	g.addTaskCapabilities(caps, version)
	return caps
}

// taskTarget returns the session that owns the task a server→client
// request relates to (its _meta related-task, as a server sends while a
// task waits for input), the owner's tasks/result call for the task in
// flight on l if any (noID: none; the request then goes on the session's
// own stream), and the request's params with the gateway's id for the
// task; ok false when the request names no task of a 2025 session.
func (l *link) taskTarget(req *jsonrpc.Request) (s *session, rel jsonrpc.ID, params json.RawMessage, ok bool) {
	meta, ok, _ := wire.Field(req.Params, "_meta")
	if !ok {
		return nil, noID, nil, false
	}
	related, ok, _ := wire.Field(meta, metaRelatedTask)
	if !ok {
		return nil, noID, nil, false
	}
	upID, ok := wire.String(related, "taskId")
	if !ok {
		return nil, noID, nil, false
	}
	key := taskKey{u: l.u, upID: upID}
	if l.owner != nil {
		key.l = l
	}
	e := l.u.g.route.tasks.at(key)
	if e == nil || e.owner.sess == nil {
		return nil, noID, nil, false
	}
	return e.owner.sess, l.resultCall(e), rewriteNested(req.Params, []string{"_meta", metaRelatedTask}, upID, e.id), true
}

// resultCall returns the client id of the newest tasks/result call for
// task e of its owner in flight on l (noID: none).
func (l *link) resultCall(e *taskEntry) jsonrpc.ID {
	var candidates []*call
	l.mu.Lock()
	for _, c := range l.pending {
		if c.sess == e.owner.sess && c.method == "tasks/result" {
			candidates = append(candidates, c)
		}
	}
	l.mu.Unlock()
	var found *call
	for _, c := range candidates {
		if l.u.g.route.tasks.tracked(c.sess, c.origID) == e && (found == nil || c.start.After(found.start)) {
			found = c
		}
	}
	if found == nil {
		return noID
	}
	return found.origID
}

// filterInlined runs the result policies of a task's tool on the result a
// tasks/get answer inlines (the tasks extension's DetailedTask), if any.
func (s *session) filterInlined(c *call, resp *jsonrpc.Response) *jsonrpc.Response {
	inner, ok, err := wire.Field(resp.Result, "result")
	if err != nil || !ok || len(inner) == 0 || inner[0] != '{' {
		return resp
	}
	tc := &call{method: "tools/call", kind: c.kind, server: c.server, upName: c.upName, args: c.args, pg: c.pg}
	filtered := s.filterResult(tc, &jsonrpc.Response{ID: resp.ID, Result: inner})
	if filtered.Error != nil {
		return filtered
	}
	res, err := wire.SetField(resp.Result, "result", filtered.Result)
	if err != nil {
		return &jsonrpc.Response{ID: resp.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "edge-mcp: policy check ended: " + err.Error()}}
	}
	return &jsonrpc.Response{ID: resp.ID, Result: res}
}

// offersTasks reports whether l's server offers the tasks extension.
func (l *link) offersTasks() bool {
	ext, ok := l.caps["extensions"]
	if !ok {
		return false
	}
	_, ok, _ = wire.Field(ext, extTasks)
	return ok
}
