package gateway

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/runtime/interceptchain"
)

// This file is edge-mcp as an interceptor server (SEP-2624) on /mcp,
// behind /mcp's authentication, and the chain's part of the status
// document; runtime/interceptchain (Set.Serve, Set.Status) does both.

// interceptorMethod answers interceptors/list and interceptor/invoke.
func (s *session) interceptorMethod(req *jsonrpc.Request) {
	res, rerr := s.g.icept.Load().Serve(s.ctx, req.Method, req.Params)
	if rerr != nil {
		s.replyError(req.ID, rerr.Code, "%s", rerr.Message)
		return
	}
	s.reply(req.ID, res)
}

// InterceptorStatus is the chain's part of the status document.
type InterceptorStatus = interceptchain.Status

// InterceptorStatus reports the running chain; nil without one.
func (g *Gateway) InterceptorStatus() *InterceptorStatus { return g.icept.Load().Status() }

// Interceptors is the admin API's listing of the running chain
// (GET /admin/interceptors); empty without one.
func (o adminOps) Interceptors() *interceptchain.Listing { return o.g.icept.Load().List() }

// SetInterceptorMode promotes or demotes a chain member until the next
// reload (POST /admin/interceptors/{name}/promote, .../demote).
func (o adminOps) SetInterceptorMode(_ context.Context, name, mode string) (string, error) {
	was, err := o.g.icept.Load().SetMode(name, intercept.Mode(mode))
	return string(was), err
}
