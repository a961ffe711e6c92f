package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Func is an interceptor written in Go: a descriptor and a function.
type Func struct {
	Desc Descriptor
	Fn   func(ctx context.Context, inv *Invocation) (*Result, error)
}

// Describe returns f.Desc.
func (f *Func) Describe() Descriptor { return f.Desc }

// Invoke calls f.Fn.
func (f *Func) Invoke(ctx context.Context, inv *Invocation) (*Result, error) { return f.Fn(ctx, inv) }

// Pass is a validation result that lets the event through.
func Pass() *Result { return &Result{Type: Validation, Valid: true} }

// Deny is a validation result that refuses the event with one message of
// severity error.
func Deny(msg string) *Result {
	return &Result{Type: Validation, Valid: false, Severity: Error, Messages: []Message{{Message: msg, Severity: Error}}}
}

// Keep is a mutation result that leaves the payload as it is.
func Keep() *Result { return &Result{Type: Mutation} }

// Replace is a mutation result with a new payload.
func Replace(payload json.RawMessage) *Result {
	return &Result{Type: Mutation, Modified: true, Payload: payload}
}

// Registry hosts interceptors for interceptors/list and interceptor/invoke,
// in registration order.
type Registry struct {
	ics     []Interceptor
	descs   []Descriptor
	byName  map[string]int
	timeout time.Duration
}

// NewRegistry registers ics; names must be unique. timeout bounds an
// invocation that asks for no timeout (2 s when 0).
func NewRegistry(timeout time.Duration, ics ...Interceptor) (*Registry, error) {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	r := &Registry{byName: map[string]int{}, timeout: timeout}
	for _, ic := range ics {
		d := ic.Describe()
		if err := CheckName(d.Name); err != nil {
			return nil, err
		}
		if _, dup := r.byName[d.Name]; dup {
			return nil, fmt.Errorf("interceptor %q registered twice", d.Name)
		}
		r.byName[d.Name] = len(r.ics)
		r.ics = append(r.ics, ic)
		r.descs = append(r.descs, d)
	}
	return r, nil
}

// Interceptors returns the registered interceptors in order.
func (r *Registry) Interceptors() []Interceptor { return r.ics }

// ListResult is interceptors/list's result.
type ListResult struct {
	Interceptors []Descriptor `json:"interceptors"`
}

// List answers interceptors/list: every descriptor, or those hooking event
// (in either phase) when event is not empty.
func (r *Registry) List(event string) *ListResult {
	out := &ListResult{Interceptors: []Descriptor{}}
	for i := range r.descs {
		if event == "" || r.descs[i].HooksEvent(event) {
			out.Interceptors = append(out.Interceptors, r.descs[i])
		}
	}
	return out
}

// Invoke answers interceptor/invoke. An unknown name is a JSON-RPC invalid
// params error (-32602), a timeout -32000 and any other failure -32603,
// each an *RPCError naming the interceptor.
func (r *Registry) Invoke(ctx context.Context, inv *Invocation) (*Result, error) {
	i, ok := r.byName[inv.Name]
	if !ok {
		return nil, &RPCError{Code: CodeInvalidParams, Message: fmt.Sprintf("interceptor %q not found", inv.Name)}
	}
	if _, err := ParsePhase(string(inv.Phase)); err != nil {
		return nil, &RPCError{Code: CodeInvalidParams, Message: err.Error()}
	}
	d := r.descs[i]
	timeout := r.timeout
	if inv.TimeoutMs > 0 {
		timeout = time.Duration(inv.TimeoutMs) * time.Millisecond
	}
	res, ferr := Call(ctx, r.ics[i], inv, timeout)
	if ferr != nil {
		code := int64(CodeInternalError)
		if errors.Is(ferr, ErrTimeout) {
			code = CodeServerError
		}
		return nil, &RPCError{Code: code, Message: ferr.Error()}
	}
	res.Interceptor, res.Type, res.Phase = d.Name, d.Type, inv.Phase
	if d.Type == Mutation && !res.Modified {
		res.Payload = inv.Payload
	}
	return res, nil
}

// Bind returns ic under another descriptor: the name, hooks, mode and
// failOpen an operator (or a conformance fixture) gives it. Invocations
// reach ic under its own name. d.Type must be ic's type.
func Bind(ic Interceptor, d Descriptor) (Interceptor, error) {
	own := ic.Describe()
	if d.Type != own.Type {
		return nil, fmt.Errorf("binding %s interceptor %q as %q of type %s", own.Type, own.Name, d.Name, d.Type)
	}
	return &bound{ic: ic, desc: d, own: own.Name}, nil
}

type bound struct {
	ic   Interceptor
	desc Descriptor
	own  string
}

func (b *bound) Describe() Descriptor { return b.desc }

func (b *bound) Invoke(ctx context.Context, inv *Invocation) (*Result, error) {
	in := *inv
	in.Name = b.own
	return b.ic.Invoke(ctx, &in)
}
