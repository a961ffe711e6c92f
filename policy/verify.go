package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edge-mcp/edge-mcp/policy/internal/jsonx"
)

// TestVector is one expected behaviour of a policy module: a hook input
// and what the host must make of the module's answer. Operators ship
// vectors with a module and Engine.Verify refuses a module that fails one.
type TestVector struct {
	Name string `json:"name"`
	// Hook is the hook's ABI name, e.g. "tool_call".
	Hook string `json:"hook"`
	// Input is the hook input as ABI.md defines it (what the host hands
	// the guest; EngineConfig.Recorder captures real ones). Members may
	// come in any order and with any white space: the host re-encodes the
	// input the way the gateway does before calling the guest.
	Input  json.RawMessage `json:"input"`
	Expect Expectation     `json:"expect"`
}

// Expectation is what a TestVector checks. Empty fields are not checked;
// an empty Expectation only checks that the hook succeeds.
type Expectation struct {
	// Action is the tool_call outcome: "allow" (a rewrite is an allow with
	// arguments), "deny" or "route".
	Action string `json:"action,omitempty"`
	// Reason must be a substring of the deny reason or, with Error, of
	// the error.
	Reason string `json:"reason,omitempty"`
	// Arguments must be JSON-equal to the arguments the call goes on with:
	// the rewritten ones, or the input's when the module changed nothing.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Server and Tool are the route target (Tool: the tool the routed call
	// goes to, the input's tool when the module did not change it).
	Server string `json:"server,omitempty"`
	Tool   string `json:"tool,omitempty"`
	// Result must be JSON-equal to the result the client gets from a
	// *_result hook (the input's when the module changed nothing).
	Result json.RawMessage `json:"result,omitempty"`
	// Tools lists the names the client sees after tools_list, in order:
	// hidden tools are gone, renamed ones carry their new name. An empty,
	// non-nil list expects every tool to be hidden.
	Tools []string `json:"tools,omitzero"`
	// Error expects the hook call to fail (trap, guest error report,
	// invalid output, ...).
	Error bool `json:"error,omitempty"`
}

// ParseTestVectors parses a JSON array of test vectors strictly: unknown
// fields, unknown hook names, inputs that are not valid for their hook and
// expectations that do not apply to the hook are errors, and vector names
// must be unique and non-empty.
func ParseTestVectors(data []byte) ([]TestVector, error) {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		return nil, errors.New("test vectors: want a JSON array")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var vs []TestVector
	if err := dec.Decode(&vs); err != nil {
		return nil, fmt.Errorf("test vectors: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("test vectors: unexpected data after the array")
	}
	seen := make(map[string]bool, len(vs))
	for i := range vs {
		v := &vs[i]
		v.Input = nullAsAbsent(v.Input)
		v.Expect.Arguments = nullAsAbsent(v.Expect.Arguments)
		v.Expect.Result = nullAsAbsent(v.Expect.Result)
		if _, _, err := v.check(); err != nil {
			return nil, fmt.Errorf("test vector %d (%q): %w", i, v.Name, err)
		}
		if seen[v.Name] {
			return nil, fmt.Errorf("test vector %d: duplicate name %q", i, v.Name)
		}
		seen[v.Name] = true
	}
	if vs == nil {
		vs = []TestVector{}
	}
	return vs, nil
}

func nullAsAbsent(raw json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return nil
	}
	return raw
}

// check validates the vector and returns its hook and parsed input.
func (v *TestVector) check() (Hook, *hookInput, error) {
	if v.Name == "" {
		return 0, nil, errors.New("name is required")
	}
	hook, err := ParseHook(v.Hook)
	if err != nil {
		return 0, nil, err
	}
	if len(nullAsAbsent(v.Input)) == 0 {
		return 0, nil, errors.New("input is required")
	}
	in, err := parseHookInput(hook, v.Input)
	if err != nil {
		return 0, nil, fmt.Errorf("input: %w", err)
	}
	if err := v.Expect.check(hook); err != nil {
		return 0, nil, fmt.Errorf("expect: %w", err)
	}
	return hook, in, nil
}

// check validates an expectation for a vector of hook.
func (e *Expectation) check(hook Hook) error {
	if err := e.checkCall(hook); err != nil {
		return err
	}
	return e.checkValues(hook)
}

