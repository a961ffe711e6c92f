package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Shadow mode. A shadow attachment (Attachment.Shadow, Spec.Mode "shadow")
// never changes an outcome: the chain computes the enforced outcome while
// ignoring it, then hands the shadow module the input the chain itself
// received, on a goroutine, and compares the shadow module's outcome (as
// if it alone were enforced, its on_error included) with the enforced one.
// Differences are logged at Info, agreements at Debug, and both counted in
// the module's Stats.

// gate counts goroutines in flight so that an owner can wait for them;
// once closed it admits no more.
type gate struct {
	mu      sync.Mutex
	closed  bool
	pending int
	wg      sync.WaitGroup
}

// enter admits one goroutine unless the gate is closed or, with limit > 0,
// limit are already in; full reports the latter.
func (g *gate) enter(limit int) (ok, full bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false, false
	}
	if limit > 0 && g.pending >= limit {
		return false, true
	}
	g.pending++
	g.wg.Add(1)
	return true, false
}

func (g *gate) leave() {
	g.mu.Lock()
	g.pending--
	g.mu.Unlock()
	g.wg.Done()
}

// close stops admitting and waits for those in.
func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

// shadowRun is one shadow module call to make and compare.
type shadowRun struct {
	a        *Attached
	input    []byte   // the encoded hook input, owned by the run(s)
	sub      *subject // what the input acts on
	enforced *verdict // nil for events: nothing to compare
	what     string   // server and tool, prompt or URI, for logs
}

// spawn starts r on a goroutine unless the chain is closing or the module
// has MaxShadowPending runs in flight (then the run is skipped and
// counted). The run does not inherit ctx's cancellation.
func (c *Chain) spawn(ctx context.Context, r shadowRun) {
	m := r.a.Module
	if ok, _ := c.shadows.enter(0); !ok {
		return
	}
	ok, full := m.shadows.enter(m.opts.MaxShadowPending)
	if !ok {
		c.shadows.leave()
		if full {
			m.shadowSkipped.Add(1)
		}
		return
	}
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer c.shadows.leave()
		defer m.shadows.leave()
		r.run(ctx)
	}()
}

func (r *shadowRun) run(ctx context.Context) {
	a, m := r.a, r.a.Module
	hook := r.sub.base.hook
	out, err := m.call(ctx, hook, r.input)
	var got verdict
	if err == nil {
		if got, err = decodeVerdict(out, r.sub); err != nil {
			err = outputFailure(ctx, a, hook, err)
		}
	}
	if err != nil {
		if errors.Is(err, ErrClosed) || errors.Is(err, ErrCanceled) {
			return // the module went away: nothing to compare
		}
		got = failVerdict(a, err, r.sub)
	}
	m.shadowRuns.Add(1)
	if r.enforced == nil {
		return
	}
	level, msg := slog.LevelDebug, "policy shadow decision matches"
	if !sameVerdict(r.enforced, &got) {
		m.shadowDiffs.Add(1)
		level, msg = slog.LevelInfo, "policy shadow decision differs"
	}
	log := m.eng.log
	if !log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("module", a.Name), slog.String("hook", hook.String()), slog.String("subject", r.what),
		slog.String("enforced", clip(r.enforced.appendJSON(nil))), slog.String("shadow", clip(got.appendJSON(nil))),
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	log.LogAttrs(ctx, level, msg, attrs...)
}

// shadowToolCall starts the shadow runs of a tool call whose enforced
// decision is d.
func (c *Chain) shadowToolCall(ctx context.Context, in CallInput, atts []*Attached, d Decision) {
	var (
		input    []byte
		sub      *subject
		enforced *verdict
		what     string
	)
	for _, a := range atts {
		if !a.Shadow || !a.Module.hooks.Has(HookToolCall) {
			continue
		}
		if input == nil {
			what = in.Server + "/" + in.Tool
			args := orEmptyObject(in.Arguments)
			input = encodeToolCall(nil, in.Client, in.Server, in.Tool, args)
			sub = &subject{base: verdict{hook: HookToolCall, action: Allow, args: tail(input, len(args)), inTool: in.Tool}}
			e := sub.base
			e.action, e.reason, e.server, e.tool, e.approval = d.Action, d.Reason, d.Server, d.Tool, d.RequireApproval
			if d.Arguments != nil { // a guest's output, not the caller's bytes
				e.args, e.rewritten = d.Arguments, true
			}
			enforced = &e
		}
		c.spawn(ctx, shadowRun{a: a, input: input, sub: sub, enforced: enforced, what: what})
	}
}

