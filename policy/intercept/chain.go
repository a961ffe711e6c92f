package intercept

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Interceptor is one interceptor, wherever it runs. Describe returns its
// descriptor (constant for the interceptor's life); Invoke runs it once.
// Invoke fills at least the type-specific members of the result; the chain
// sets Interceptor, Type and Phase. Invoke must honour ctx's deadline where
// it can; the chain stops waiting at the deadline either way. Invoke must
// not modify inv.Payload.
type Interceptor interface {
	Describe() Descriptor
	Invoke(ctx context.Context, inv *Invocation) (*Result, error)
}

// Member is an interceptor in a chain, with the operator's overrides.
type Member struct {
	Interceptor Interceptor
	Mode        Mode          // overrides the descriptor's mode when set
	FailOpen    *bool         // overrides the descriptor's failOpen when set
	Priority    *Priority     // overrides the descriptor's priorityHint when set
	Timeout     time.Duration // per invocation; Options.Timeout when 0
	Config      json.RawMessage
	// Servers and Tools scope the member, as globs ('*', '?'; empty means
	// all) over the event's Context.Server and Context.Subject (the tool,
	// prompt or resource URI). An event that does not say (no context, or
	// an empty member) is in scope: an unknown target never skips a check.
	Servers, Tools []string
	// Virtual, when set, confines the member to the sessions of these
	// virtual servers (For); empty: every session's.
	Virtual []string
}

// Options configure a chain.
type Options struct {
	// Timeout is the default deadline of one invocation (2 s when 0).
	Timeout time.Duration
	// MaxPayload caps a mutated payload's size (4 MiB when 0).
	MaxPayload int
	// Logger receives failures and audit findings, at most once per minute
	// per interceptor and kind; nil discards.
	Logger *slog.Logger
	// State keeps the session state of the interceptors that ask for it
	// (Descriptor.SessionState); nil: they get none.
	State SessionStore
	// Observe, when set, is told the duration of every invocation, by
	// interceptor name (the gateway's latency histogram); it must be
	// cheap and safe for concurrent use.
	Observe func(interceptor string, d time.Duration)
}

// Counters are one interceptor's counts in a chain, and the durations of
// its last latencySamples invocations.
type Counters struct {
	Calls, Denials, Failures, Audits atomic.Int64

	latency [latencySamples]atomic.Int64 // nanoseconds, a ring
	next    atomic.Uint64
	// also is Options.Observe bound to the interceptor's name, or nil.
	also func(time.Duration)
}

// latencySamples is how many recent invocations P50 looks at.
const latencySamples = 256

// observe records one invocation's duration.
func (c *Counters) observe(d time.Duration) {
	c.latency[(c.next.Add(1)-1)%latencySamples].Store(int64(d))
	if c.also != nil {
		c.also(d)
	}
}

// P50 is the median duration of the interceptor's last invocations
// (at most 256, failures and timeouts included); 0 before the first.
func (c *Counters) P50() time.Duration {
	n := min(c.next.Load(), latencySamples)
	if n == 0 {
		return 0
	}
	ds := make([]int64, n)
	for i := range ds {
		ds[i] = c.latency[i].Load()
	}
	slices.Sort(ds)
	return time.Duration(ds[(n-1)/2])
}

type member struct {
	ic       Interceptor
	servers  []string
	tools    []string
	virtual  []string
	desc     Descriptor // with overrides applied
	timeout  time.Duration
	config   json.RawMessage
	counters Counters
	lastLog  sync.Map // kind string -> time.Time
}

// Chain runs lifecycle events through its interceptors. It is safe for
// concurrent use.
type Chain struct {
	members    []*member
	byName     map[string]*member
	timeout    time.Duration
	maxPayload int
	log        *slog.Logger
	state      SessionStore
	// scoped reports whether a member has Virtual; views caches For's
	// chains by virtual server name.
	scoped bool
	views  sync.Map
}

