package interceptchain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

// This file is the Set seen from outside: the gateway as an interceptor
// server (SEP-2624) answering interceptors/list and interceptor/invoke
// with the chain's local members (the policy modules' interceptors, not
// those it calls on other servers), and the chain's part of the status
// document and of /metrics. Every function here is safe for concurrent
// use and accepts a nil *Set (no chain in the running config).

// LocalRegistry is a registry of the chain's module members; nil for a
// nil Set. It is built per call and lives as long as the caller keeps it.
func (s *Set) LocalRegistry() (*intercept.Registry, error) {
	if s == nil {
		return nil, nil
	}
	var ics []intercept.Interceptor
	for _, d := range s.Chain().Descriptors() {
		if ic, src, ok := s.Lookup(d.Name); ok && strings.HasPrefix(src, "module ") {
			ics = append(ics, ic)
		}
	}
	return intercept.NewRegistry(0, ics...)
}

// Serve answers interceptors/list or interceptor/invoke (method) with
// the Set's local members: the result, or the JSON-RPC error to answer
// with. ctx bounds an invocation.
func (s *Set) Serve(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	fail := func(code int64, format string, args ...any) (json.RawMessage, *jsonrpc.Error) {
		return nil, &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}
	}
	reg, err := s.LocalRegistry()
	if err != nil {
		return fail(jsonrpc.CodeInternalError, "%s: %v", method, err)
	}
	var res any
	if method == intercept.MethodList {
		var p struct {
			Event string `json:"event"`
		}
		if len(params) > 0 {
			if err := json.Unmarshal(params, &p); err != nil {
				return fail(jsonrpc.CodeInvalidParams, "%s params: %v", method, err)
			}
		}
		res = &intercept.ListResult{Interceptors: []intercept.Descriptor{}}
		if reg != nil {
			res = reg.List(p.Event)
		}
	} else {
		inv, err := intercept.ParseInvocation(params)
		if err != nil {
			return fail(jsonrpc.CodeInvalidParams, "%v", err)
		}
		if reg == nil {
			return fail(jsonrpc.CodeInvalidParams, "unknown interceptor %q", inv.Name)
		}
		out, err := reg.Invoke(ctx, inv)
		var rpc *intercept.RPCError
		switch {
		case errors.As(err, &rpc):
			return fail(rpc.Code, "%s", rpc.Message)
		case err != nil:
			return fail(jsonrpc.CodeInternalError, "%v", err)
		}
		res = out
	}
	b, err := json.Marshal(res)
	if err != nil {
		return fail(jsonrpc.CodeInternalError, "%s: %v", method, err)
	}
	return b, nil
}

// Status is the chain's part of the status document.
type Status struct {
	Servers      []ServerState `json:"servers,omitempty"`
	Interceptors []Counts      `json:"interceptors"`
}

// ServerState is one interceptor server's state in Status.
type ServerState struct {
	Name         string `json:"name"`
	State        string `json:"state"` // reached or unreached
	Interceptors int    `json:"interceptors"`
	LastError    string `json:"last_error,omitempty"`
}

// Counts are one chain member's counts.
type Counts struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Calls    int64  `json:"calls"`
	Denials  int64  `json:"denials"`
	Failures int64  `json:"failures"`
	Audits   int64  `json:"audits"`
	// P50Micros is the median duration of its last (up to 256)
	// invocations, in microseconds (Counters.P50); 0 before the first.
	P50Micros int64 `json:"p50_us"`
}

// Status reports the running chain; nil for a nil Set.
func (s *Set) Status() *Status {
	if s == nil {
		return nil
	}
	st := &Status{Interceptors: []Counts{}}
	for _, sv := range s.Servers() {
		ss := ServerState{Name: sv.Name, State: "unreached", Interceptors: len(sv.Interceptors), LastError: sv.Err}
		if sv.Reached {
			ss.State = "reached"
		}
		st.Servers = append(st.Servers, ss)
	}
	ch := s.Chain()
	for _, d := range ch.Descriptors() {
		c := ch.Counters(d.Name)
		if c == nil {
			continue
		}
		st.Interceptors = append(st.Interceptors, Counts{Name: d.Name, Type: string(d.Type),
			Calls: c.Calls.Load(), Denials: c.Denials.Load(), Failures: c.Failures.Load(), Audits: c.Audits.Load(), P50Micros: c.P50().Microseconds()})
	}
	return st
}

// Metrics is what /metrics reports of st; nil for a nil st.
func Metrics(st *Status) *metrics.InterceptorStats {
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
