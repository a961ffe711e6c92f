package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/edge-mcp/edge-mcp/policy/internal/jsonx"
	"github.com/edge-mcp/edge-mcp/policy/spec"
)

// OnError says what a chain does when a module fails (traps, times out,
// returns garbage, is unhealthy or busy).
type OnError uint8

const (
	// OnErrorDeny fails closed: a call is denied, a result replaced by an
	// error, tools hidden. It is the default.
	OnErrorDeny OnError = iota
	// OnErrorAllow fails open: the module is skipped as if it had made no
	// change.
	OnErrorAllow
)

// ParseOnError parses "deny" (or "") and "allow".
func ParseOnError(s string) (OnError, error) {
	switch s {
	case "", "deny":
		return OnErrorDeny, nil
	case "allow":
		return OnErrorAllow, nil
	}
	return OnErrorDeny, fmt.Errorf("on_error %q: want \"deny\" or \"allow\"", s)
}

func (o OnError) String() string {
	if o == OnErrorAllow {
		return "allow"
	}
	return "deny"
}

// Attachment attaches a loaded module to the tools and servers it governs.
type Attachment struct {
	// Name identifies the attachment in reasons and logs; it defaults to
	// the module's name.
	Name   string
	Module *Module
	// Tools and Servers are globs ('*' and '?'); empty matches everything.
	// Tools match tool names for the tool hooks, prompt names for
	// prompt_result and URIs for resource_result.
	Tools   []string
	Servers []string
	OnError OnError
	// Shadow runs the module without letting it change any outcome: it
	// sees the input the chain received, off the request path, and its
	// decision is compared with the enforced one (see package doc).
	Shadow bool
}

// Attached is an attachment as compiled into a Chain.
type Attached struct {
	Attachment
	tools, servers globSet
}

func (a *Attached) matches(server, name string) bool {
	return a.servers.match(server) && a.tools.match(name)
}

// Chain is the ordered list of attachments of one configuration. Hooks run
// through the modules that match, in order. A Chain is immutable and safe
// for concurrent use; build a new one to change the configuration.
type Chain struct {
	atts     []*Attached
	hooks    HookSet // union of the attached modules' hooks
	owned    []*Module
	shadowed bool // some attachment is a shadow
	shadows  gate // shadow runs in flight

	mu    sync.RWMutex
	cache map[matchKey][]*Attached
}

type matchKey struct{ server, name string }

// maxMatchCache bounds the memoised Match results.
const maxMatchCache = 8192

// NewChain builds a chain from attachments, in order. The chain does not
// own the modules: closing it leaves them open.
func NewChain(atts ...Attachment) (*Chain, error) {
	c := &Chain{cache: make(map[matchKey][]*Attached)}
	for i, a := range atts {
		if a.Module == nil {
			return nil, fmt.Errorf("policy attachment %d (%q): no module", i, a.Name)
		}
		if a.Name == "" {
			a.Name = a.Module.Name()
		}
		tools, err := newGlobSet("tools", a.Tools)
		if err != nil {
			return nil, fmt.Errorf("policy %q: %w", a.Name, err)
		}
		servers, err := newGlobSet("servers", a.Servers)
		if err != nil {
			return nil, fmt.Errorf("policy %q: %w", a.Name, err)
		}
		if a.OnError > OnErrorAllow {
			return nil, fmt.Errorf("policy %q: invalid on_error %d", a.Name, a.OnError)
		}
		c.atts = append(c.atts, &Attached{Attachment: a, tools: tools, servers: servers})
		c.hooks |= a.Module.Hooks()
		c.shadowed = c.shadowed || a.Shadow
	}
	return c, nil
}