// checkCall checks the fields of a tool_call expectation and their
// combinations.
func (e *Expectation) checkCall(hook Hook) error {
	callOnly := e.Action != "" || e.Arguments != nil || e.Server != "" || e.Tool != "" || (e.Reason != "" && !e.Error)
	switch {
	case e.Error && (e.Action != "" || e.Arguments != nil || e.Server != "" || e.Tool != "" || e.Result != nil || e.Tools != nil):
		return errors.New("an error expectation takes only a reason")
	case hook != HookToolCall && callOnly:
		return errors.New("action, reason, arguments, server and tool apply to tool_call only")
	case e.Action != "" && e.Action != "allow" && e.Action != "deny" && e.Action != "route":
		return fmt.Errorf("action %q: want allow, deny or route", e.Action)
	case e.Reason != "" && !e.Error && e.Action != "" && e.Action != "deny":
		return errors.New("a reason needs action deny")
	case (e.Server != "" || e.Tool != "") && e.Action != "" && e.Action != "route":
		return errors.New("server and tool need action route")
	}
	return nil
}

// checkValues checks the JSON values an expectation compares and the
// hooks they apply to.
func (e *Expectation) checkValues(hook Hook) error {
	switch {
	case e.Arguments != nil && e.Action == "deny":
		return errors.New("a denied call has no arguments")
	case e.Arguments != nil && jsonx.Kind(e.Arguments) != '{':
		return errors.New("arguments must be a JSON object")
	case e.Result != nil && resultCheck(hook) == nil:
		return errors.New("result applies to tool_result, resource_result and prompt_result only")
	case e.Result != nil && jsonx.Kind(e.Result) != '{':
		return errors.New("result must be a JSON object")
	case e.Tools != nil && hook != HookToolsList:
		return errors.New("tools applies to tools_list only")
	}
	return nil
}

// Decide runs one hook call of the module on input, a hook input as ABI.md
// defines it, and returns what the host makes of the answer, validated as
// a Chain validates it, as JSON:
//
//   - tool_call: {"action":"allow|deny|route","reason":…,"server":…,
//     "tool":…,"arguments":…} (reason for deny, server and tool for route,
//     arguments when the module rewrote them, "require_approval":true when
//     asked);
//   - tool_result, resource_result, prompt_result: {"result":…}, the
//     result the client gets (the input's when the module changed nothing);
//   - tools_list: {"tools":[{"server":…,"name":…,"exposed":…},…]}, the
//     tools the client still sees, in order, with the name it sees them by;
//   - event: {}.
//
// The input is re-encoded the way the gateway encodes it (compact, members
// in ABI order) before the guest sees it. A failing call returns the
// *CallError a chain would act on. Decide does not count towards the
// module's Calls, Failures or health.
func (m *Module) Decide(ctx context.Context, hook Hook, input json.RawMessage) (json.RawMessage, error) {
	if hook >= numHooks || hook > HookEvent {
		return nil, fmt.Errorf("policy %q: unknown hook %v", m.name, hook)
	}
	in, err := parseHookInput(hook, input)
	if err != nil {
		return nil, fmt.Errorf("policy %q %s: invalid input: %w", m.name, hook, err)
	}
	v, err := m.decide(ctx, in)
	if err != nil {
		return nil, err
	}
	return v.appendJSON(nil), nil
}

func (m *Module) decide(ctx context.Context, in *hookInput) (verdict, error) {
	hook := in.base.hook
	if !m.hooks.Has(hook) {
		return verdict{}, fmt.Errorf("policy %q does not implement the %s hook (it implements %s)", m.name, hook, m.hooks)
	}
	out, err := m.doCall(ctx, hook, in.encoded)
	if err != nil {
		return verdict{}, err
	}
	v, err := decodeVerdict(out, &in.subject)
	if err != nil {
		return verdict{}, &CallError{Module: m.name, Hook: hook.String(), Kind: ErrBadOutput, Err: err}
	}
	return v, nil
}

