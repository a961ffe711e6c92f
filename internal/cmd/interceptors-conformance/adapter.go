package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/policy/intercept/conformance"
)

// modules holds the shipped security modules' binaries and the engine that
// loads a fresh instance of them per session (fixtures never share state).
type modules struct {
	eng   *policy.Engine
	guard []byte // wasm-examples/cross-boundary-guard
	redac []byte // wasm-examples/secretless-redactor
}

// load loads one module with a single instance that is never recycled:
// the security interceptors keep per-session state in the instance.
func (m *modules) load(ctx context.Context, name string, wasm []byte) (*policy.Module, intercept.Interceptor, error) {
	mod, err := m.eng.Load(ctx, name, wasm, policy.ModuleOptions{PoolSize: 1, RecycleAfterCalls: -1})
	if err != nil {
		return nil, nil, fmt.Errorf("loading %s: %w", name, err)
	}
	ics, err := mod.Interceptors(ctx)
	if err != nil || len(ics) != 1 {
		_ = mod.Close()
		return nil, nil, fmt.Errorf("module %s: want one interceptor, got %d (%v)", name, len(ics), err)
	}
	return mod, ics[0], nil
}

func note(payload json.RawMessage) (string, bool) {
	var p struct {
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return "", false
	}
	var s string
	if json.Unmarshal(p.Arguments["note"], &s) != nil {
		return "", false
	}
	return s, true
}

func validatorFunc(d intercept.Descriptor, fn func(json.RawMessage) *intercept.Result) intercept.Interceptor {
	return &intercept.Func{Desc: d, Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
		return fn(inv.Payload), nil
	}}
}

// bind returns the interceptor for a fixture behavior (ADAPTER.md's
// table). The security behaviors are the shipped Wasm modules, bound to
// the fixture's name and hooks; closers collects what the session closes.
func (m *modules) bind(ctx context.Context, fi conformance.Interceptor, closers *[]func()) (intercept.Interceptor, error) {
	d, err := fi.Descriptor()
	if err != nil {
		return nil, err
	}
	switch fi.Behavior {
	case "allow-all":
		return validatorFunc(d, func(json.RawMessage) *intercept.Result { return intercept.Pass() }), nil
	case "deny-all":
		return validatorFunc(d, func(json.RawMessage) *intercept.Result { return intercept.Deny("denied by policy") }), nil
	case "require-note":
		return validatorFunc(d, func(p json.RawMessage) *intercept.Result {
			if n, ok := note(p); ok && n != "" {
				return intercept.Pass()
			}
			return intercept.Deny("note is required")
		}), nil
	case "require-uppercase-note":
		return validatorFunc(d, func(p json.RawMessage) *intercept.Result {
			if n, ok := note(p); ok && n == strings.ToUpper(n) {
				return intercept.Pass()
			}
			return intercept.Deny("note must be uppercase")
		}), nil
	case "uppercase-note":
		return &intercept.Func{Desc: d, Fn: func(_ context.Context, inv *intercept.Invocation) (*intercept.Result, error) {
			n, ok := note(inv.Payload)
			if !ok {
				return intercept.Keep(), nil
			}
			var p map[string]json.RawMessage
			var args map[string]json.RawMessage
			if err := json.Unmarshal(inv.Payload, &p); err != nil {
				return nil, err
			}
			if err := json.Unmarshal(p["arguments"], &args); err != nil {
				return nil, err
			}
			args["note"], _ = json.Marshal(strings.ToUpper(n))
			p["arguments"], _ = json.Marshal(args)
			out, err := json.Marshal(p)
			return intercept.Replace(out), err
		}}, nil
	case "crash":
		return &intercept.Func{Desc: d, Fn: func(context.Context, *intercept.Invocation) (*intercept.Result, error) {
			return nil, errors.New("interceptor crashed")
		}}, nil
	case "cross-boundary-guard", "secretless-redactor":
		wasm, name := m.guard, "cross-boundary-guard"
		if fi.Behavior == "secretless-redactor" {
			wasm, name = m.redac, "secretless-redactor"
		}
		mod, ic, err := m.load(ctx, name, wasm)
		if err != nil {
			return nil, err
		}
		*closers = append(*closers, func() { _ = mod.Close() })
		return intercept.Bind(ic, d)
	}
	return nil, fmt.Errorf("interceptor %q: unknown behavior %q", fi.Name, fi.Behavior)
}

// registry binds every fixture interceptor and registers them in order.
func (m *modules) registry(ctx context.Context, fis []conformance.Interceptor) (*intercept.Registry, []func(), error) {
	var closers []func()
	var ics []intercept.Interceptor
	for _, fi := range fis {
		ic, err := m.bind(ctx, fi, &closers)
		if err != nil {
			closeAll(closers)
			return nil, nil, err
		}
		ics = append(ics, ic)
	}
	reg, err := intercept.NewRegistry(0, ics...)
	if err != nil {
		closeAll(closers)
		return nil, nil, err
	}
	return reg, closers, nil
}

func closeAll(fns []func()) {
	for _, f := range fns {
		f()
	}
}

// local hosts the interceptors in process.
type local struct {
	mods *modules
	log  *slog.Logger
}

// NewSession binds the fixture's interceptors in process.
func (l *local) NewSession(ctx context.Context, fis []conformance.Interceptor) (conformance.Session, error) {
	reg, closers, err := l.mods.registry(ctx, fis)
	if err != nil {
		return nil, err
	}
	return conformance.NewLocal(reg.Interceptors(), closers, l.log)
}
