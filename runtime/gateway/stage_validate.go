package gateway

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/internal/schema"
	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// validateArgs checks a call's arguments against the tool's inputSchema
// when the tool's rule asks for it.
func validateArgs(next Handler) Handler {
	return func(tc *toolCall) (json.RawMessage, *jsonrpc.Error) {
		if tc.ts.Validate {
			if err := validateArguments(tc.s.g, tc.it, tc.args); err != nil {
				return tc.refused(metrics.OutcomeInvalidArguments, fmt.Sprintf("edge-mcp: invalid arguments for tool %q: %v", tc.it.Exposed, err)), nil
			}
		}
		return next(tc)
	}
}

// validateArguments checks a call's arguments against the tool's
// inputSchema. A schema that does not compile is logged and lets the call
// through: a broken upstream schema must not brick its tool.
func validateArguments(g *Gateway, it *item, args json.RawMessage) error {
	sch, ok, _ := wire.Field(it.Raw, "inputSchema")
	if !ok {
		return nil
	}
	// A null optional argument is checked as absent (see
	// schema.WithoutOptionalNulls); the arguments go upstream unchanged.
	err := g.validator.Validate(sch, schema.WithoutOptionalNulls(sch, args))
	if errors.Is(err, schema.ErrBadSchema) {
		g.log.Debug("tool input schema does not compile; arguments not checked", "server", it.Up.name, "tool", it.Exposed, "err", err)
		return nil
	}
	return err
}
