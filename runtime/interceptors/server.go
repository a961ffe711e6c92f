package interceptors

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
)

// Register adds interceptors/list and interceptor/invoke to a go-sdk
// server, answered by reg: an interceptor server.
func Register(s *mcp.Server, reg *intercept.Registry) error {
	err := mcp.AddReceivingCustomMethod(s, intercept.MethodList, func(_ context.Context, _ *mcp.ServerSession, p *rawParams) (*rawResult, error) {
		var params struct {
			Event string `json:"event"`
		}
		if len(p.raw) > 0 {
			if err := json.Unmarshal(p.raw, &params); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "interceptors/list params: " + err.Error()}
			}
		}
		b, err := json.Marshal(reg.List(params.Event))
		return &rawResult{raw: b}, err
	})
	if err != nil {
		return err
	}
	return mcp.AddReceivingCustomMethod(s, intercept.MethodInvoke, func(ctx context.Context, _ *mcp.ServerSession, p *rawParams) (*rawResult, error) {
		inv, err := intercept.ParseInvocation(p.raw)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
		res, err := reg.Invoke(ctx, inv)
		var rpc *intercept.RPCError
		if errors.As(err, &rpc) {
			return nil, &jsonrpc.Error{Code: rpc.Code, Message: rpc.Message}
		}
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(res)
		return &rawResult{raw: b}, err
	})
}
