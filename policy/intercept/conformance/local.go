package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

// Descriptor is the descriptor a fixture gives the interceptor: its
// name, type, hooks, mode and failOpen.
func (fi Interceptor) Descriptor() (intercept.Descriptor, error) {
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

// Local is a session over interceptors in this process: a registry
// answers list and invoke, a chain of them answers apply. Close runs the
// closers.
type Local struct {
	reg     *intercept.Registry
	chain   *intercept.Chain
	closers []func()
}

// NewLocal makes a session of ics, in order; closers are run by Close,
// or now when it fails.
func NewLocal(ics []intercept.Interceptor, closers []func(), log *slog.Logger) (*Local, error) {
	s := &Local{closers: closers}
	reg, err := intercept.NewRegistry(0, ics...)
	if err != nil {
		s.Close()
		return nil, err
	}
	var members []intercept.Member
	for _, ic := range reg.Interceptors() {
		members = append(members, intercept.Member{Interceptor: ic})
	}
	if s.chain, err = intercept.NewChain(intercept.Options{Logger: log}, members...); err != nil {
		s.Close()
		return nil, err
	}
	s.reg = reg
	return s, nil
}

// Close runs the closers, last first.
func (s *Local) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// List answers interceptors/list.
func (s *Local) List(_ context.Context, event string) (json.RawMessage, error) {
	return json.Marshal(s.reg.List(event))
}

// Invoke answers interceptor/invoke.
func (s *Local) Invoke(ctx context.Context, params json.RawMessage) (json.RawMessage, int64, error) {
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

// Apply runs one event through the chain.
func (s *Local) Apply(ctx context.Context, event, phase string, payload json.RawMessage, sid string) (bool, json.RawMessage, error) {
	return ApplyChain(ctx, s.chain, event, phase, payload, sid)
}

// ApplyChain runs one event through a chain: allow iff it completed.
func ApplyChain(ctx context.Context, c *intercept.Chain, event, phase string, payload json.RawMessage, sid string) (bool, json.RawMessage, error) {
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
