package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/interceptchain"
	"github.com/edge-mcp/edge-mcp/runtime/policyset"
)

// The SEP-2624 interceptor chain (docs/interceptors.md). A config with
// interceptors or interceptorServers gets one interceptchain.Set per
// config generation; without them g.icept is nil and no call meets the
// chain (one atomic load). With a chain, the policies of the config run as
// its members, not through the ABI 1.0 call and result hooks.

// interceptState is the interceptor chain set of the running config
// (nil without one), swapped whole by a reload.
type interceptState struct {
	atomic.Pointer[interceptchain.Set]
}

// chain returns the chain of the running config, or nil.
func (st *interceptState) chain() *intercept.Chain {
	if set := st.Load(); set != nil {
		return set.Chain()
	}
	return nil
}

// wantsInterceptors reports whether cfg describes an interceptor chain.
func wantsInterceptors(cfg *config.Config) bool {
	return len(cfg.Interceptors) > 0 || len(cfg.InterceptorServers) > 0
}

// newInterceptSet builds and starts the chain of cfg, its module entries
// taking the interceptors of pg's loaded modules; nil when cfg has none.
func (g *Gateway) newInterceptSet(ctx context.Context, cfg *config.Config, pg *policyset.Gen) (*interceptchain.Set, error) {
	if !wantsInterceptors(cfg) {
		return nil, nil
	}
	set, err := interceptchain.NewSet(cfg, interceptchain.Options{
		Logger: g.log,
		Modules: func(ctx context.Context, name string) ([]intercept.Interceptor, error) {
			return moduleInterceptors(ctx, pg, name)
		},
	})
	if err != nil {
		return nil, &config.Error{File: cfg.Path, Key: "interceptors", Reason: err.Error()}
	}
	if err := set.Start(ctx); err != nil {
		set.Close()
		return nil, &config.Error{File: cfg.Path, Key: "interceptors", Reason: err.Error()}
	}
	return set, nil
}

// moduleInterceptors returns the interceptors of the policy named name in
// pg.
func moduleInterceptors(ctx context.Context, pg *policyset.Gen, name string) ([]intercept.Interceptor, error) {
	if m := pg.Module(name); m != nil {
		return interceptchain.ModuleInterceptors(ctx, m)
	}
	return nil, fmt.Errorf("policy %q is not loaded", name)
}

// oldPolicyPath reports whether the ABI 1.0 call and result hooks run:
// not when the chain runs the config's policies.
func (st *interceptState) oldPolicyPath() bool { return st.Load() == nil }

// interceptContext is the SEP context of an event of the session's, about
// subject on server.
func (s *session) interceptContext(server, subject string) *intercept.Context {
	c := &intercept.Context{SessionID: s.conn.SessionID(), Server: server, Subject: subject}
	switch {
	case s.id.Name == "" || s.id.Method == "" || s.id.Method == "none":
		c.Principal = &intercept.Principal{Type: "anonymous"}
	default:
		c.Principal = &intercept.Principal{Type: "user", ID: s.id.Name}
		if len(s.id.Claims) > 0 {
			c.Principal.Claims, _ = json.Marshal(s.id.Claims)
		}
	}
	return c
}

// logOutcome logs what audit and fail-open interceptors did with an event
// that went on.
func logOutcome(log *slog.Logger, ev, server, subject string, out *intercept.Outcome) {
	for _, r := range out.Audits {
		log.Info("audit interceptor would have refused", "interceptor", r.Interceptor, "event", ev, "server", server, "subject", subject, "reason", r.Reason())
	}
	for _, sh := range out.Shadows {
		log.Info("audit interceptor would have changed the payload", "interceptor", sh.Interceptor, "event", ev, "server", server, "subject", subject)
	}
	for _, f := range out.Failures {
		log.Warn("interceptor failed (fail-open)", "interceptor", f.Interceptor, "event", ev, "server", server, "subject", subject, "err", f.Error())
	}
}

// interceptCall runs the request phase of tools/call: mutators may
// rewrite the params (the tool's name stays the one called), validators
// may refuse the call with a JSON-RPC error naming the interceptor.
func interceptCall(next Handler) Handler {
	return func(tc *toolCall) (json.RawMessage, *jsonrpc.Error) {
		s := tc.s
		ch := s.g.icept.chain()
		if ch == nil {
			return next(tc)
		}
		tc.ic = ch
		out, err := ch.Run(s.ctx, intercept.Event{Event: "tools/call", Phase: intercept.Request, Payload: tc.params,
			Context: s.interceptContext(tc.target.name, tc.it.exposed)})
		if err != nil {
			msg, refused := refusalMessage(err)
			s.g.log.Info("interceptor refused a call", "server", tc.target.name, "tool", tc.it.exposed, "reason", msg)
			if refused {
				return nil, tc.failed(metrics.OutcomeDenied, jsonrpc.CodeInvalidParams, msg)
			}
			return nil, tc.failed(metrics.OutcomeError, jsonrpc.CodeInternalError, msg)
		}
		logOutcome(s.g.log, "tools/call", tc.target.name, tc.it.exposed, out)
		if out.Modified {
			params, err := wire.SetField(out.Payload, "name", wire.AppendString(nil, tc.it.exposed))
			if err != nil {
				return nil, tc.failed(metrics.OutcomeError, jsonrpc.CodeInternalError, "edge-mcp: a mutated tools/call: "+err.Error())
			}
			tc.params = params
			tc.args, _, _ = wire.Field(params, "arguments")
		}
		return next(tc)
	}
}

