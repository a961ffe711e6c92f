package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
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
	// store keeps stateful interceptors' session state for every chain
	// generation: the fleet's (runtime/fleet) in a fleet, else this
	// process's; made with the first chain.
	store     intercept.SessionStore
	storeOnce sync.Once
}

// newInterceptSet builds and starts the chain of cfg, its module entries
// taking the interceptors of pg's loaded modules; nil when cfg has none.
// Interceptor servers whose config is unchanged keep the running chain's
// connections (a reload dials only the changed ones).
func (g *Gateway) newInterceptSet(ctx context.Context, cfg *config.Config, pg *policyset.Gen) (*interceptchain.Set, error) {
	g.icept.storeOnce.Do(func() {
		g.icept.store = &intercept.MemoryStore{}
		if g.fleet != nil {
			g.icept.store = g.fleet.InterceptorState()
		}
	})
	chain := intercept.Options{State: g.icept.store}
	if g.metrics != nil {
		chain.Observe = g.metrics.InterceptorCall // edge_mcp_interceptor_duration_seconds
	}
	return interceptchain.Open(ctx, cfg, interceptchain.Options{Logger: g.log, Previous: g.icept.Load(), HTTPClient: g.oauth.HTTPClient,
		Chain: chain,
		Modules: func(ctx context.Context, name string) ([]intercept.Interceptor, error) {
			if m := pg.Module(name); m != nil {
				return interceptchain.ModuleInterceptors(ctx, m)
			}
			return nil, fmt.Errorf("policy %q is not loaded", name)
		}})
}

// chain is the chain the session's events meet: without the members
// confined to other virtual servers (or, on /mcp, to any).
func (s *session) chain() *intercept.Chain { return s.g.icept.Load().Chain().For(s.vs) }

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

// interceptCall runs the request phase of tools/call: mutators may
// rewrite the params (the tool's name stays the one called), validators
// may refuse the call with a JSON-RPC error naming the interceptor. When
// the tool's arguments are validated (validate_arguments), so is each
// mutator's result: arguments that no longer fit the inputSchema are that
// mutator's failure (-32602 naming it, unless it is fail-open: then its
// change is dropped).
func interceptCall(next Handler) Handler {
	return func(tc *toolCall) (json.RawMessage, *jsonrpc.Error) {
		s := tc.s
		ch := s.chain()
		if ch == nil {
			return next(tc)
		}
		tc.ic = ch
		ev := intercept.Event{Event: "tools/call", Phase: intercept.Request, Payload: tc.params, Context: s.interceptContext(tc.target.name, tc.it.Exposed)}
		if tc.ts.Validate { // what a mutator makes of the arguments must still fit the tool
			ev.Check = func(p json.RawMessage) error {
				args, _, _ := wire.Field(p, "arguments")
				if err := validateArguments(s.g, tc.it, args); err != nil {
					return fmt.Errorf("invalid arguments for tool %q: %w", tc.it.Exposed, err)
				}
				return nil
			}
		}
		out, msg, refused := interceptchain.Run(s.ctx, s.g.log, ch, ev, tc.target.name, tc.it.Exposed, "interceptor refused a call")
		switch {
		case out == nil && refused:
			return nil, tc.failed(metrics.OutcomeDenied, jsonrpc.CodeInvalidParams, msg)
		case out == nil:
			return nil, tc.failed(metrics.OutcomeError, jsonrpc.CodeInternalError, msg)
		}
		if out.Modified {
			params, err := wire.SetField(out.Payload, "name", wire.AppendString(nil, tc.it.Exposed))
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
	out, msg, refused := interceptchain.Run(s.ctx, s.g.log, info.ic, intercept.Event{Event: req.Method, Phase: intercept.Request, Payload: params,
		Context: s.interceptContext(u.name, subject)}, u.name, subject, "interceptor refused a request")
	if out != nil && out.Modified {
		var err error
		if params, err = wire.SetField(out.Payload, key, wire.AppendString(nil, routed)); err != nil {
			out, msg = nil, "edge-mcp: interceptor chain ended: "+err.Error()
		}
	}
	if out == nil {
		sc.Release()
		code := int64(jsonrpc.CodeInternalError)
		if refused {
			code = jsonrpc.CodeInvalidParams
		}
		s.write(s.ctx, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: code, Message: msg}})
		return
	}
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
	ch := s.chain()
	if ch == nil {
		return s.request(ctx, rel, method, params)
	}
	ictx := s.interceptContext(server, "")
	out, msg, _ := interceptchain.Run(ctx, s.g.log, ch, intercept.Event{Event: method, Phase: intercept.Request, Payload: params, Context: ictx},
		server, "", "interceptor refused a server request")
	if out == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
	}
	res, rerr := s.request(ctx, rel, method, out.Payload)
	if rerr != nil {
		return res, rerr
	}
	out, msg, _ = interceptchain.Run(ctx, s.g.log, ch, intercept.Event{Event: method, Phase: intercept.Response, Payload: res, Context: ictx},
		server, "", "interceptor withheld a client's answer")
	if out == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
	}
	return out.Payload, nil
}

