package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/edge-mcp/edge-mcp/guest/jsonscan"
	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

// MaxModuleInterceptors caps how many interceptors one module may declare.
const MaxModuleInterceptors = 256

// Interceptors returns the SEP-2624 interceptors the module declares
// through the ABI 1.1 hooks (edge_hook_interceptors lists them, each call
// goes to edge_hook_intercept), in declaration order. A module without
// those hooks (every ABI 1.0 module) declares none.
func (m *Module) Interceptors(ctx context.Context) ([]intercept.Interceptor, error) {
	if !m.hooks.Has(HookInterceptors) || !m.hooks.Has(HookIntercept) {
		return nil, nil
	}
	out, err := m.call(ctx, HookInterceptors, []byte("{}"))
	if err != nil {
		return nil, fmt.Errorf("listing the interceptors of policy %q: %w", m.name, err)
	}
	var list struct {
		Interceptors []json.RawMessage `json:"interceptors"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("policy %q interceptors: %w", m.name, err)
	}
	if len(list.Interceptors) > MaxModuleInterceptors {
		return nil, fmt.Errorf("policy %q declares %d interceptors, at most %d", m.name, len(list.Interceptors), MaxModuleInterceptors)
	}
	ics := make([]intercept.Interceptor, 0, len(list.Interceptors))
	seen := map[string]bool{}
	for _, raw := range list.Interceptors {
		d, err := intercept.ParseDescriptor(raw)
		if err != nil {
			return nil, fmt.Errorf("policy %q: %w", m.name, err)
		}
		if seen[d.Name] {
			return nil, fmt.Errorf("policy %q declares interceptor %q twice", m.name, d.Name)
		}
		seen[d.Name] = true
		ics = append(ics, &wasmInterceptor{m: m, desc: d})
	}
	return ics, nil
}

// wasmInterceptor is one interceptor of a module.
type wasmInterceptor struct {
	m    *Module
	desc intercept.Descriptor
}

func (w *wasmInterceptor) Describe() intercept.Descriptor { return w.desc }

// Invoke encodes the invocation (ABI.md, "intercept"), calls the guest and
// reads its answer: no output is a pass or an unchanged payload.
func (w *wasmInterceptor) Invoke(ctx context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
	buf := getBuf()
	defer putBuf(buf)
	in, err := appendInvocation((*buf)[:0], w.desc.Name, inv)
	if err != nil {
		return nil, &intercept.FailError{Interceptor: inv.Name, Kind: intercept.ErrFailed, Err: err}
	}
	*buf = in
	out, err := w.m.call(ctx, HookIntercept, in)
	if err != nil {
		kind := intercept.ErrFailed
		switch {
		case errors.Is(err, ErrTimeout):
			kind = intercept.ErrTimeout
		case errors.Is(err, ErrBadOutput), errors.Is(err, ErrOutputTooLarge):
			kind = intercept.ErrBadResult
		}
		return nil, &intercept.FailError{Interceptor: inv.Name, Kind: kind, Err: err}
	}
	if len(out) == 0 {
		if w.desc.Type == intercept.Mutation {
			return intercept.Keep(), nil
		}
		return intercept.Pass(), nil
	}
	res, err := intercept.ParseResult(out, w.desc.Type)
	if err != nil {
		return nil, &intercept.FailError{Interceptor: inv.Name, Kind: intercept.ErrBadResult, Err: err}
	}
	return res, nil
}

// appendInvocation encodes the intercept hook's input: compact, members in
// ABI order, the payload last. name is the guest's own name for the
// interceptor (an operator may have bound it under another).
func appendInvocation(dst []byte, name string, inv *intercept.Invocation) ([]byte, error) {
	dst = append(dst, `{"name":`...)
	dst = jsonscan.AppendString(dst, name)
	dst = append(dst, `,"event":`...)
	dst = jsonscan.AppendString(dst, inv.Event)
	dst = append(dst, `,"phase":`...)
	dst = jsonscan.AppendString(dst, string(inv.Phase))
	if inv.Context != nil {
		ctxJSON, err := json.Marshal(inv.Context)
		if err != nil {
			return dst, err
		}
		dst = append(append(dst, `,"context":`...), ctxJSON...)
	}
	if len(inv.Config) > 0 {
		dst = append(append(dst, `,"config":`...), inv.Config...)
	}
	payload := inv.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	dst = append(append(dst, `,"payload":`...), payload...)
	return append(dst, '}'), nil
}

// EnforcesDeadline reports that a module call stops at its deadline on its
// own (intercept.DeadlineEnforcer).
func (w *wasmInterceptor) EnforcesDeadline() bool { return true }