// Close waits for the chain's shadow runs in flight, then closes the
// modules the chain owns (those loaded by LoadChain). Shadow runs are not
// started once Close has begun.
func (c *Chain) Close() error {
	if c == nil {
		return nil
	}
	c.shadows.close()
	var errs []error
	for _, m := range c.owned {
		if err := m.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Hooks returns the union of the hooks of the chain's modules, shadow ones
// included: a caller can skip a whole stage when the chain has no module
// for it.
func (c *Chain) Hooks() HookSet {
	if c == nil {
		return 0
	}
	return c.hooks
}

// Stats returns the stats of every attached module, in chain order.
func (c *Chain) Stats() []Stats {
	if c == nil {
		return nil
	}
	out := make([]Stats, len(c.atts))
	for i, a := range c.atts {
		out[i] = a.Module.Stats()
		out[i].Name = a.Name
		out[i].Shadow = a.Shadow
	}
	return out
}

// Match returns the attachments that apply to a tool (or prompt name or
// resource URI) of a server, in order. Results are memoised, so a tool
// without policy costs one map lookup. The slice must not be modified.
func (c *Chain) Match(server, name string) []*Attached {
	if c == nil || len(c.atts) == 0 {
		return nil
	}
	k := matchKey{server, name}
	c.mu.RLock()
	m, ok := c.cache[k]
	c.mu.RUnlock()
	if ok {
		return m
	}
	for _, a := range c.atts {
		if a.matches(server, name) {
			m = append(m, a)
		}
	}
	c.mu.Lock()
	if len(c.cache) < maxMatchCache {
		c.cache[k] = m
	}
	c.mu.Unlock()
	return m
}

func (c *Chain) matchServer(server string) []*Attached {
	var m []*Attached
	for _, a := range c.atts {
		if a.servers.match(server) {
			m = append(m, a)
		}
	}
	return m
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) <= 1<<20 {
		*b = (*b)[:0]
		bufPool.Put(b)
	}
}

// failReason is the client-visible reason for a fail-closed outcome. It
// names the kind of failure, not the guest's internals.
func failReason(a *Attached, err error) string {
	kind := "failed"
	for _, k := range []error{ErrTimeout, ErrMemoryLimit, ErrTrap, ErrBadOutput, ErrOutputTooLarge, ErrInputTooLarge, ErrGuest, ErrBusy, ErrUnhealthy, ErrClosed} {
		if errors.Is(err, k) {
			kind = k.Error()
			break
		}
	}
	return fmt.Sprintf("policy %q failed (%s)", a.Name, kind)
}

// outputFailure records a hook-specific decoding failure against the module.
func outputFailure(ctx context.Context, a *Attached, hook Hook, err error) error {
	ce := &CallError{Module: a.Module.name, Hook: hook.String(), Kind: ErrBadOutput, Err: err}
	a.Module.noteFailure(ctx, hook, ce)
	return ce
}

func canceled(ctx context.Context, err error) error {
	if errors.Is(err, ErrCanceled) || ctx.Err() != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("policy chain: %w", ctx.Err())
		}
		return fmt.Errorf("policy chain: %w", err)
	}
	return nil
}

// Action is the outcome of a tool_call chain.
type Action uint8

const (
	// Allow sends the call upstream (with Decision.Arguments when set).
	Allow Action = iota
	// Deny answers the call with an error carrying Decision.Reason.
	Deny
	// Route sends the call to Decision.Server (and Decision.Tool when set).
	Route
)

func (a Action) String() string {
	switch a {
	case Deny:
		return "deny"
	case Route:
		return "route"
	}
	return "allow"
}

// CallInput is the input of the tool_call chain.
type CallInput struct {
	Client Client
	Server string // upstream server
	Tool   string // upstream tool name
	// Arguments is the raw arguments object (nil means {}).
	Arguments json.RawMessage
}

// Decision is the outcome of the tool_call chain.
type Decision struct {
	Action Action
	// Reason is set for Deny.
	Reason string
	// Server and Tool are the route target for Route (Tool empty: same).
	Server, Tool string
	// Arguments is non-nil when a module rewrote the arguments.
	Arguments json.RawMessage
	// Module names the attachment that denied or routed.
	Module string
	// RequireApproval is set when a module asked for human approval.
	RequireApproval bool
}