// interceptResult runs the response phase of c's method on a result; a
// withheld result comes with the call's outcome (denied when refused).
func (s *session) interceptResult(c *call, id jsonrpc.ID, result json.RawMessage) (*jsonrpc.Response, string) {
	if c.ic == nil {
		return &jsonrpc.Response{ID: id, Result: result}, ""
	}
	ev, subject := c.method, c.upName
	if c.tool != "" {
		subject = c.tool
	}
	out, msg, refused := interceptchain.Run(s.ctx, s.g.log, c.ic, intercept.Event{Event: ev, Phase: intercept.Response, Payload: result,
		Context: s.interceptContext(c.server, subject)}, c.server, subject, "interceptor withheld a result")
	if out == nil {
		outcome := metrics.OutcomeError
		if refused {
			outcome = metrics.OutcomeDenied
		}
		return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}}, outcome
	}
	return &jsonrpc.Response{ID: id, Result: out.Payload}, ""
}

// interceptList answers a list method through the chain: the request
// phase on its params (a mutated cursor is the one paged), the response
// phase on the page (a mutator may take entries out or change them; what
// it hides stays callable). The context names no server or subject; the
// page's entries name their servers, so that a member scoped with
// servers or tools sees, changes and refuses only the entries of its
// scope (intercept.Event.EntryServers).
func (s routing) interceptList(req *jsonrpc.Request, k listKind, ch *intercept.Chain) {
	res, f := interceptchain.Around(s.ctx, s.g.log, ch, req.Method, s.interceptContext("", ""), req.Params,
		func(p json.RawMessage) (json.RawMessage, []string, *interceptchain.Failure) {
			cat := s.catalogue()
			page, f := s.listPageOf(cat, req.Method, p, k)
			if f != nil {
				return nil, nil, f
			}
			return page, cat.Servers(k, page, upstreamName), nil
		})
	if f != nil {
		s.replyError(req.ID, f.Code, "%s", f.Message)
		return
	}
	s.reply(req.ID, res)
}

// interceptSubscribe runs the request phase of resources/subscribe (a
// refusal is the client's -32602 and no subscription is made; the URI
// subscribed to is the one routed on, whatever a mutator did), then
// subscribes; the answer passes the response phase: a forwarded
// subscription's (interceptResult), and the gateway's own {} when the
// upstream already sends updates for uri or the subscription is a
// 2026-07-28 listen (subscribed).
func (s routing) interceptSubscribe(req *jsonrpc.Request, u *upstream, uri string, ch *intercept.Chain) {
	ictx := s.interceptContext(u.name, uri)
	out, msg, refused := interceptchain.Run(s.ctx, s.g.log, ch, intercept.Event{Event: req.Method, Phase: intercept.Request, Payload: req.Params, Context: ictx},
		u.name, uri, "interceptor refused a subscription")
	if out == nil {
		code := int64(jsonrpc.CodeInternalError)
		if refused {
			code = jsonrpc.CodeInvalidParams
		}
		s.replyError(req.ID, code, "%s", msg)
		return
	}
	if out.Modified {
		params, err := wire.SetField(out.Payload, "uri", wire.AppendString(nil, uri))
		if err != nil {
			s.replyError(req.ID, jsonrpc.CodeInternalError, "edge-mcp: interceptor chain ended: %v", err)
			return
		}
		req = &jsonrpc.Request{ID: req.ID, Method: req.Method, Params: params, Extra: req.Extra}
	}
	s.subscribeTo(req, u, uri, ch)
}

// subscribed answers a resources/subscribe of uri on server the gateway
// answers itself ({}), through ic's response phase when ic is set: a
// refusal is the client's -32603 naming the interceptor, and undo takes
// the session's subscription back (it gets no updates for uri).
func (s routing) subscribed(req *jsonrpc.Request, server, uri string, ic *intercept.Chain, undo func()) {
	if ic == nil {
		s.reply(req.ID, json.RawMessage(`{}`))
		return
	}
	out, msg, _ := interceptchain.Run(s.ctx, s.g.log, ic, intercept.Event{Event: req.Method, Phase: intercept.Response, Payload: json.RawMessage(`{}`),
		Context: s.interceptContext(server, uri)}, server, uri, "interceptor withheld a result")
	if out == nil {
		undo()
		s.replyError(req.ID, jsonrpc.CodeInternalError, "%s", msg)
		return
	}
	s.reply(req.ID, out.Payload)
}