// interceptForward runs the request phase of prompts/get or
// resources/read (off the read loop), then forwards the request: the
// member key of params (name or uri) keeps the value routed on, whatever
// a mutator did. A refusal is the client's JSON-RPC error.
func (s routing) interceptForward(sc callScope, req *jsonrpc.Request, u *upstream, params json.RawMessage, info forwardInfo, key, routed, subject string) {
	out, err := info.ic.Run(s.ctx, intercept.Event{Event: req.Method, Phase: intercept.Request, Payload: params,
		Context: s.interceptContext(u.name, subject)})
	if err == nil && out.Modified {
		params, err = wire.SetField(out.Payload, key, wire.AppendString(nil, routed))
	}
	if err != nil {
		sc.Release()
		msg, refused := refusalMessage(err)
		s.g.log.Info("interceptor refused a request", "method", req.Method, "server", u.name, "subject", subject, "reason", msg)
		code := int64(jsonrpc.CodeInternalError)
		if refused {
			code = jsonrpc.CodeInvalidParams
		}
		s.write(s.ctx, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: code, Message: msg}})
		return
	}
	logOutcome(s.g.log, req.Method, u.name, subject, out)
	if out.Modified && key == "name" {
		info.args, _, _ = wire.Field(params, "arguments")
	}
	s.forwardScoped(sc, req, u, params, info)
}

// interceptedRequest sends a server→client request (sampling,
// elicitation, roots) of upstream server to the session's client through
// the chain: the request phase on its params, the response phase on the
// client's result. A refusal is the upstream's JSON-RPC error.
func (s *session) interceptedRequest(ctx context.Context, server string, rel jsonrpc.ID, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	ch := s.g.icept.chain()
	if ch == nil {
		return s.request(ctx, rel, method, params)
	}
	ictx := s.interceptContext(server, "")
	out, err := ch.Run(ctx, intercept.Event{Event: method, Phase: intercept.Request, Payload: params, Context: ictx})
	if err != nil {
		msg, _ := refusalMessage(err)
		s.g.log.Info("interceptor refused a server request", "method", method, "server", server, "reason", msg)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
	}
	logOutcome(s.g.log, method, server, "", out)
	res, rerr := s.request(ctx, rel, method, out.Payload)
	if rerr != nil {
		return res, rerr
	}
	out, err = ch.Run(ctx, intercept.Event{Event: method, Phase: intercept.Response, Payload: res, Context: ictx})
	if err != nil {
		msg, _ := refusalMessage(err)
		s.g.log.Info("interceptor withheld a client's answer", "method", method, "server", server, "reason", msg)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
	}
	logOutcome(s.g.log, method, server, "", out)
	return out.Payload, nil
}

// refusalMessage is the client's message for a chain's error, and whether
// an interceptor refused the event (else the chain ended, its ctx done).
func refusalMessage(err error) (string, bool) {
	var ref *intercept.Refusal
	if errors.As(err, &ref) {
		return "edge-mcp: " + ref.Error(), true
	}
	return "edge-mcp: interceptor chain ended: " + err.Error(), false
}

// interceptResult runs the response phase of c's method on a result.
func (s *session) interceptResult(c *call, id jsonrpc.ID, result json.RawMessage) *jsonrpc.Response {
	if c.ic == nil {
		return &jsonrpc.Response{ID: id, Result: result}
	}
	ev, subject := c.method, c.upName
	if c.tool != "" {
		subject = c.tool
	}
	out, err := c.ic.Run(s.ctx, intercept.Event{Event: ev, Phase: intercept.Response, Payload: result,
		Context: s.interceptContext(c.server, subject)})
	if err != nil {
		msg, _ := refusalMessage(err)
		s.g.log.Info("interceptor withheld a result", "server", c.server, "subject", subject, "reason", msg)
		return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}}
	}
	logOutcome(s.g.log, ev, c.server, subject, out)
	return &jsonrpc.Response{ID: id, Result: out.Payload}
}