// ToolCall runs the tool_call hook of every matching module in order.
// Rewrites compose (each module sees the previous one's arguments); the
// first deny or route ends the chain. A failing module follows its
// attachment's on_error. err is non-nil only when ctx ended. Matching
// shadow attachments then get the call as received, off the request path.
func (c *Chain) ToolCall(ctx context.Context, in CallInput) (Decision, error) {
	if !c.Hooks().Has(HookToolCall) {
		return Decision{Action: Allow}, nil
	}
	atts := c.Match(in.Server, in.Tool)
	if len(atts) == 0 {
		return Decision{Action: Allow}, nil
	}
	d, err := toolCall(ctx, in, atts)
	if c.shadowed && err == nil {
		c.shadowToolCall(ctx, in, atts, d)
	}
	return d, err
}

func toolCall(ctx context.Context, in CallInput, atts []*Attached) (Decision, error) {
	d := Decision{Action: Allow}
	args := orEmptyObject(in.Arguments)
	rewritten := false
	buf := getBuf()
	defer putBuf(buf)
	for _, a := range atts {
		if a.Shadow || !a.Module.hooks.Has(HookToolCall) {
			continue
		}
		*buf = encodeToolCall((*buf)[:0], in.Client, in.Server, in.Tool, args)
		out, err := a.Module.call(ctx, HookToolCall, *buf)
		var o callOutput
		if err == nil {
			if o, err = decodeDecision(out); err != nil {
				err = outputFailure(ctx, a, HookToolCall, err)
			}
		}
		if err != nil {
			if cerr := canceled(ctx, err); cerr != nil {
				return Decision{Action: Deny, Reason: "canceled", Module: a.Name}, cerr
			}
			if a.OnError == OnErrorAllow {
				continue
			}
			return Decision{Action: Deny, Reason: failReason(a, err), Module: a.Name}, nil
		}
		d.RequireApproval = d.RequireApproval || o.requireApproval
		switch o.action {
		case actionDeny:
			return Decision{Action: Deny, Reason: o.reason, Module: a.Name, RequireApproval: d.RequireApproval}, nil
		case actionRewrite:
			args, rewritten = o.arguments, true
		case actionRoute:
			d.Action, d.Server, d.Tool, d.Module = Route, o.server, o.tool, a.Name
			if o.arguments != nil {
				args, rewritten = o.arguments, true
			}
			if rewritten {
				d.Arguments = args
			}
			return d, nil
		}
	}
	if rewritten {
		d.Arguments = args
	}
	return d, nil
}

// ResultInput is the input of the tool_result chain.
type ResultInput struct {
	Client    Client
	Server    string
	Tool      string
	Arguments json.RawMessage // the call's arguments; optional
	Result    json.RawMessage // the CallToolResult object
}

// ToolResult runs the tool_result hook of every matching module in order,
// each seeing the previous one's output, and returns the final result
// (in.Result itself when nothing changed). A module failure with on_error
// "deny" replaces the result with an isError result naming the policy, so
// an unfiltered result never leaks. err is non-nil only when ctx ended.
func (c *Chain) ToolResult(ctx context.Context, in ResultInput) (json.RawMessage, error) {
	if !c.Hooks().Has(HookToolResult) {
		return in.Result, nil
	}
	atts := c.Match(in.Server, in.Tool)
	res, err := runResult(ctx, atts, HookToolResult, in.Result, checkToolResult,
		func(dst []byte, r json.RawMessage) []byte { return encodeToolResult(dst, &in, r) },
		func(a *Attached, err error) (json.RawMessage, error) {
			return errorToolResult(failReason(a, err)), nil
		})
	if c.shadowed {
		c.shadowResult(ctx, atts, HookToolResult, in.Result, res, err, in.Server, in.Tool,
			func(dst []byte, r json.RawMessage) []byte { return encodeToolResult(dst, &in, r) })
	}
	return res, err
}