// shadowResult starts the shadow runs of a result hook whose input result
// was orig and whose enforced outcome is res or err.
func (c *Chain) shadowResult(ctx context.Context, atts []*Attached, hook Hook, orig, res json.RawMessage, err error,
	server, name string, encode func([]byte, json.RawMessage) []byte) {
	var denied *DeniedError
	if err != nil && !errors.As(err, &denied) {
		return // ctx ended
	}
	var (
		input    []byte
		sub      *subject
		enforced *verdict
		what     string
	)
	for _, a := range atts {
		if !a.Shadow || !a.Module.hooks.Has(hook) {
			continue
		}
		if input == nil {
			what = server + "/" + name
			input = encode(nil, orig)
			sub = &subject{base: verdict{hook: hook, result: tail(input, len(orig))}}
			e := sub.base
			switch {
			case denied != nil:
				e.result, e.withheld = nil, denied.Reason
			case !sameBytes(res, orig): // a guest's output or a fail-closed result
				e.result = res
			}
			enforced = &e
		}
		c.spawn(ctx, shadowRun{a: a, input: input, sub: sub, enforced: enforced, what: what})
	}
}

// sameBytes reports whether a and b are the same slice.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// shadowToolsList starts the shadow runs of a catalogue whose enforced
// outcome is out.
func (c *Chain) shadowToolsList(ctx context.Context, client Client, tools, out []ToolEntry) {
	var (
		entries  []ToolEntry
		base     verdict
		enforced *verdict
	)
	for _, a := range c.atts {
		if !a.Shadow || !a.Module.hooks.Has(HookToolsList) {
			continue
		}
		var idx []int
		for i := range tools {
			if a.matches(tools[i].Server, tools[i].Name) {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		if entries == nil {
			entries = slices.Clone(tools)
			base = verdict{hook: HookToolsList, tools: shown(entries)}
			enforced = &verdict{hook: HookToolsList, tools: shown(out)}
		}
		input := encodeToolsList(nil, client, entries, idx)
		sub := &subject{base: base, tools: entries, idx: idx}
		c.spawn(ctx, shadowRun{a: a, input: input, sub: sub, enforced: enforced, what: strconv.Itoa(len(idx)) + " tools"})
	}
}

// shadowEvent delivers an encoded event to the shadow attachments.
func (c *Chain) shadowEvent(ctx context.Context, atts []*Attached, encoded []byte, server, tool string) {
	var (
		input []byte
		sub   *subject
		what  string
	)
	for _, a := range atts {
		if !a.Shadow || !a.Module.hooks.Has(HookEvent) {
			continue
		}
		if input == nil {
			what = server
			if tool != "" {
				what += "/" + tool
			}
			input = bytes.Clone(encoded)
			sub = &subject{base: verdict{hook: HookEvent}}
		}
		c.spawn(ctx, shadowRun{a: a, input: input, sub: sub, what: what})
	}
}

// sameVerdict reports whether two outcomes of one input agree: for
// tool_call the action, the arguments the call goes on with (JSON-equal)
// and the route target; for results the (JSON-equal) result, or both
// withheld; for tools_list the same tools under the same names.
func sameVerdict(a, b *verdict) bool {
	switch a.hook {
	case HookToolCall:
		switch {
		case a.action != b.action:
			return false
		case a.action == Deny:
			return true
		case a.action == Route && (a.server != b.server || a.routeTool() != b.routeTool()):
			return false
		}
		return jsonEqual(a.args, b.args)
	case HookToolResult, HookResourceResult, HookPromptResult:
		if a.withheld != "" || b.withheld != "" {
			return a.withheld != "" && b.withheld != ""
		}
		return jsonEqual(a.result, b.result)
	case HookToolsList:
		return slices.EqualFunc(a.tools, b.tools, func(x, y shownTool) bool {
			return x.server == y.server && x.exposed == y.exposed
		})
	}
	return true
}

// jsonEqual reports whether a and b are the same JSON value: objects with
// the same members in any order, numbers equal in value (1, 1.0 and 1e0
// are equal), white space ignored. Invalid JSON equals only itself.
func jsonEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	x, errA := decodeJSON(a)
	y, errB := decodeJSON(b)
	return errA == nil && errB == nil && equalValues(x, y)
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

func equalValues(x, y any) bool {
	switch x := x.(type) {
	case map[string]any:
		y, ok := y.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equalValues(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := y.([]any)
		return ok && slices.EqualFunc(x, y, equalValues)
	case json.Number:
		y, ok := y.(json.Number)
		return ok && canonNumber(string(x)) == canonNumber(string(y))
	default: // string, bool, nil
		return x == y
	}
}

// canonNumber rewrites a JSON number literal as sign, significant digits
// and exponent, so that equal values have equal forms ("0" for zero). A
// literal whose exponent does not fit in an int64 is kept as it is.
func canonNumber(s string) string {
	lit := s
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	mant, exp := s, int64(0)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.ParseInt(s[i+1:], 10, 64)
		if err != nil || e > 1<<62 || e < -(1<<62) {
			return lit
		}
		mant, exp = s[:i], e
	}
	intPart, frac := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= int64(len(frac))
	if digits == "" {
		return "0"
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	sign := ""
	if neg {
		sign = "-"
	}
	return sign + trimmed + "e" + strconv.FormatInt(exp, 10)
}
