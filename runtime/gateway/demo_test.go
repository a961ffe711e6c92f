package gateway

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/runtime/demo"
)

// newDemoMathServer is the demo-math server (package demo) as tests start it.
func newDemoMathServer() *mcp.Server { return demo.MathServer(Version) }

// echoArgs are the arguments of the demo's echo tool, for test servers.
type echoArgs struct {
	Text string `json:"text" jsonschema:"the text to send back"`
}