func errorToolResult(reason string) json.RawMessage {
	b := []byte(`{"content":[{"type":"text","text":`)
	b = jsonx.AppendString(b, reason)
	return append(b, `}],"isError":true}`...)
}

// ResourceInput is the input of the resource_result chain.
type ResourceInput struct {
	Client Client
	Server string
	URI    string
	Result json.RawMessage // the ReadResourceResult object
}

// ResourceResult runs the resource_result hook of the modules matching the
// server and URI. A failure with on_error "deny" returns a *DeniedError.
func (c *Chain) ResourceResult(ctx context.Context, in ResourceInput) (json.RawMessage, error) {
	if !c.Hooks().Has(HookResourceResult) {
		return in.Result, nil
	}
	atts := c.Match(in.Server, in.URI)
	res, err := runResult(ctx, atts, HookResourceResult, in.Result, checkResourceResult,
		func(dst []byte, r json.RawMessage) []byte { return encodeResourceResult(dst, &in, r) },
		func(a *Attached, err error) (json.RawMessage, error) {
			return nil, &DeniedError{Module: a.Name, Reason: failReason(a, err)}
		})
	if c.shadowed {
		c.shadowResult(ctx, atts, HookResourceResult, in.Result, res, err, in.Server, in.URI,
			func(dst []byte, r json.RawMessage) []byte { return encodeResourceResult(dst, &in, r) })
	}
	return res, err
}

// PromptInput is the input of the prompt_result chain.
type PromptInput struct {
	Client    Client
	Server    string
	Prompt    string
	Arguments json.RawMessage // the prompts/get arguments; optional
	Result    json.RawMessage // the GetPromptResult object
}

// PromptResult runs the prompt_result hook of the modules matching the
// server and prompt name. A failure with on_error "deny" returns a
// *DeniedError.
func (c *Chain) PromptResult(ctx context.Context, in PromptInput) (json.RawMessage, error) {
	if !c.Hooks().Has(HookPromptResult) {
		return in.Result, nil
	}
	atts := c.Match(in.Server, in.Prompt)
	res, err := runResult(ctx, atts, HookPromptResult, in.Result, checkPromptResult,
		func(dst []byte, r json.RawMessage) []byte { return encodePromptResult(dst, &in, r) },
		func(a *Attached, err error) (json.RawMessage, error) {
			return nil, &DeniedError{Module: a.Name, Reason: failReason(a, err)}
		})
	if c.shadowed {
		c.shadowResult(ctx, atts, HookPromptResult, in.Result, res, err, in.Server, in.Prompt,
			func(dst []byte, r json.RawMessage) []byte { return encodePromptResult(dst, &in, r) })
	}
	return res, err
}

func runResult(ctx context.Context, atts []*Attached, hook Hook, result json.RawMessage, check func([]byte) error,
	encode func([]byte, json.RawMessage) []byte, deny func(*Attached, error) (json.RawMessage, error)) (json.RawMessage, error) {
	if len(atts) == 0 {
		return result, nil
	}
	buf := getBuf()
	defer putBuf(buf)
	for _, a := range atts {
		if a.Shadow || !a.Module.hooks.Has(hook) {
			continue
		}
		*buf = encode((*buf)[:0], result)
		out, err := a.Module.call(ctx, hook, *buf)
		var r json.RawMessage
		if err == nil {
			if r, err = decodeResult(out, check); err != nil {
				err = outputFailure(ctx, a, hook, err)
			}
		}
		if err != nil {
			if cerr := canceled(ctx, err); cerr != nil {
				return nil, cerr
			}
			if a.OnError == OnErrorAllow {
				continue
			}
			return deny(a, err)
		}
		if r != nil {
			result = r
		}
	}
	return result, nil
}

// ToolEntry is one tool of a catalogue as a client will see it.
type ToolEntry struct {
	Server string // upstream server
	Name   string // upstream tool name: globs match it, calls route by it
	// Tool is the tool definition object sent to the client.
	Tool json.RawMessage
	// Exposed is the name the client sees when a policy renamed the tool
	// (it is also the "name" inside Tool); empty when not renamed.
	Exposed string
}

