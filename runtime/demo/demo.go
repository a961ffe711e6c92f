// Package demo is the built-in demo: two small in-process MCP servers
// (arithmetic and echo; text tools, a prompt and a resource) and the
// configuration edge-mcp starts with when it is given none.
package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/config"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/transports"
)

// Config is the configuration edge-mcp starts with when it is given none:
// two small in-process MCP servers, so a client that connects sees
// aggregated tools at once, and their transports, by server name. version
// is what the servers report.
func Config(listen, version string) (*config.Config, map[string]mcp.Transport) {
	cfg := &config.Config{
		Listen:       listen,
		MaxBodyBytes: 4 << 20,
		LogLevel:     "info",
		Servers: []config.Server{
			{Name: "demo-math", Type: "in-process", Description: "built-in demo: arithmetic and echo", Timeout: 60 * time.Second, Active: true},
			{Name: "demo-text", Type: "in-process", Description: "built-in demo: text tools", Prefix: "text", Timeout: 60 * time.Second, Active: true},
		},
	}
	return cfg, map[string]mcp.Transport{
		"demo-math": inProcess{MathServer(version)},
		"demo-text": inProcess{TextServer(version)},
	}
}

// inProcess connects to an mcp.Server in the same process, one fresh session
// per connection.
type inProcess struct{ server *mcp.Server }

func (t inProcess) Connect(ctx context.Context) (transports.Connection, error) {
	ct, st := mcp.NewInMemoryTransports()
	if _, err := t.server.Connect(context.Background(), st, nil); err != nil {
		return nil, fmt.Errorf("starting in-process server: %w", err)
	}
	return ct.Connect(ctx)
}

type echoArgs struct {
	Text string `json:"text" jsonschema:"the text to send back"`
}

type addArgs struct {
	A float64 `json:"a" jsonschema:"first addend"`
	B float64 `json:"b" jsonschema:"second addend"`
}

type sumResult struct {
	Sum float64 `json:"sum"`
}

// MathServer is the demo-math server: echo, add, time.
func MathServer(version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "demo-math", Version: version}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns its text argument unchanged."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two numbers."},
		func(ctx context.Context, req *mcp.CallToolRequest, in addArgs) (*mcp.CallToolResult, sumResult, error) {
			return nil, sumResult{in.A + in.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "time", Description: "Returns the gateway host's current time (RFC 3339)."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: time.Now().Format(time.RFC3339)}}}, nil, nil
		})
	return s
}

// TextServer is the demo-text server: upper, word_count, the prompt
// shout and the resource demo://readme.
func TextServer(version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "demo-text", Version: version}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "upper", Description: "Upper-cases its text argument."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(in.Text)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "word_count", Description: "Counts the words in its text argument."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(len(strings.Fields(in.Text)))}}}, nil, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "shout", Description: "Asks the model to shout a phrase.", Arguments: []*mcp.PromptArgument{{Name: "phrase", Required: true}}},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Shout this: " + req.Params.Arguments["phrase"]}}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "demo://readme", Name: "readme", MIMEType: "text/plain", Description: "What this demo is."},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "demo://readme", MIMEType: "text/plain",
				Text: "edge-mcp is running its built-in demo. Start it with --config to front real MCP servers."}}}, nil
		})
	return s
}