// RunVectors runs every vector against the module and returns nil when all
// pass. Otherwise the error joins one error per failing vector, each
// wrapping ErrTestVector and naming the vector, what was expected and what
// the module did. A context that ends stops the run with its error.
func (m *Module) RunVectors(ctx context.Context, vs []TestVector) error {
	var errs []error
	for i := range vs {
		v := &vs[i]
		if ctx.Err() != nil {
			return fmt.Errorf("running test vectors of policy %q: %w", m.name, ctx.Err())
		}
		if err := m.runVector(ctx, v); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("running test vectors of policy %q: %w", m.name, ctx.Err())
			}
			errs = append(errs, fmt.Errorf("%w: %q (%s): %s", ErrTestVector, v.Name, v.Hook, err))
		}
	}
	return errors.Join(errs...)
}

func (m *Module) runVector(ctx context.Context, v *TestVector) error {
	_, in, err := v.check()
	if err != nil {
		return fmt.Errorf("invalid vector: %w", err)
	}
	got, err := m.decide(ctx, in)
	e := &v.Expect
	if e.Error {
		switch {
		case err == nil:
			return fmt.Errorf("expected the hook to fail, got %s", clip(got.appendJSON(nil)))
		case e.Reason != "" && !strings.Contains(err.Error(), e.Reason):
			return fmt.Errorf("expected an error containing %q, got %v", e.Reason, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("expected the hook to succeed, got %v", err)
	}
	var diffs []string
	if e.Action != "" && e.Action != got.action.String() {
		diffs = append(diffs, fmt.Sprintf("action: expected %q, got %q", e.Action, got.action))
	}
	if e.Reason != "" && (got.action != Deny || !strings.Contains(got.reason, e.Reason)) {
		diffs = append(diffs, fmt.Sprintf("reason: expected a deny reason containing %q, got %q", e.Reason, got.reason))
	}
	if e.Arguments != nil && !jsonEqual(e.Arguments, got.args) {
		diffs = append(diffs, fmt.Sprintf("arguments: expected %s, got %s", clip(e.Arguments), clip(got.args)))
	}
	if e.Server != "" && (got.action != Route || got.server != e.Server) {
		diffs = append(diffs, fmt.Sprintf("server: expected a route to %q, got %q", e.Server, got.server))
	}
	if e.Tool != "" && (got.action != Route || got.routeTool() != e.Tool) {
		diffs = append(diffs, fmt.Sprintf("tool: expected a route to tool %q, got %q", e.Tool, got.tool))
	}
	if e.Result != nil && !jsonEqual(e.Result, got.result) {
		diffs = append(diffs, fmt.Sprintf("result: expected %s, got %s", clip(e.Result), clip(got.result)))
	}
	if e.Tools != nil {
		names := make([]string, len(got.tools))
		for i, t := range got.tools {
			names[i] = t.exposed
		}
		if !slices.Equal(names, e.Tools) {
			diffs = append(diffs, fmt.Sprintf("tools: expected %q, got %q", e.Tools, names))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%s (decision %s)", strings.Join(diffs, "; "), clip(got.appendJSON(nil)))
	}
	return nil
}

// clip shortens JSON for messages.
func clip(b []byte) string {
	const max = 1024
	if len(b) == 0 {
		return "(none)"
	}
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// Verify loads a module (failing as Load does, with a *LoadError naming
// the stage) and runs its test vectors. A module that fails a vector is
// closed and the error is a *LoadError of kind ErrTestVector listing the
// failing vectors. On success it returns the loaded module, its instances
// warmed by the vectors, for the caller to swap in and eventually close.
func (e *Engine) Verify(ctx context.Context, name string, wasm []byte, opts ModuleOptions, vectors []TestVector) (*Module, error) {
	m, err := e.Load(ctx, name, wasm, opts)
	if err != nil {
		return nil, err
	}
	if err := m.RunVectors(ctx, vectors); err != nil {
		_ = m.Close()
		le := &LoadError{Module: name, Err: err}
		if errors.Is(err, ErrTestVector) {
			le.Kind = ErrTestVector
		}
		return nil, le
	}
	return m, nil
}

// subject is what a hook acts on, enough to turn a module's answer into a
// verdict: the outcome when the module changes nothing and, for
// tools_list, the catalogue and the entries the module governs.
type subject struct {
	base  verdict
	tools []ToolEntry
	idx   []int
}

// hookInput is a parsed hook input and its gateway encoding.
type hookInput struct {
	subject
	encoded []byte
}

// inputMembers lists, per hook, the members of its input (ABI.md) and
// whether each is required.
var inputMembers = [numHooks]map[string]bool{
	HookToolsList:      {"client": false, "tools": true},
	HookToolCall:       {"client": false, "server": true, "tool": true, "arguments": false},
	HookToolResult:     {"client": false, "server": true, "tool": true, "arguments": false, "result": true},
	HookResourceResult: {"client": false, "server": true, "uri": true, "result": true},
	HookPromptResult:   {"client": false, "server": true, "prompt": true, "arguments": false, "result": true},
	HookEvent: {"event": true, "client": false, "server": true, "tool": false, "duration_ms": false,
		"is_error": false, "error": false, "time_ms": false},
}

// objectMembers decodes a JSON object whose member names must be among
// allowed (exactly, case included) and checks the required ones are there.
func objectMembers(raw []byte, what string, allowed map[string]bool) (map[string]json.RawMessage, error) {
	var ms map[string]json.RawMessage
	if jsonx.Kind(raw) != '{' || json.Unmarshal(raw, &ms) != nil {
		return nil, fmt.Errorf("%s must be a JSON object", what)
	}
	for k := range ms {
		if _, ok := allowed[k]; !ok {
			names := make([]string, 0, len(allowed))
			for n := range allowed {
				names = append(names, n)
			}
			slices.Sort(names)
			return nil, fmt.Errorf("%s has unknown member %q (known: %s)", what, k, strings.Join(names, ", "))
		}
	}
	for k, req := range allowed {
		if _, ok := ms[k]; req && !ok {
			return nil, fmt.Errorf("%s lacks %q", what, k)
		}
	}
	return ms, nil
}

func stringMember(ms map[string]json.RawMessage, key string) (string, error) {
	raw, ok := ms[key]
	if !ok {
		return "", nil
	}
	var s string
	if jsonx.Kind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fmt.Errorf("%s must be a string", key)
	}
	return s, nil
}

// objectMember returns a member that must be a JSON object, compacted;
// nil when absent.
func objectMember(ms map[string]json.RawMessage, key string) (json.RawMessage, error) {
	raw, ok := ms[key]
	if !ok {
		return nil, nil
	}
	if jsonx.Kind(raw) != '{' {
		return nil, fmt.Errorf("%s must be a JSON object", key)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return b.Bytes(), nil
}

func clientMember(ms map[string]json.RawMessage) (Client, error) {
	raw, ok := ms["client"]
	if !ok {
		return Client{}, nil
	}
	cm, err := objectMembers(raw, "client", map[string]bool{"id": false, "name": false})
	if err != nil {
		return Client{}, err
	}
	var c Client
	if c.ID, err = stringMember(cm, "id"); err != nil {
		return c, fmt.Errorf("client.%w", err)
	}
	if c.Name, err = stringMember(cm, "name"); err != nil {
		return c, fmt.Errorf("client.%w", err)
	}
	return c, nil
}

// tail returns the last member's value of an encoded hook input, whose
// length is n: the bulky member the ABI puts last.
func tail(encoded []byte, n int) json.RawMessage {
	return encoded[len(encoded)-1-n : len(encoded)-1 : len(encoded)-1]
}

// parseHookInput checks a hook input against ABI.md and encodes it as the
// gateway would.
func parseHookInput(hook Hook, raw json.RawMessage) (*hookInput, error) {
	if hook >= numHooks || hook > HookEvent {
		return nil, fmt.Errorf("unknown hook %v", hook)
	}
	ms, err := objectMembers(raw, hook.String()+" input", inputMembers[hook])
	if err != nil {
		return nil, err
	}
	client, err := clientMember(ms)
	if err != nil {
		return nil, err
	}
	var str [5]string
	for i, k := range []string{"server", "tool", "uri", "prompt", "error"} {
		if str[i], err = stringMember(ms, k); err != nil {
			return nil, err
		}
	}
	server, tool, uri, prompt := str[0], str[1], str[2], str[3]
	args, err := objectMember(ms, "arguments")
	if err != nil {
		return nil, err
	}
	result, err := objectMember(ms, "result")
	if err != nil {
		return nil, err
	}
	in := &hookInput{subject: subject{base: verdict{hook: hook}}}
	switch hook {
	case HookToolCall:
		if tool == "" {
			return nil, errors.New("tool must not be empty")
		}
		args = orEmptyObject(args)
		in.encoded = encodeToolCall(nil, client, server, tool, args)
		in.base.args = tail(in.encoded, len(args))
		in.base.inTool = tool
	case HookToolResult:
		in.encoded = encodeToolResult(nil, &ResultInput{Client: client, Server: server, Tool: tool, Arguments: args}, result)
	case HookResourceResult:
		in.encoded = encodeResourceResult(nil, &ResourceInput{Client: client, Server: server, URI: uri}, result)
	case HookPromptResult:
		in.encoded = encodePromptResult(nil, &PromptInput{Client: client, Server: server, Prompt: prompt, Arguments: args}, result)
	case HookToolsList:
		if in.tools, err = parseTools(ms["tools"]); err != nil {
			return nil, err
		}
		in.idx = make([]int, len(in.tools))
		for i := range in.idx {
			in.idx[i] = i
		}
		in.encoded = encodeToolsList(nil, client, in.tools, in.idx)
		in.base.tools = shown(in.tools)
	case HookEvent:
		ev, err := parseEvent(ms, client, server, tool, str[4])
		if err != nil {
			return nil, err
		}
		in.encoded = encodeEvent(nil, &ev)
	}
	if result != nil {
		in.base.result = tail(in.encoded, len(result))
	}
	return in, nil
}

func parseTools(raw json.RawMessage) ([]ToolEntry, error) {
	if jsonx.Kind(raw) != '[' {
		return nil, errors.New("tools must be an array")
	}
	var tools []ToolEntry
	err := jsonx.Elements(raw, func(e []byte) error {
		tm, err := objectMembers(e, "tools item", map[string]bool{"server": true, "name": true, "tool": false})
		if err != nil {
			return err
		}
		var t ToolEntry
		if t.Server, err = stringMember(tm, "server"); err != nil {
			return fmt.Errorf("tools item %w", err)
		}
		if t.Name, err = stringMember(tm, "name"); err != nil {
			return fmt.Errorf("tools item %w", err)
		}
		if t.Name == "" {
			return errors.New("tools item with an empty name")
		}
		if t.Tool, err = objectMember(tm, "tool"); err != nil {
			return fmt.Errorf("tools item %w", err)
		}
		tools = append(tools, t)
		return nil
	})
	return tools, err
}

func parseEvent(ms map[string]json.RawMessage, client Client, server, tool, errMsg string) (Event, error) {
	ev := Event{Client: client, Server: server, Tool: tool, Error: errMsg}
	var err error
	if ev.Kind, err = stringMember(ms, "event"); err != nil {
		return ev, err
	}
	if ev.Kind == "" {
		return ev, errors.New("event must not be empty")
	}
	if raw, ok := ms["duration_ms"]; ok {
		var d float64
		if json.Unmarshal(raw, &d) != nil || d < 0 || d > float64(math.MaxInt64/int64(time.Millisecond)) {
			return ev, errors.New("duration_ms must be a non-negative number")
		}
		ev.Duration = time.Duration(math.Round(d * float64(time.Millisecond)))
	}
	if raw, ok := ms["is_error"]; ok {
		if json.Unmarshal(raw, &ev.IsError) != nil {
			return ev, errors.New("is_error must be a boolean")
		}
	}
	ev.Time = time.Now()
	if raw, ok := ms["time_ms"]; ok {
		n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
		if err != nil || n < 0 || n > 1<<53 {
			return ev, errors.New("time_ms must be a non-negative integer")
		}
		ev.Time = time.UnixMilli(n)
	}
	return ev, nil
}

// shownTool is a tool as the client sees it after tools_list.
type shownTool struct{ server, name, exposed string }

func shown(tools []ToolEntry) []shownTool {
	out := make([]shownTool, len(tools))
	for i, t := range tools {
		out[i] = shownTool{t.Server, t.Name, t.Name}
		if t.Exposed != "" {
			out[i].exposed = t.Exposed
		}
	}
	return out
}

// verdict is the host's reading of one hook's outcome for one input: what
// Decide reports and what shadow mode compares.
type verdict struct {
	hook Hook
	// tool_call
	action       Action
	reason       string
	server, tool string          // route target
	args         json.RawMessage // the arguments the call goes on with
	rewritten    bool            // args differ from the input's
	approval     bool
	inTool       string // the input's tool
	// tool_result, resource_result, prompt_result
	result   json.RawMessage
	withheld string // the reason a fail-closed failure withheld the result
	// tools_list
	tools []shownTool
}

// routeTool is the tool a routed call goes to.
func (v *verdict) routeTool() string {
	if v.tool == "" {
		return v.inTool
	}
	return v.tool
}

func (v *verdict) appendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	switch v.hook {
	case HookToolCall:
		dst = appendStringMember(dst, true, "action", v.action.String())
		switch v.action {
		case Deny:
			dst = appendStringMember(dst, false, "reason", v.reason)
		case Route:
			dst = appendStringMember(dst, false, "server", v.server)
			if v.tool != "" {
				dst = appendStringMember(dst, false, "tool", v.tool)
			}
		}
		if v.rewritten && v.action != Deny {
			dst = appendMember(dst, false, "arguments")
			dst = append(dst, v.args...)
		}
		if v.approval {
			dst = append(dst, `,"require_approval":true`...)
		}
	case HookToolResult, HookResourceResult, HookPromptResult:
		if v.withheld != "" {
			dst = appendStringMember(dst, true, "withheld", v.withheld)
		} else {
			dst = appendMember(dst, true, "result")
			dst = append(dst, v.result...)
		}
	case HookToolsList:
		dst = append(dst, `"tools":[`...)
		for i, t := range v.tools {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '{')
			dst = appendStringMember(dst, true, "server", t.server)
			dst = appendStringMember(dst, false, "name", t.name)
			dst = appendStringMember(dst, false, "exposed", t.exposed)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// resultCheck returns the shape check of a result hook's output; nil for
// the other hooks.
func resultCheck(hook Hook) func([]byte) error {
	switch hook {
	case HookToolResult:
		return checkToolResult
	case HookResourceResult:
		return checkResourceResult
	case HookPromptResult:
		return checkPromptResult
	}
	return nil
}

// decodeVerdict reads a module's validated output for sub as the chain
// does; an error is a shape error (ErrBadOutput).
func decodeVerdict(out []byte, sub *subject) (verdict, error) {
	v := sub.base
	switch v.hook {
	case HookToolCall:
		o, err := decodeDecision(out)
		if err != nil {
			return v, err
		}
		v.approval = o.requireApproval
		switch o.action {
		case actionDeny:
			v.action, v.reason = Deny, o.reason
		case actionRewrite:
			v.args, v.rewritten = o.arguments, true
		case actionRoute:
			v.action, v.server, v.tool = Route, o.server, o.tool
			if o.arguments != nil {
				v.args, v.rewritten = o.arguments, true
			}
		}
	case HookToolResult, HookResourceResult, HookPromptResult:
		r, err := decodeResult(out, resultCheck(v.hook))
		if err != nil {
			return v, err
		}
		if r != nil {
			v.result = r
		}
	case HookToolsList:
		patches, err := decodeToolsList(out)
		if err != nil {
			return v, err
		}
		st := newToolsState(sub.tools)
		st.apply(sub.idx, patches)
		v.tools = shown(st.visible())
	}
	return v, nil
}

// failVerdict is the outcome of a module failure under a's on_error.
func failVerdict(a *Attached, err error, sub *subject) verdict {
	v := sub.base
	if a.OnError == OnErrorAllow {
		return v
	}
	reason := failReason(a, err)
	switch v.hook {
	case HookToolCall:
		v.action, v.reason, v.rewritten = Deny, reason, false
	case HookToolResult:
		v.result = errorToolResult(reason)
	case HookResourceResult, HookPromptResult:
		v.result, v.withheld = nil, reason
	case HookToolsList:
		st := newToolsState(sub.tools)
		st.hide(sub.idx)
		v.tools = shown(st.visible())
	}
	return v
}
