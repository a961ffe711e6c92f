//go:build wasip1

package guest

import (
	"errors"
	"strconv"

	"github.com/edge-mcp/edge-mcp/guest/jsonlite"
)

// InterceptorInfo describes one SEP-2624 interceptor the module provides
// (ABI 1.1). The host lists it as is; an operator may override Mode,
// FailOpen and Priority.
type InterceptorInfo struct {
	Name        string
	Description string
	// Events are lifecycle events or patterns: "tools/call", "tools/*",
	// "*", "*/request", "*/response".
	Events []string
	// Phase is "request", "response" or "both" (the default).
	Phase string
	// Mode is "" (active) or "audit".
	Mode     string
	FailOpen bool
	// Priority orders mutators: lower runs first (0 by default).
	Priority int32
	// ConfigSchema is a JSON Schema object for the config, or empty.
	ConfigSchema []byte
	// SessionState asks the host to keep this interceptor's state per
	// session ("sessionState": true): Invocation.State is what it last
	// returned in the session, and a Validation's or Mutation's State
	// replaces it. State kept there survives instance recycling and, in
	// a fleet, follows the session to every replica; memory of the module
	// does neither.
	SessionState bool
}

// Invocation is one call of an interceptor. Its slices alias a buffer the
// SDK reuses: copy anything that must outlive the call.
type Invocation struct {
	Name  string // the interceptor's name
	Event string // e.g. "tools/call"
	Phase string // "request" or "response"
	// SessionID, Server and Principal come from the invocation context
	// (empty when the host does not know them).
	SessionID string
	Server    string
	Principal string
	Context   []byte // the raw context object, or nil
	Config    []byte // the raw config, or nil
	Payload   []byte // the raw payload JSON
	// State is the session state the host keeps for an interceptor with
	// SessionState (a JSON value, {} at first); nil when the host keeps
	// none (no store, or no session).
	State []byte
}

// Message is one validation message; Severity is "info", "warn" or "error".
type Message struct {
	Path, Message, Severity string
}

// Validation is a validator's answer.
type Validation struct {
	Valid    bool
	Severity string
	Messages []Message
	Info     []byte // a raw JSON object, or nil
	// State, when not nil, replaces the interceptor's session state (a
	// JSON value; SessionState interceptors).
	State []byte
}

// Pass lets the event through.
func Pass() Validation { return Validation{Valid: true} }

// Refuse refuses the event with one message of severity error.
func Refuse(msg string) Validation {
	return Validation{Severity: "error", Messages: []Message{{Message: msg, Severity: "error"}}}
}

// Mutation is a mutator's answer.
type Mutation struct {
	Modified bool
	Payload  []byte
	Info     []byte // a raw JSON object, or nil
	// State, when not nil, replaces the interceptor's session state.
	State []byte
}

// Keep leaves the payload unchanged.
func Keep() Mutation { return Mutation{} }

// Replace answers a new payload (valid JSON of the same kind).
func Replace(payload []byte) Mutation { return Mutation{Modified: true, Payload: payload} }

type interceptor struct {
	info     InterceptorInfo
	validate func(*Invocation) Validation
	mutate   func(*Invocation) Mutation
}

var interceptors []interceptor

// Validator registers a validator (from init).
func Validator(info InterceptorInfo, fn func(*Invocation) Validation) {
	interceptors = append(interceptors, interceptor{info: info, validate: fn})
}

// Mutator registers a mutator (from init).
func Mutator(info InterceptorInfo, fn func(*Invocation) Mutation) {
	interceptors = append(interceptors, interceptor{info: info, mutate: fn})
}

var invocationReq Invocation

//go:wasmexport edge_hook_interceptors
func edgeHookInterceptors(ptr, n uint32) uint64 {
	if _, ok := input(ptr, n); !ok {
		return badInput("interceptors", nil)
	}
	out := append(outBuf[:0], `{"interceptors":[`...)
	for i, ic := range interceptors {
		if i > 0 {
			out = append(out, ',')
		}
		out = ic.info.appendJSON(out, ic.validate != nil)
	}
	return finish(append(out, "]}"...))
}