// ToolsList filters a catalogue for one client: every module with a
// tools_list hook sees the (still visible) tools its attachment matches and
// may hide, rename, re-describe, retitle or annotate them. The input slice
// is not modified, and the tool definitions in it must not be modified
// afterwards (the output and shadow runs share them). A module failure with
// on_error "deny" hides the tools that module governs. err is non-nil only
// when ctx ended. Shadow attachments then see the catalogue as received,
// off the request path.
func (c *Chain) ToolsList(ctx context.Context, client Client, tools []ToolEntry) ([]ToolEntry, error) {
	if !c.Hooks().Has(HookToolsList) || len(tools) == 0 {
		return tools, nil
	}
	out, err := c.toolsList(ctx, client, tools)
	if c.shadowed && err == nil {
		c.shadowToolsList(ctx, client, tools, out)
	}
	return out, err
}

func (c *Chain) toolsList(ctx context.Context, client Client, tools []ToolEntry) ([]ToolEntry, error) {
	st := newToolsState(tools)
	buf := getBuf()
	defer putBuf(buf)
	var idx []int
	for _, a := range c.atts {
		if a.Shadow || !a.Module.hooks.Has(HookToolsList) {
			continue
		}
		idx = idx[:0]
		for i := range st.cur {
			if !st.hidden[i] && a.matches(st.cur[i].Server, st.cur[i].Name) {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		*buf = encodeToolsList((*buf)[:0], client, st.cur, idx)
		out, err := a.Module.call(ctx, HookToolsList, *buf)
		var patches []toolPatch
		if err == nil {
			if patches, err = decodeToolsList(out); err != nil {
				err = outputFailure(ctx, a, HookToolsList, err)
			}
		}
		if err != nil {
			if cerr := canceled(ctx, err); cerr != nil {
				return nil, cerr
			}
			if a.OnError == OnErrorAllow {
				continue
			}
			st.hide(idx)
			continue
		}
		st.apply(idx, patches)
	}
	return st.visible(), nil
}

// toolsState is a catalogue being edited by tools_list modules: cur aliases
// the caller's slice until the first edit copies it.
type toolsState struct {
	orig, cur []ToolEntry
	hidden    []bool
	copied    bool
}

func newToolsState(tools []ToolEntry) toolsState {
	return toolsState{orig: tools, cur: tools, hidden: make([]bool, len(tools))}
}

// hide hides the entries idx.
func (s *toolsState) hide(idx []int) {
	for _, i := range idx {
		s.hidden[i] = true
	}
}

// apply applies one module's patches to the entries idx it was shown.
func (s *toolsState) apply(idx []int, patches []toolPatch) {
	for pi := range patches {
		p := &patches[pi]
		i := findTool(s.cur, idx, p.server, p.name)
		if i < 0 {
			continue // the module may only touch what it was shown
		}
		if p.hide {
			s.hidden[i] = true
			continue
		}
		tool, err := applyPatch(s.cur[i].Tool, p)
		if err != nil {
			continue // upstream definition is not an object: leave it
		}
		if !s.copied {
			s.cur = append([]ToolEntry(nil), s.orig...)
			s.copied = true
		}
		s.cur[i].Tool = tool
		if p.rename != "" {
			s.cur[i].Exposed = p.rename
		}
	}
}

// visible returns the entries not hidden, in order.
func (s *toolsState) visible() []ToolEntry {
	out := make([]ToolEntry, 0, len(s.cur))
	for i := range s.cur {
		if !s.hidden[i] {
			out = append(out, s.cur[i])
		}
	}
	return out
}

func findTool(tools []ToolEntry, idx []int, server, name string) int {
	for _, i := range idx {
		if tools[i].Name == name && (server == "" || tools[i].Server == server) {
			return i
		}
	}
	return -1
}

// Event kinds.
const (
	EventServerConnected    = "server_connected"
	EventServerDisconnected = "server_disconnected"
	EventToolExecuted       = "tool_executed"
)

// Event is a gateway event delivered to the event hook.
type Event struct {
	Kind   string // one of the Event* constants
	Client Client // tool_executed only
	Server string
	Tool   string // tool_executed only
	// Duration, IsError and Error describe a tool_executed call; Error may
	// also carry a disconnect reason.
	Duration time.Duration
	IsError  bool
	Error    string
	Time     time.Time // zero means now
}

// Event delivers ev to every matching module with an event hook (matched by
// server, and by tool for tool_executed). Failures are logged and counted
// and also returned, joined, for callers that care. Shadow attachments get
// the event off the request path; their failures are only logged.
func (c *Chain) Event(ctx context.Context, ev Event) error {
	if !c.Hooks().Has(HookEvent) {
		return nil
	}
	var atts []*Attached
	if ev.Tool != "" {
		atts = c.Match(ev.Server, ev.Tool)
	} else {
		atts = c.matchServer(ev.Server)
	}
	if len(atts) == 0 {
		return nil
	}
	buf := getBuf()
	defer putBuf(buf)
	*buf = encodeEvent((*buf)[:0], &ev)
	var errs []error
	for _, a := range atts {
		if a.Shadow || !a.Module.hooks.Has(HookEvent) {
			continue
		}
		if _, err := a.Module.call(ctx, HookEvent, *buf); err != nil {
			errs = append(errs, err)
		}
	}
	if c.shadowed {
		c.shadowEvent(ctx, atts, *buf, ev.Server, ev.Tool)
	}
	return errors.Join(errs...)
}

// Spec is the configuration of one attachment as operators write it; see
// package policy/spec, a leaf the config loader uses without this package.
type Spec = spec.Spec

// Attachment modes of Spec.Mode.
const (
	ModeEnforce = spec.ModeEnforce
	ModeShadow  = spec.ModeShadow
)

// optionsOf returns the module options s describes, validated.
func optionsOf(s *Spec) (ModuleOptions, error) {
	o := ModuleOptions{
		Config:   s.Config,
		Timeout:  time.Duration(s.TimeoutMS) * time.Millisecond,
		MemoryMB: s.MemoryMB,
		PoolSize: s.PoolSize,
	}
	clock, err := s.Clock()
	if err != nil {
		return o, err
	}
	o.Grants.Clock = clock
	o.Grants.AllowedHosts = s.AllowedHosts
	_, err = o.withDefaults()
	return o, err
}

// LoadChain loads the module of every spec (concurrently; identical
// binaries compile once) and builds a chain that owns them: Chain.Close
// closes them. read loads a module file; nil means os.ReadFile.
func (e *Engine) LoadChain(ctx context.Context, specs []Spec, read func(path string) ([]byte, error)) (*Chain, error) {
	if read == nil {
		read = os.ReadFile
	}
	mods := make([]*Module, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i := range specs {
		s := &specs[i]
		if err := s.Validate(); err != nil {
			errs[i] = err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			wasm, err := read(s.Module)
			if err != nil {
				errs[i] = fmt.Errorf("policy %q: reading module: %w", s.Name, err)
				return
			}
			opts, _ := optionsOf(s)
			mods[i], errs[i] = e.Load(ctx, s.Name, wasm, opts)
		}()
	}
	wg.Wait()
	closeAll := func() {
		for _, m := range mods {
			if m != nil {
				_ = m.Close()
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		closeAll()
		return nil, err
	}
	atts := make([]Attachment, len(specs))
	for i, s := range specs {
		onErr, _ := ParseOnError(s.OnError)
		atts[i] = Attachment{Name: s.Name, Module: mods[i], Tools: s.Tools, Servers: s.Servers, OnError: onErr, Shadow: s.Mode == ModeShadow}
	}
	c, err := NewChain(atts...)
	if err != nil {
		closeAll()
		return nil, err
	}
	c.owned = mods
	return c, nil
}
