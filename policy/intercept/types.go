package intercept

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// JSON-RPC method names of the interceptor protocol (SEP-2624).
const (
	MethodList   = "interceptors/list"
	MethodInvoke = "interceptor/invoke"
)

// Type is an interceptor's kind: a validator or a mutator.
type Type string

// The interceptor types, as the SEP spells them on the wire.
const (
	Validation Type = "validation"
	Mutation   Type = "mutation"
)

// Phase is the side of a lifecycle event: the request or the response.
type Phase string

// The phases of an invocation. A descriptor's "both" is split into one
// hook per phase when it is parsed.
const (
	Request  Phase = "request"
	Response Phase = "response"
)

// ParsePhase parses an invocation phase ("request" or "response").
func ParsePhase(s string) (Phase, error) {
	switch Phase(s) {
	case Request, Response:
		return Phase(s), nil
	}
	return "", fmt.Errorf("phase %q: want request or response", s)
}

// Mode says whether an interceptor's verdicts and mutations take effect.
type Mode string

// The modes. Active is the default and is omitted on the wire; the SEP's
// original name for it, "enforce", is accepted when parsing.
const (
	Active Mode = "active"
	Audit  Mode = "audit"
)

// ParseMode parses a mode; "" and "enforce" mean Active.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "active", "enforce":
		return Active, nil
	case "audit":
		return Audit, nil
	}
	return "", fmt.Errorf("mode %q: want active, enforce or audit", s)
}

// Severity grades a validation message.
type Severity string

// The severities; only Error blocks.
const (
	Info  Severity = "info"
	Warn  Severity = "warn"
	Error Severity = "error"
)

func validSeverity(s Severity) bool { return s == Info || s == Warn || s == Error }

// Hook is one phase's list of lifecycle events an interceptor hooks.
type Hook struct {
	Events []string `json:"events"`
	Phase  Phase    `json:"phase"`
}

// Priority is a mutator's priorityHint: lower runs first; 0 by default.
type Priority struct {
	Request, Response int32
}

// For returns the priority for phase p.
func (p Priority) For(ph Phase) int32 {
	if ph == Response {
		return p.Response
	}
	return p.Request
}

// MarshalJSON writes a number when both phases agree, else an object.
func (p Priority) MarshalJSON() ([]byte, error) {
	if p.Request == p.Response {
		return json.Marshal(p.Request)
	}
	return json.Marshal(map[string]int32{"request": p.Request, "response": p.Response})
}

// UnmarshalJSON reads a number or {"request": n, "response": m}.
func (p *Priority) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var o map[string]json.RawMessage
		if err := json.Unmarshal(b, &o); err != nil {
			return fmt.Errorf("priorityHint: %w", err)
		}
		for k, v := range o {
			n, err := int32Of(v)
			if err != nil {
				return fmt.Errorf("priorityHint.%s: %w", k, err)
			}
			switch k {
			case "request":
				p.Request = n
			case "response":
				p.Response = n
			default:
				return fmt.Errorf("priorityHint: unknown member %q", k)
			}
		}
		return nil
	}
	n, err := int32Of(b)
	if err != nil {
		return fmt.Errorf("priorityHint: %w", err)
	}
	p.Request, p.Response = n, n
	return nil
}

func int32Of(b json.RawMessage) (int32, error) {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return 0, errors.New("want a number")
	}
	if f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return 0, fmt.Errorf("%v is not a 32-bit integer", f)
	}
	return int32(f), nil
}

// Descriptor describes an interceptor: what interceptors/list returns for
// it. Hooks always have a single phase each (a "both" hook is split).
type Descriptor struct {
	Name         string
	Version      string
	Description  string
	Type         Type
	Hooks        []Hook
	Mode         Mode // Active when empty
	FailOpen     bool
	PriorityHint Priority
	Compat       json.RawMessage // kept as received
	ConfigSchema json.RawMessage // kept as received
	// SessionState asks the host for per-session state (an edge-mcp
	// extension, "sessionState": true on the wire): each invocation's
	// context carries the interceptorState this interceptor last returned
	// in the session, and a result's contextUpdates.interceptorState
	// replaces it (see SessionStore).
	SessionState bool
}

// Limits on what a descriptor may hold, so a remote server cannot make the
// gateway hold or match against arbitrarily large lists.
const (
	MaxNameLen   = 256
	MaxEvents    = 64
	MaxEventLen  = 128
	maxHooks     = 2 * MaxEvents
	maxRawMember = 64 << 10
)