func (info *InterceptorInfo) appendJSON(out []byte, validation bool) []byte {
	out = append(out, `{"name":`...)
	out = jsonlite.AppendString(out, info.Name)
	if info.Description != "" {
		out = append(out, `,"description":`...)
		out = jsonlite.AppendString(out, info.Description)
	}
	if validation {
		out = append(out, `,"type":"validation"`...)
	} else {
		out = append(out, `,"type":"mutation"`...)
	}
	phase := info.Phase
	if phase == "" {
		phase = "both"
	}
	out = append(out, `,"hooks":[{"events":[`...)
	for i, e := range info.Events {
		if i > 0 {
			out = append(out, ',')
		}
		out = jsonlite.AppendString(out, e)
	}
	out = append(out, `],"phase":`...)
	out = jsonlite.AppendString(out, phase)
	out = append(out, "}]"...)
	if info.Mode != "" {
		out = append(out, `,"mode":`...)
		out = jsonlite.AppendString(out, info.Mode)
	}
	if info.FailOpen {
		out = append(out, `,"failOpen":true`...)
	}
	if info.Priority != 0 {
		out = append(out, `,"priorityHint":`...)
		out = strconv.AppendInt(out, int64(info.Priority), 10)
	}
	if len(info.ConfigSchema) > 0 {
		out = append(out, `,"configSchema":`...)
		out = append(out, info.ConfigSchema...)
	}
	if info.SessionState {
		out = append(out, `,"sessionState":true`...)
	}
	return append(out, '}')
}

//go:wasmexport edge_hook_intercept
func edgeHookIntercept(ptr, n uint32) uint64 {
	in, ok := input(ptr, n)
	if !ok {
		return badInput("intercept", nil)
	}
	inv := &invocationReq
	*inv = Invocation{}
	if err := inv.parse(in); err != nil {
		return badInput("intercept", err)
	}
	for i := range interceptors {
		ic := &interceptors[i]
		if ic.info.Name != inv.Name {
			continue
		}
		if ic.validate != nil {
			return finish(ic.validate(inv).appendJSON(outBuf[:0]))
		}
		return finish(ic.mutate(inv).appendJSON(outBuf[:0]))
	}
	return fail("intercept: no interceptor named " + strconv.Quote(inv.Name))
}

var icName, icEvent, icPhase, icSession, icServer, icPrincipal strCache

// parse reads the intercept input; the payload, last, is not scanned.
func (inv *Invocation) parse(in []byte) error {
	err := envelope(in, "payload", func(k, v []byte) (err error) {
		switch string(k) {
		case "name":
			inv.Name, err = icName.get(v)
		case "event":
			inv.Event, err = icEvent.get(v)
		case "phase":
			inv.Phase, err = icPhase.get(v)
		case "config":
			inv.Config = v
		case "payload":
			inv.Payload = v
		case "context":
			inv.Context = v
			err = envelope(v, "", func(ck, cv []byte) (err error) {
				switch string(ck) {
				case "sessionId":
					inv.SessionID, err = icSession.get(cv)
				case "server":
					inv.Server, err = icServer.get(cv)
				case "principal":
					if id, ok := jsonlite.Lookup(cv, "id"); ok {
						inv.Principal, err = icPrincipal.get(id)
					}
				case "interceptorState":
					inv.State = cv
				}
				return err
			})
		}
		return err
	})
	if err != nil {
		return err
	}
	if inv.Name == "" || inv.Payload == nil {
		return errors.New("name and payload are required")
	}
	return nil
}

func (v Validation) appendJSON(out []byte) []byte {
	if v.Valid && len(v.Messages) == 0 && len(v.Info) == 0 && v.State == nil {
		return out // no output: valid
	}
	out = append(out, `{"valid":`...)
	out = strconv.AppendBool(out, v.Valid)
	if v.Severity != "" {
		out = append(out, `,"severity":`...)
		out = jsonlite.AppendString(out, v.Severity)
	}
	if len(v.Messages) > 0 {
		out = append(out, `,"messages":[`...)
		for i, m := range v.Messages {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, '{')
			if m.Path != "" {
				out = append(out, `"path":`...)
				out = jsonlite.AppendString(out, m.Path)
				out = append(out, ',')
			}
			out = append(out, `"message":`...)
			out = jsonlite.AppendString(out, m.Message)
			sev := m.Severity
			if sev == "" {
				sev = "error"
			}
			out = append(out, `,"severity":`...)
			out = jsonlite.AppendString(out, sev)
			out = append(out, '}')
		}
		out = append(out, ']')
	}
	return appendInfo(out, v.Info, v.State)
}

func (m Mutation) appendJSON(out []byte) []byte {
	if !m.Modified && len(m.Info) == 0 && m.State == nil {
		return out // no output: unmodified
	}
	out = append(out, `{"modified":`...)
	out = strconv.AppendBool(out, m.Modified)
	if m.Modified {
		out = append(out, `,"payload":`...)
		out = append(out, m.Payload...)
	}
	return appendInfo(out, m.Info, m.State)
}

// appendInfo ends a result with its info and its state update
// (contextUpdates.interceptorState), when set.
func appendInfo(out, info, state []byte) []byte {
	if len(info) > 0 {
		out = append(out, `,"info":`...)
		out = append(out, info...)
	}
	if state != nil {
		out = append(out, `,"contextUpdates":{"interceptorState":`...)
		out = append(out, state...)
		out = append(out, '}')
	}
	return append(out, '}')
}
