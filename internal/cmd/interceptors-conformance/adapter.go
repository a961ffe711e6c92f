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

// descriptor turns a fixture interceptor into its descriptor.
func descriptor(fi fixtureInterceptor) (intercept.Descriptor, error) {
	mode, err := intercept.ParseMode(fi.Mode)
	if err != nil {
		return intercept.Descriptor{}, err
	}
	d := intercept.Descriptor{Name: fi.Name, Type: intercept.Type(fi.Type), Mode: mode, FailOpen: fi.FailOpen}
	switch fi.Phases {
	case "both":
		d.Hooks = []intercept.Hook{{Events: fi.Events, Phase: intercept.Request}, {Events: fi.Events, Phase: intercept.Response}}
	case "request", "response":
		d.Hooks = []intercept.Hook{{Events: fi.Events, Phase: intercept.Phase(fi.Phases)}}
	default:
		return d, fmt.Errorf("interceptor %q: phases %q", fi.Name, fi.Phases)
	}
	return d, nil
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
func (m *modules) bind(ctx context.Context, fi fixtureInterceptor, closers *[]func()) (intercept.Interceptor, error) {
	d, err := descriptor(fi)
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
func (m *modules) registry(ctx context.Context, fis []fixtureInterceptor) (*intercept.Registry, []func(), error) {
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

type localSession struct {
	reg     *intercept.Registry
	chain   *intercept.Chain
	closers []func()
}

func (l *local) newSession(ctx context.Context, fis []fixtureInterceptor) (session, error) {
	reg, closers, err := l.mods.registry(ctx, fis)
	if err != nil {
		return nil, err
	}
	var members []intercept.Member
	for _, ic := range reg.Interceptors() {
		members = append(members, intercept.Member{Interceptor: ic})
	}
	chain, err := intercept.NewChain(intercept.Options{Logger: l.log}, members...)
	if err != nil {
		closeAll(closers)
		return nil, err
	}
	return &localSession{reg: reg, chain: chain, closers: closers}, nil
}

func (s *localSession) close() { closeAll(s.closers) }

func (s *localSession) list(_ context.Context, event string) (json.RawMessage, error) {
	return json.Marshal(s.reg.List(event))
}

func (s *localSession) invoke(ctx context.Context, params json.RawMessage) (json.RawMessage, int64, error) {
	inv, err := intercept.ParseInvocation(params)
	if err != nil {
		return nil, intercept.CodeInvalidParams, nil
	}
	res, err := s.reg.Invoke(ctx, inv)
	var rpc *intercept.RPCError
	if errors.As(err, &rpc) {
		return nil, rpc.Code, nil
	}
	if err != nil {
		return nil, 0, err
	}
	b, err := json.Marshal(res)
	return b, 0, err
}

func (s *localSession) apply(ctx context.Context, event, phase string, payload json.RawMessage, sid string) (bool, json.RawMessage, error) {
	return applyChain(ctx, s.chain, event, phase, payload, sid)
}

// applyChain runs one event through a chain: allow iff it completed.
func applyChain(ctx context.Context, c *intercept.Chain, event, phase string, payload json.RawMessage, sid string) (bool, json.RawMessage, error) {
	ph, err := intercept.ParsePhase(phase)
	if err != nil {
		return false, nil, err
	}
	ev := intercept.Event{Event: event, Phase: ph, Payload: payload}
	if sid != "" {
		ev.Context = &intercept.Context{SessionID: sid}
	}
	out, err := c.Run(ctx, ev)
	var refusal *intercept.Refusal
	if errors.As(err, &refusal) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, err
	}
	return true, out.Payload, nil
}