// NewChain builds a chain. Names must be unique.
func NewChain(opts Options, members ...Member) (*Chain, error) {
	c := &Chain{byName: map[string]*member{}, timeout: opts.Timeout, maxPayload: opts.MaxPayload, log: opts.Logger, state: opts.State}
	if c.timeout <= 0 {
		c.timeout = 2 * time.Second
	}
	if c.maxPayload <= 0 {
		c.maxPayload = 4 << 20
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	for _, m := range members {
		if m.Interceptor == nil {
			return nil, fmt.Errorf("chain member %d: no interceptor", len(c.members))
		}
		d := m.Interceptor.Describe()
		if d.Mode == "" {
			d.Mode = Active
		}
		if m.Mode != "" {
			d.Mode = m.Mode
		}
		if m.FailOpen != nil {
			d.FailOpen = *m.FailOpen
		}
		if m.Priority != nil {
			d.PriorityHint = *m.Priority
		}
		if err := CheckName(d.Name); err != nil {
			return nil, fmt.Errorf("chain member %d: %w", len(c.members), err)
		}
		if d.Type != Validation && d.Type != Mutation {
			return nil, fmt.Errorf("interceptor %q: type %q: want validation or mutation", d.Name, d.Type)
		}
		if _, dup := c.byName[d.Name]; dup {
			return nil, fmt.Errorf("interceptor %q is in the chain twice", d.Name)
		}
		if err := checkGlobs(m.Servers, m.Tools); err != nil {
			return nil, fmt.Errorf("interceptor %q: %w", d.Name, err)
		}
		mm := &member{ic: m.Interceptor, desc: d, timeout: cmp.Or(m.Timeout, c.timeout), config: m.Config, servers: m.Servers, tools: m.Tools, virtual: m.Virtual}
		if opts.Observe != nil {
			name := d.Name
			mm.counters.also = func(d time.Duration) { opts.Observe(name, d) }
		}
		c.scoped = c.scoped || len(m.Virtual) > 0
		c.members = append(c.members, mm)
		c.byName[d.Name] = mm
	}
	return c, nil
}

// For returns the chain of the sessions of the named virtual server (""
// for none): c without the members confined to other virtual servers,
// sharing c's members and their counters; nil for a nil chain or when no
// member remains.
func (c *Chain) For(virtual string) *Chain {
	if c == nil || !c.scoped {
		return c
	}
	if v, ok := c.views.Load(virtual); ok {
		return v.(*Chain)
	}
	v := &Chain{byName: c.byName, timeout: c.timeout, maxPayload: c.maxPayload, log: c.log, state: c.state}
	for _, m := range c.members {
		if len(m.virtual) == 0 || slices.Contains(m.virtual, virtual) {
			v.members = append(v.members, m)
		}
	}
	if len(v.members) == 0 {
		v = nil
	}
	got, _ := c.views.LoadOrStore(virtual, v)
	return got.(*Chain)
}

// Descriptors returns the effective descriptors (overrides applied), in
// chain order.
func (c *Chain) Descriptors() []Descriptor {
	out := make([]Descriptor, len(c.members))
	for i, m := range c.members {
		out[i] = m.desc
	}
	return out
}

// Hooks reports whether a member of c hooks event in either phase: false
// for a nil chain. An event no member hooks can skip the chain.
func (c *Chain) Hooks(event string) bool {
	if c == nil {
		return false
	}
	for _, m := range c.members {
		if m.desc.HooksEvent(event) {
			return true
		}
	}
	return false
}

// Counters returns the counters of the named interceptor, or nil.
func (c *Chain) Counters(name string) *Counters {
	if m := c.byName[name]; m != nil {
		return &m.counters
	}
	return nil
}

// Event is one lifecycle event to run through a chain.
type Event struct {
	Event   string
	Phase   Phase
	Payload json.RawMessage
	Context *Context
	// Check, when set, checks each payload a mutator produces beyond the
	// event's shape (a tools/call's arguments against the tool's
	// inputSchema, say). An error is that mutator's failure, named in the
	// refusal: its failOpen decides, and a fail-open mutator's payload is
	// not applied (the chain goes on with the last valid one).
	Check func(payload json.RawMessage) error
	// EntryServers, on the response phase of a list event (tools/list,
	// prompts/list, resources/list, resources/templates/list), names the
	// server of each entry of the page, in order ("" for the gateway's
	// own): members scoped with Servers or Tools then see, change and
	// refuse only the entries of their scope (entries.go).
	EntryServers []string
}

// Shadow is what an audit mutator would have done.
type Shadow struct {
	Interceptor   string
	Before, After json.RawMessage
}

// Outcome is what a chain did with an event.
type Outcome struct {
	// Payload is the payload after the applied mutations.
	Payload json.RawMessage
	// Modified reports whether an applied mutation changed it.
	Modified bool
	// Results are the results received, mutators in order then validators
	// in chain order (request) or the other way round (response).
	Results []*Result
	// Failures are the failures that did not refuse the event (fail-open
	// or audit interceptors).
	Failures []*FailError
	// Audits are audit validators' refusals that did not block.
	Audits []*Result
	// Shadows are audit mutators' changes, computed and not applied.
	Shadows []Shadow
	// Withheld are the refusals (and fail-closed failures) of members
	// scoped to part of a list's page: the entries of their scope were
	// taken out of the page, the rest went on.
	Withheld []*Refusal
}

// Run runs ev through the interceptors that hook ev.Event in ev.Phase, in
// the trust-boundary order. The returned Outcome is never nil; the error
// is a *Refusal when an interceptor refused the event (the Outcome then
// reports what ran before), or ctx's error.
func (c *Chain) Run(ctx context.Context, ev Event) (*Outcome, error) {
	out := &Outcome{Payload: ev.Payload}
	list := ListMember(ev.Event) != ""
	var pg *page
	if list {
		pg = newPage(ev, ev.Payload)
	}
	var muts, vals []*member
	for _, m := range c.members {
		if !m.desc.Matches(ev.Event, ev.Phase) {
			continue
		}
		switch {
		case list && ev.Phase == Request && m.scoped():
			continue // a list's cursor is the whole list's
		case pg != nil && m.scoped(): // runs on the entries of its scope
		case !m.inScope(ev.Context):
			continue
		}
		if m.desc.Type == Mutation {
			muts = append(muts, m)
		} else {
			vals = append(vals, m)
		}
	}
	if len(muts) == 0 && len(vals) == 0 {
		return out, nil
	}
	slices.SortStableFunc(muts, func(a, b *member) int {
		return cmp.Or(cmp.Compare(a.desc.PriorityHint.For(ev.Phase), b.desc.PriorityHint.For(ev.Phase)), cmp.Compare(a.desc.Name, b.desc.Name))
	})
	if ev.Phase == Request {
		if err := c.mutate(ctx, ev, pg, muts, out); err != nil {
			return out, err
		}
		return out, c.validate(ctx, ev, pg, vals, out)
	}
	if err := c.validate(ctx, ev, pg, vals, out); err != nil {
		return out, err
	}
	return out, c.mutate(ctx, ev, pg, muts, out)
}

// target is what one member is invoked on: the event (its context
// naming the servers of a page's view) and payload; for a member scoped
// to part of a page, the indices of its entries (skip: none).
type target struct {
	ev      Event
	payload json.RawMessage
	idx     []int
	skip    bool
}

// target returns what m runs on: the payload, or for a member scoped to
// part of page pg, the view of its entries.
func (c *Chain) target(ev Event, m *member, pg *page, payload json.RawMessage) (target, *FailError) {
	t := target{ev: ev, payload: payload}
	if pg == nil || !m.scoped() {
		return t, nil
	}
	t.idx = pg.in(m)
	if len(t.idx) == 0 {
		t.skip = true
		return t, nil
	}
	v, vctx, err := pg.view(payload, ev.Context, t.idx)
	if err != nil {
		return t, &FailError{Interceptor: m.desc.Name, Kind: ErrFailed, Err: fmt.Errorf("the view of its entries: %w", err)}
	}
	t.payload, t.ev.Context = v, vctx
	return t, nil
}

// withhold takes the entries of a scoped member's refusal out of the
// page instead of refusing the event.
func (c *Chain) withhold(pg *page, out *Outcome, idx []int, ref *Refusal) error {
	drop := make(map[int]bool, len(idx))
	for _, i := range idx {
		drop[i] = true
	}
	p, err := pg.drop(out.Payload, drop)
	if err != nil {
		return err
	}
	out.Payload, out.Modified = p, true
	out.Withheld = append(out.Withheld, ref)
	return nil
}

// mutate runs the mutators in order on out.Payload.
func (c *Chain) mutate(ctx context.Context, ev Event, pg *page, muts []*member, out *Outcome) error {
	for _, m := range muts {
		if err := ctx.Err(); err != nil {
			return err
		}
		cur := out.Payload
		t, ferr := c.target(ev, m, pg, cur)
		if t.skip {
			continue
		}
		var res *Result
		if ferr == nil {
			res, ferr = c.invoke(ctx, m, t.ev, t.payload)
		}
		if ferr == nil && res.Modified {
			ferr = c.checkMutation(m, t.ev, t.payload, res.Payload)
		}
		next := res
		if ferr == nil && res.Modified && m.desc.Mode != Audit && t.idx != nil {
			p, err := pg.replace(cur, t.idx, res.Payload)
			if err != nil {
				ferr = &FailError{Interceptor: m.desc.Name, Kind: ErrBadResult, Err: err}
			} else {
				next = &Result{Modified: true, Payload: p}
			}
		}
		if ferr != nil {
			if err := c.failed(ctx, m, ev, ferr, out); err != nil {
				if t.idx == nil || ctx.Err() != nil {
					return err
				}
				if err := c.withhold(pg, out, t.idx, err.(*Refusal)); err != nil {
					return err
				}
			}
			continue
		}
		out.Results = append(out.Results, res)
		if !res.Modified {
			continue
		}
		if m.desc.Mode == Audit {
			m.counters.Audits.Add(1)
			out.Shadows = append(out.Shadows, Shadow{Interceptor: m.desc.Name, Before: t.payload, After: res.Payload})
			c.note(m, "shadow", "audit mutator would change the payload", "event", ev.Event, "phase", ev.Phase)
			continue
		}
		out.Payload, out.Modified = next.Payload, true
		if pg != nil && t.idx == nil {
			pg.follow(out.Payload)
		}
	}
	return nil
}

// validate runs the validators concurrently on out.Payload and refuses the
// event when an active one blocks or fails closed (a member scoped to
// part of page pg withholds its entries instead).
func (c *Chain) validate(ctx context.Context, ev Event, pg *page, vals []*member, out *Outcome) error {
	if len(vals) == 0 {
		return nil
	}
	type answer struct {
		res *Result
		err *FailError
		// what the member runs on when pg scopes it (entries.go): its
		// entries (skip: none), payload and context
		idx     []int
		skip    bool
		payload json.RawMessage
		ctx     *Context
	}
	answers := make([]answer, len(vals))
	for i, m := range vals {
		a := &answers[i]
		a.payload, a.ctx = out.Payload, ev.Context
		if pg != nil && m.scoped() {
			var t target
			t, a.err = c.target(ev, m, pg, out.Payload)
			a.idx, a.skip, a.payload, a.ctx = t.idx, t.skip, t.payload, t.ev.Context
		}
	}
	// The first validator runs on this goroutine, the others beside it.
	var wg sync.WaitGroup
	for i, m := range vals[1:] {
		if a := &answers[i+1]; !a.skip && a.err == nil {
			wg.Go(func() { a.res, a.err = c.invoke(ctx, m, withContext(ev, a.ctx), a.payload) })
		}
	}
	if a := &answers[0]; !a.skip && a.err == nil {
		a.res, a.err = c.invoke(ctx, vals[0], withContext(ev, a.ctx), a.payload)
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	var refusals []*Refusal
	var drop map[int]bool
	for i, m := range vals {
		a := answers[i]
		if a.skip {
			continue
		}
		var r *Refusal
		switch {
		case a.err != nil:
			if err := c.failed(ctx, m, ev, a.err, out); err != nil {
				r = err.(*Refusal)
			}
		case a.res != nil:
			out.Results = append(out.Results, a.res)
			if !a.res.Blocks() {
				break
			}
			if m.desc.Mode == Audit {
				m.counters.Audits.Add(1)
				out.Audits = append(out.Audits, a.res)
				c.note(m, "audit", "audit validator refused", "event", ev.Event, "phase", ev.Phase, "reason", a.res.Reason())
				break
			}
			m.counters.Denials.Add(1)
			r = &Refusal{Interceptor: m.desc.Name, Event: ev.Event, Phase: ev.Phase, Messages: a.res.Messages}
		}
		switch {
		case r == nil:
		case a.idx == nil:
			refusals = append(refusals, r)
		default: // its entries leave the page; the rest goes on
			if drop == nil {
				drop = map[int]bool{}
			}
			for _, i := range a.idx {
				drop[i] = true
			}
			out.Withheld = append(out.Withheld, r)
		}
	}
	if len(drop) > 0 {
		p, err := pg.drop(out.Payload, drop)
		if err != nil {
			return err
		}
		out.Payload, out.Modified = p, true
	}
	if len(refusals) == 0 {
		return nil
	}
	slices.SortFunc(refusals, func(a, b *Refusal) int { return cmp.Compare(a.Interceptor, b.Interceptor) })
	first := refusals[0]
	for _, r := range refusals[1:] {
		first.Others = append(first.Others, r.Interceptor)
	}
	return first
}

// withContext is ev with context ctx.
func withContext(ev Event, ctx *Context) Event {
	ev.Context = ctx
	return ev
}

// failed handles an interceptor failure: it is recorded and skipped for
// audit and fail-open interceptors, and refuses the event otherwise.
func (c *Chain) failed(ctx context.Context, m *member, ev Event, ferr *FailError, out *Outcome) error {
	m.counters.Failures.Add(1)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if m.desc.Mode == Audit || m.desc.FailOpen {
		out.Failures = append(out.Failures, ferr)
		c.note(m, "failure", "interceptor failed; skipped", "event", ev.Event, "phase", ev.Phase, "error", ferr)
		return nil
	}
	m.counters.Denials.Add(1)
	c.note(m, "failure", "interceptor failed; fail-closed", "event", ev.Event, "phase", ev.Phase, "error", ferr)
	return &Refusal{Interceptor: m.desc.Name, Event: ev.Event, Phase: ev.Phase, Failure: ferr}
}

// note logs at most once a minute per interceptor and kind.
func (c *Chain) note(m *member, kind, msg string, args ...any) {
	now := time.Now()
	if last, ok := m.lastLog.Load(kind); ok && now.Sub(last.(time.Time)) < time.Minute {
		return
	}
	m.lastLog.Store(kind, now)
	c.log.Warn(msg, append([]any{"interceptor", m.desc.Name}, args...)...)
}

// invoke calls one interceptor under its deadline and checks the answer.
func (c *Chain) invoke(ctx context.Context, m *member, ev Event, payload json.RawMessage) (*Result, *FailError) {
	m.counters.Calls.Add(1)
	inv := &Invocation{
		Name: m.desc.Name, Event: ev.Event, Phase: ev.Phase, Payload: payload,
		Config: m.config, TimeoutMs: m.timeout.Milliseconds(), Context: ev.Context,
	}
	var res *Result
	var err *FailError
	if m.desc.SessionState && c.state != nil && inv.Context != nil && inv.Context.SessionID != "" {
		res, err = c.invokeStateful(ctx, m, inv)
	} else {
		res, err = c.call(ctx, m, inv)
	}
	if err != nil {
		return nil, err
	}
	res.Interceptor, res.Type, res.Phase = m.desc.Name, m.desc.Type, ev.Phase
	if m.desc.Type == Mutation && !res.Modified {
		res.Payload = payload
	}
	return res, nil
}

// call invokes m once under its deadline, observing its latency.
func (c *Chain) call(ctx context.Context, m *member, inv *Invocation) (*Result, *FailError) {
	start := time.Now()
	res, err := Call(ctx, m.ic, inv, m.timeout)
	m.counters.observe(time.Since(start))
	return res, err
}

// DeadlineEnforcer is implemented by interceptors that stop at their
// context's deadline on their own (Wasm modules, remote servers): Call runs
// them on the caller's goroutine instead of watching them from another.
type DeadlineEnforcer interface {
	EnforcesDeadline() bool
}

// Call invokes ic once with deadline timeout, recovering panics and, unless
// ic enforces its deadline itself, returning without waiting for an
// interceptor that ignores it.
func Call(ctx context.Context, ic Interceptor, inv *Invocation, timeout time.Duration) (*Result, *FailError) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var res *Result
	var err error
	if de, ok := ic.(DeadlineEnforcer); ok && de.EnforcesDeadline() {
		res, err = invokeSafely(ctx, ic, inv)
	} else {
		type answer struct {
			res *Result
			err error
		}
		done := make(chan answer, 1)
		go func() {
			r, e := invokeSafely(ctx, ic, inv)
			done <- answer{r, e}
		}()
		select {
		case a := <-done:
			res, err = a.res, a.err
		case <-ctx.Done():
			return nil, &FailError{Interceptor: inv.Name, Kind: ErrTimeout, Err: fmt.Errorf("after %v", timeout)}
		}
	}
	if err != nil {
		if fe, ok := err.(*FailError); ok {
			return nil, fe
		}
		if ctx.Err() != nil {
			return nil, &FailError{Interceptor: inv.Name, Kind: ErrTimeout, Err: fmt.Errorf("after %v: %w", timeout, err)}
		}
		return nil, &FailError{Interceptor: inv.Name, Kind: ErrFailed, Err: err}
	}
	if res == nil {
		return nil, &FailError{Interceptor: inv.Name, Kind: ErrBadResult, Err: fmt.Errorf("no result")}
	}
	res.DurationMs = time.Since(start).Milliseconds()
	return res, nil
}

// invokeSafely calls ic.Invoke, turning a panic into a failure.
func invokeSafely(ctx context.Context, ic Interceptor, inv *Invocation) (res *Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, &FailError{Interceptor: inv.Name, Kind: ErrPanic, Err: fmt.Errorf("%v", p)}
		}
	}()
	return ic.Invoke(ctx, inv)
}
