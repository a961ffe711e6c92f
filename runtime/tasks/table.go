package tasks

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/budget"
)

// Bounds of the task table.
const (
	maxTasksPerOwner = 1000
	ttlDefault       = 24 * time.Hour  // a task whose server gives no ttl
	ttlSlack         = time.Minute     // the server may round its expiry up
	sweepEvery       = 5 * time.Minute // how often expired entries are dropped
	// Status notifications of a task not recorded yet are held this long,
	// at most heldTasks tasks and heldPerTask notifications each.
	heldFor     = 10 * time.Second
	heldTasks   = 256
	heldPerTask = 8
)

// Table maps the gateway's task ids to the tasks upstream. Its zero value
// is ready to use; its methods may be called from any goroutine.
type Table struct {
	mu        sync.Mutex
	byID      map[string]*Entry
	byUp      map[Key]*Entry
	perOwner  map[Owner]int
	lastSweep time.Time
	// calls are the tasks/* calls in flight, by session and client id:
	// their answers get the gateway's task id back.
	calls map[Session]map[jsonrpc.ID]*Entry
	// held are status notifications of tasks not recorded yet, by
	// where the task lives, with when the first arrived.
	held   map[Key][]*jsonrpc.Request
	heldAt map[Key]time.Time
}

// Key is where a task lives: its upstream, the per-client link it was
// created on (nil: the upstream's shared link) and its upstream id. The
// gateway's own values stand for the upstream and the link; the table only
// compares them.
type Key struct {
	Upstream any
	Link     any
	UpID     string
}

// Owner is who may see a task: a 2025 session, or a 2026-07-28 client's
// identity (Session nil).
type Owner struct {
	Session  Session
	Identity string
}

// Entry is a task the gateway recorded.
type Entry struct {
	ID    string // the gateway's id, the one the client sees
	Key   Key
	Owner Owner
	// Tool is the upstream name of the tool whose call created the task
	// and Args its arguments when result policies saw them: the task's
	// result passes the tool's result policies.
	Tool string
	Args json.RawMessage

	created time.Time
	expires time.Time
	// acct is charged cost while the entry is recorded.
	acct *budget.Account
	cost int64
}

// entryOverhead is what the client-memory budget charges for a task
// entry besides its ids, tool name and arguments: the entry and its two
// map slots.
const entryOverhead = 256

// add records a task created upstream and returns its gateway entry; a
// task already recorded (the server answered with an id it gave before)
// keeps its entry when the owner is the same, and gets none otherwise.
// The entry is charged to acct (the creator's identity's account, which
// add takes over): over it, the account's oldest tasks are forgotten
// first, and when nothing is left to forget the task is not recorded (an
// error naming the budget).
func (t *Table) add(key Key, owner Owner, ttl time.Duration, tool string, args json.RawMessage, acct *budget.Account) (*Entry, error) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID == nil {
		t.byID, t.byUp, t.perOwner = map[string]*Entry{}, map[Key]*Entry{}, map[Owner]int{}
	}
	if now.Sub(t.lastSweep) > sweepEvery {
		t.sweepLocked(now)
	}
	if e := t.byUp[key]; e != nil {
		acct.Release()
		if e.Owner == owner {
			return e, nil
		}
		return nil, nil
	}
	if t.perOwner[owner] >= maxTasksPerOwner {
		t.dropOldestLocked(func(e *Entry) bool { return e.Owner == owner })
	}
	e := &Entry{ID: "edge-" + rand.Text(), Key: key, Owner: owner, created: now, expires: now.Add(ttl + ttlSlack),
		Tool: tool, Args: args, acct: acct}
	e.cost = int64(len(e.ID)+len(key.UpID)+len(e.Tool)+len(e.Args)) + entryOverhead
	for !acct.Charge(budget.Tasks, e.cost) {
		if !t.dropOldestLocked(func(o *Entry) bool { return o.acct == acct }) {
			acct.Refused(budget.Tasks)
			err := fmt.Errorf("over the client memory budget: the task cannot be recorded (identity %q holds %d of its %d bytes; limits.client_memory_per_identity, limits.client_memory)",
				acct.Identity(), acct.Used(), acct.Limit())
			acct.Release()
			return nil, err
		}
		acct.Dropped(budget.Tasks, 1)
	}
	t.byID[e.ID], t.byUp[key] = e, e
	t.perOwner[owner]++
	return e, nil
}

// lookup returns the entry of id when owner owns it and it has not expired.
func (t *Table) lookup(id string, owner Owner) *Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil || e.Owner != owner {
		return nil
	}
	if time.Now().After(e.expires) {
		t.removeLocked(e)
		return nil
	}
	return e
}

// At returns the entry of the task key names, if recorded.
func (t *Table) At(key Key) *Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byUp[key]
}

// owned returns owner's live entries, oldest first.
func (t *Table) owned(owner Owner) []*Entry {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*Entry
	for _, e := range t.byID {
		if e.Owner == owner && now.Before(e.expires) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *Entry) int { return a.created.Compare(b.created) })
	return out
}

// remove forgets e.
func (t *Table) remove(e *Entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(e)
}

// hold keeps the status notification n of a task not recorded yet, and
// reports whether it did (not when the bounds are reached).
func (t *Table) hold(key Key, n *jsonrpc.Request) bool {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held == nil {
		t.held, t.heldAt = map[Key][]*jsonrpc.Request{}, map[Key]time.Time{}
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
func (t *Table) takeHeld(key Key) []*jsonrpc.Request {
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
func (t *Table) track(s Session, id jsonrpc.ID, e *Entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.calls == nil {
		t.calls = map[Session]map[jsonrpc.ID]*Entry{}
	}
	if t.calls[s] == nil {
		t.calls[s] = map[jsonrpc.ID]*Entry{}
	}
	t.calls[s][id] = e
}

// Tracked returns the task of the tasks/* call id of s in flight.
func (t *Table) Tracked(s Session, id jsonrpc.ID) *Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls[s][id]
}

// untrack forgets the tasks/* call id of s and returns its task.
func (t *Table) untrack(s Session, id jsonrpc.ID) *Entry {
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

// ForgetSession forgets what an ended session left: its tasks/* calls
// and, of a 2025 session, its tasks: no other client may reach them.
func (t *Table) ForgetSession(s Session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.calls, s)
	if t.perOwner[Owner{Session: s}] == 0 {
		return
	}
	for _, e := range t.byID {
		if e.Owner.Session == s {
			t.removeLocked(e)
		}
	}
}

func (t *Table) removeLocked(e *Entry) {
	if t.byID[e.ID] != e {
		return
	}
	delete(t.byID, e.ID)
	delete(t.byUp, e.Key)
	if t.perOwner[e.Owner]--; t.perOwner[e.Owner] <= 0 {
		delete(t.perOwner, e.Owner)
	}
	e.acct.Credit(budget.Tasks, e.cost)
	e.acct.Release()
}

func (t *Table) sweepLocked(now time.Time) {
	t.lastSweep = now
	for _, e := range t.byID {
		if now.After(e.expires) {
			t.removeLocked(e)
		}
	}
}

// dropOldestLocked forgets the oldest entry that of matches, and reports
// whether there was one.
func (t *Table) dropOldestLocked(of func(*Entry) bool) bool {
	var oldest *Entry
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