// wireDescriptor is the SEP wire shape, accepting both the list of hooks
// and the SEP text's single hook with phase "both".
type wireDescriptor struct {
	Name         string          `json:"name"`
	Version      string          `json:"version,omitempty"`
	Description  string          `json:"description,omitempty"`
	Type         Type            `json:"type"`
	Hooks        []wireHook      `json:"hooks,omitempty"`
	Hook         *wireHook       `json:"hook,omitempty"`
	Mode         string          `json:"mode,omitempty"`
	FailOpen     bool            `json:"failOpen,omitempty"`
	PriorityHint *Priority       `json:"priorityHint,omitempty"`
	Compat       json.RawMessage `json:"compat,omitempty"`
	ConfigSchema json.RawMessage `json:"configSchema,omitempty"`
	SessionState bool            `json:"sessionState,omitempty"`
}

type wireHook struct {
	Events []string `json:"events"`
	Phase  string   `json:"phase"`
}

// MarshalJSON writes the SEP wire shape with defaults omitted: mode when
// active, failOpen when false, priorityHint when 0.
func (d Descriptor) MarshalJSON() ([]byte, error) {
	w := wireDescriptor{
		Name: d.Name, Version: d.Version, Description: d.Description, Type: d.Type,
		FailOpen: d.FailOpen, Compat: d.Compat, ConfigSchema: d.ConfigSchema, SessionState: d.SessionState,
	}
	for _, h := range d.Hooks {
		w.Hooks = append(w.Hooks, wireHook{Events: h.Events, Phase: string(h.Phase)})
	}
	if d.Mode == Audit {
		w.Mode = string(Audit)
	}
	if d.PriorityHint != (Priority{}) {
		p := d.PriorityHint
		w.PriorityHint = &p
	}
	return json.Marshal(w)
}

// UnmarshalJSON parses and validates a descriptor (see ParseDescriptor).
func (d *Descriptor) UnmarshalJSON(b []byte) error {
	var w wireDescriptor
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("interceptor descriptor: %w", err)
	}
	out, err := w.descriptor()
	if err != nil {
		return err
	}
	*d = out
	return nil
}

// ParseDescriptor parses one descriptor in wire form and checks it: a
// name, a known type, at least one hook with one to MaxEvents events, each
// phase request, response or both, a known mode.
func ParseDescriptor(b []byte) (Descriptor, error) {
	var d Descriptor
	err := d.UnmarshalJSON(b)
	return d, err
}

func (w wireDescriptor) descriptor() (Descriptor, error) {
	bad := func(format string, args ...any) (Descriptor, error) {
		name := w.Name
		if len(name) > 64 {
			name = name[:64] + "…"
		}
		return Descriptor{}, fmt.Errorf("interceptor %q: "+format, append([]any{name}, args...)...)
	}
	if err := CheckName(w.Name); err != nil {
		return bad("%v", err)
	}
	if w.Type != Validation && w.Type != Mutation {
		return bad("type %q: want validation or mutation", w.Type)
	}
	mode, err := ParseMode(w.Mode)
	if err != nil {
		return bad("%v", err)
	}
	if len(w.Compat) > maxRawMember || len(w.ConfigSchema) > maxRawMember {
		return bad("compat or configSchema larger than %d bytes", maxRawMember)
	}
	hooks := w.Hooks
	if w.Hook != nil {
		hooks = append(hooks, *w.Hook)
	}
	if len(hooks) == 0 {
		return bad("no hooks")
	}
	if len(hooks) > maxHooks {
		return bad("%d hooks, at most %d", len(hooks), maxHooks)
	}
	d := Descriptor{
		Name: w.Name, Version: w.Version, Description: w.Description, Type: w.Type,
		Mode: mode, FailOpen: w.FailOpen, Compat: w.Compat, ConfigSchema: w.ConfigSchema, SessionState: w.SessionState,
	}
	if w.PriorityHint != nil {
		d.PriorityHint = *w.PriorityHint
	}
	for _, h := range hooks {
		if len(h.Events) == 0 || len(h.Events) > MaxEvents {
			return bad("a hook has %d events, want 1 to %d", len(h.Events), MaxEvents)
		}
		for _, e := range h.Events {
			if err := CheckEvent(e); err != nil {
				return bad("%v", err)
			}
		}
		switch h.Phase {
		case "request", "response":
			d.Hooks = append(d.Hooks, Hook{Events: h.Events, Phase: Phase(h.Phase)})
		case "both":
			d.Hooks = append(d.Hooks, Hook{Events: h.Events, Phase: Request}, Hook{Events: h.Events, Phase: Response})
		default:
			return bad("hook phase %q: want request, response or both", h.Phase)
		}
	}
	return d, nil
}

// CheckName checks an interceptor name: 1 to MaxNameLen bytes of printable
// UTF-8.
func CheckName(s string) error {
	if s == "" || len(s) > MaxNameLen || !utf8.ValidString(s) {
		return fmt.Errorf("name must be 1 to %d bytes of UTF-8", MaxNameLen)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return errors.New("name contains a control character")
		}
	}
	return nil
}

