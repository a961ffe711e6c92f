package gateway

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

// This file is edge-mcp as an interceptor server (SEP-2624) on /mcp:
// interceptors/list and interceptor/invoke answer with the running chain's
// local members (the policy modules' interceptors, not those the gateway
// itself calls on other servers), behind /mcp's authentication; and the
// chain's part of the status document.

// localRegistry is a registry of the chain's module members, nil without a
// chain.
func (g *Gateway) localRegistry() (*intercept.Registry, error) {
	set := g.icept.Load()
	if set == nil {
		return nil, nil
	}
	var ics []intercept.Interceptor
	for _, d := range set.Chain().Descriptors() {
		if ic, src, ok := set.Lookup(d.Name); ok && strings.HasPrefix(src, "module ") {
			ics = append(ics, ic)
		}
	}
	return intercept.NewRegistry(0, ics...)
}

// interceptorMethod answers interceptors/list and interceptor/invoke.
func (s *session) interceptorMethod(req *jsonrpc.Request) {
	reg, err := s.g.localRegistry()
	if err != nil {
		s.replyError(req.ID, jsonrpc.CodeInternalError, "%s: %v", req.Method, err)
		return
	}
	if req.Method == intercept.MethodList {
		var p struct {
			Event string `json:"event"`
		}
		if len(req.Params) > 0 {
			if err := json.Unmarshal(req.Params, &p); err != nil {
				s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s params: %v", req.Method, err)
				return
			}
		}
		list := &intercept.ListResult{Interceptors: []intercept.Descriptor{}}
		if reg != nil {
			list = reg.List(p.Event)
		}
		b, err := json.Marshal(list)
		if err != nil {
			s.replyError(req.ID, jsonrpc.CodeInternalError, "%s: %v", req.Method, err)
			return
		}
		s.reply(req.ID, b)
		return
	}
	inv, err := intercept.ParseInvocation(req.Params)
	if err != nil {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%v", err)
		return
	}
	if reg == nil {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "unknown interceptor %q", inv.Name)
		return
	}
	res, err := reg.Invoke(s.ctx, inv)
	var rpc *intercept.RPCError
	switch {
	case errors.As(err, &rpc):
		s.replyError(req.ID, rpc.Code, "%s", rpc.Message)
		return
	case err != nil:
		s.replyError(req.ID, jsonrpc.CodeInternalError, "%v", err)
		return
	}
	b, err := json.Marshal(res)
	if err != nil {
		s.replyError(req.ID, jsonrpc.CodeInternalError, "%v", err)
		return
	}
	s.reply(req.ID, b)
}

// InterceptorStatus is the chain's part of the status document.
type InterceptorStatus struct {
	Servers      []InterceptorServerStatus `json:"servers,omitempty"`
	Interceptors []InterceptorCounts       `json:"interceptors"`
}

// InterceptorServerStatus is one interceptor server's state.
type InterceptorServerStatus struct {
	Name         string `json:"name"`
	State        string `json:"state"` // reached or unreached
	Interceptors int    `json:"interceptors"`
	LastError    string `json:"last_error,omitempty"`
}

// InterceptorCounts are one chain member's counts.
type InterceptorCounts struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Calls    int64  `json:"calls"`
	Denials  int64  `json:"denials"`
	Failures int64  `json:"failures"`
	Audits   int64  `json:"audits"`
}

// interceptorMetrics is what /metrics reports of the running chain.
func interceptorMetrics(st *InterceptorStatus) *metrics.InterceptorStats {
	if st == nil {
		return nil
	}
	out := &metrics.InterceptorStats{}
	for _, s := range st.Servers {
		out.Servers = append(out.Servers, metrics.InterceptorServer{Name: s.Name, Reached: s.State == "reached"})
	}
	for _, c := range st.Interceptors {
		out.Interceptors = append(out.Interceptors, metrics.InterceptorCounts{Name: c.Name, Calls: c.Calls, Denials: c.Denials, Failures: c.Failures, Audits: c.Audits})
	}
	return out
}

// InterceptorStatus reports the running chain; nil without one.
func (g *Gateway) InterceptorStatus() *InterceptorStatus {
	set := g.icept.Load()
	if set == nil {
		return nil
	}
	st := &InterceptorStatus{Interceptors: []InterceptorCounts{}}
	for _, sv := range set.Servers() {
		ss := InterceptorServerStatus{Name: sv.Name, State: "unreached", Interceptors: len(sv.Interceptors), LastError: sv.Err}
		if sv.Reached {
			ss.State = "reached"
		}
		st.Servers = append(st.Servers, ss)
	}
	ch := set.Chain()
	for _, d := range ch.Descriptors() {
		c := ch.Counters(d.Name)
		if c == nil {
			continue
		}
		st.Interceptors = append(st.Interceptors, InterceptorCounts{Name: d.Name, Type: string(d.Type),
			Calls: c.Calls.Load(), Denials: c.Denials.Load(), Failures: c.Failures.Load(), Audits: c.Audits.Load()})
	}
	return st
}