// CheckEvent checks an event name or pattern: 1 to MaxEventLen bytes of
// printable ASCII without spaces.
func CheckEvent(s string) error {
	if s == "" || len(s) > MaxEventLen {
		return fmt.Errorf("event %.64q: want 1 to %d characters", s, MaxEventLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("event %.64q: only printable ASCII without spaces", s)
		}
	}
	return nil
}

// Principal identifies who caused an event.
type Principal struct {
	Type   string          `json:"type"` // user, service or anonymous
	ID     string          `json:"id,omitempty"`
	Claims json.RawMessage `json:"claims,omitempty"`
}

// Context is an invocation's context: identity, tracing and session. Two
// members are edge-mcp extensions: Server names the upstream server the
// event goes to or comes from, Subject the tool, prompt or resource URI it
// is about (so that a response-phase interceptor knows which call it
// sees), when the gateway knows them.
type Context struct {
	Principal *Principal `json:"principal,omitempty"`
	TraceID   string     `json:"traceId,omitempty"`
	SpanID    string     `json:"spanId,omitempty"`
	Timestamp string     `json:"timestamp,omitempty"`
	SessionID string     `json:"sessionId,omitempty"`
	Server    string     `json:"server,omitempty"`
	Subject   string     `json:"subject,omitempty"`
	// Servers names the servers of the entries a member scoped to part
	// of a list's page sees (Server too when there is one).
	Servers []string `json:"servers,omitempty"`
	// InterceptorState is the SEP's reserved interceptorState: for an
	// interceptor whose descriptor asks for SessionState, what it last
	// returned in this session ({} at first), when the chain has a
	// SessionStore.
	InterceptorState json.RawMessage `json:"interceptorState,omitempty"`
}

// Invocation is the input of one interceptor call: interceptor/invoke's
// params.
type Invocation struct {
	Name      string          `json:"name"`
	Event     string          `json:"event"`
	Phase     Phase           `json:"phase"`
	Payload   json.RawMessage `json:"payload"`
	Config    json.RawMessage `json:"config,omitempty"`
	TimeoutMs int64           `json:"timeoutMs,omitempty"`
	Context   *Context        `json:"context,omitempty"`
}

// ParseInvocation parses and checks interceptor/invoke params.
func ParseInvocation(b []byte) (*Invocation, error) {
	var inv Invocation
	if err := json.Unmarshal(b, &inv); err != nil {
		return nil, fmt.Errorf("invoke params: %w", err)
	}
	if inv.Name == "" {
		return nil, errors.New("invoke params: name is required")
	}
	if err := CheckEvent(inv.Event); err != nil {
		return nil, fmt.Errorf("invoke params: %w", err)
	}
	if _, err := ParsePhase(string(inv.Phase)); err != nil {
		return nil, fmt.Errorf("invoke params: %w", err)
	}
	if len(inv.Payload) == 0 {
		inv.Payload = json.RawMessage("null")
	}
	return &inv, nil
}

// Message is one validation message.
type Message struct {
	Path     string   `json:"path,omitempty"`
	Message  string   `json:"message"`
	Severity Severity `json:"severity"`
}

// Result is an interceptor's answer: a validation result (Valid,
// Severity, Messages, Suggestions) or a mutation result (Modified,
// Payload), with the common members.
type Result struct {
	Interceptor string
	Type        Type
	Phase       Phase
	DurationMs  int64
	Info        json.RawMessage

	Valid       bool
	Severity    Severity
	Messages    []Message
	Suggestions json.RawMessage

	Modified bool
	Payload  json.RawMessage

	// State is the result's contextUpdates.interceptorState: the
	// interceptor's new session state (nil: unchanged).
	State json.RawMessage
}

// Blocks reports whether a validation result refuses the event: not valid,
// with severity error or none.
func (r *Result) Blocks() bool {
	return r.Type == Validation && !r.Valid && (r.Severity == Error || r.Severity == "")
}

// Reason is a one-line summary of a validation result's messages.
func (r *Result) Reason() string {
	var parts []string
	for _, m := range r.Messages {
		if m.Severity == Error || r.Valid == false && m.Severity == "" {
			parts = append(parts, m.Message)
		}
	}
	if len(parts) == 0 {
		for _, m := range r.Messages {
			parts = append(parts, m.Message)
		}
	}
	if len(parts) == 0 {
		return "validation failed"
	}
	return strings.Join(parts, "; ")
}

type wireValidation struct {
	Interceptor string          `json:"interceptor"`
	Type        Type            `json:"type"`
	Phase       Phase           `json:"phase"`
	Valid       bool            `json:"valid"`
	Severity    Severity        `json:"severity,omitempty"`
	Messages    []Message       `json:"messages,omitempty"`
	Suggestions json.RawMessage `json:"suggestions,omitempty"`
	DurationMs  int64           `json:"durationMs,omitempty"`
	Info        json.RawMessage `json:"info,omitempty"`
	Updates     *wireUpdates    `json:"contextUpdates,omitempty"`
}

// wireUpdates is the SEP's (future) contextUpdates of a result.
type wireUpdates struct {
	InterceptorState json.RawMessage `json:"interceptorState,omitempty"`
}

func updates(state json.RawMessage) *wireUpdates {
	if state == nil {
		return nil
	}
	return &wireUpdates{InterceptorState: state}
}

type wireMutation struct {
	Interceptor string          `json:"interceptor"`
	Type        Type            `json:"type"`
	Phase       Phase           `json:"phase"`
	Modified    bool            `json:"modified"`
	Payload     json.RawMessage `json:"payload"`
	DurationMs  int64           `json:"durationMs,omitempty"`
	Info        json.RawMessage `json:"info,omitempty"`
	Updates     *wireUpdates    `json:"contextUpdates,omitempty"`
}

// MarshalJSON writes the SEP's ValidationResult or MutationResult.
func (r *Result) MarshalJSON() ([]byte, error) {
	if r.Type == Mutation {
		p := r.Payload
		if len(p) == 0 {
			p = json.RawMessage("null")
		}
		return json.Marshal(wireMutation{r.Interceptor, r.Type, r.Phase, r.Modified, p, r.DurationMs, r.Info, updates(r.State)})
	}
	return json.Marshal(wireValidation{r.Interceptor, r.Type, r.Phase, r.Valid, r.Severity, r.Messages, r.Suggestions, r.DurationMs, r.Info, updates(r.State)})
}

// wireResult reads every member of both result shapes, plus the nested
// "validation"/"mutation" objects of the reference Go SDK's InvokeResult.
type wireResult struct {
	Interceptor string          `json:"interceptor"`
	Type        Type            `json:"type"`
	Phase       Phase           `json:"phase"`
	DurationMs  float64         `json:"durationMs"`
	Info        json.RawMessage `json:"info"`
	Valid       *bool           `json:"valid"`
	Severity    Severity        `json:"severity"`
	Messages    []Message       `json:"messages"`
	Suggestions json.RawMessage `json:"suggestions"`
	Modified    *bool           `json:"modified"`
	Payload     json.RawMessage `json:"payload"`
	Validation  *wireResult     `json:"validation"`
	Mutation    *wireResult     `json:"mutation"`
	Updates     *wireUpdates    `json:"contextUpdates"`
}

// ParseResult parses an interceptor's answer and checks it is a result of
// type want: a validation result needs a boolean "valid" and well-formed
// messages and severities; a mutation result a boolean "modified" and,
// when modified, a "payload".
func ParseResult(b []byte, want Type) (*Result, error) {
	var w wireResult
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("result is not a JSON object of the right shape: %w", err)
	}
	if w.Type != "" && w.Type != want {
		return nil, fmt.Errorf("result has type %q, the interceptor is a %s interceptor", w.Type, want)
	}
	upd := w.Updates
	if nested := w.Validation; want == Validation && nested != nil && nested.Valid != nil {
		nested.Interceptor, nested.Phase = w.Interceptor, w.Phase
		w = *nested
	}
	if nested := w.Mutation; want == Mutation && nested != nil && nested.Modified != nil {
		if len(nested.Payload) == 0 {
			nested.Payload = w.Payload
		}
		nested.Interceptor, nested.Phase = w.Interceptor, w.Phase
		w = *nested
	}
	r := &Result{Interceptor: w.Interceptor, Type: want, Phase: w.Phase, DurationMs: int64(w.DurationMs), Info: w.Info}
	if w.Updates != nil {
		upd = w.Updates
	}
	if upd != nil && len(upd.InterceptorState) > 0 {
		r.State = upd.InterceptorState
	}
	switch want {
	case Validation:
		if w.Valid == nil {
			return nil, errors.New(`validation result without a boolean "valid"`)
		}
		if w.Severity != "" && !validSeverity(w.Severity) {
			return nil, fmt.Errorf("validation result severity %.32q: want info, warn or error", w.Severity)
		}
		for _, m := range w.Messages {
			if m.Severity != "" && !validSeverity(m.Severity) {
				return nil, fmt.Errorf("validation message severity %.32q: want info, warn or error", m.Severity)
			}
		}
		r.Valid, r.Severity, r.Messages, r.Suggestions = *w.Valid, w.Severity, w.Messages, w.Suggestions
	case Mutation:
		if w.Modified == nil {
			return nil, errors.New(`mutation result without a boolean "modified"`)
		}
		if *w.Modified && len(w.Payload) == 0 {
			return nil, errors.New("mutation result modified without a payload")
		}
		r.Modified, r.Payload = *w.Modified, w.Payload
	default:
		return nil, fmt.Errorf("unknown interceptor type %q", want)
	}
	return r, nil
}
