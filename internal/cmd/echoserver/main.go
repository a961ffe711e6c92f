// Command echoserver is a tiny MCP server (go-sdk) with one tool, echo,
// that returns its text argument. Tests and the soak task kill and restart
// it to see how edge-mcp heals: over streamable HTTP on -http ADDR, or over
// stdio with -stdio (its pid written to -pidfile, so a test can kill it).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("http", "", "serve streamable HTTP on this address (path /mcp)")
	stdio := flag.Bool("stdio", false, "serve one client on stdin/stdout")
	pidfile := flag.String("pidfile", "", "write the process id to this file once serving")
	flag.Parse()

	srv := mcp.NewServer(&mcp.Implementation{Name: "echoserver", Version: "1"}, nil)
	type args struct {
		Text string `json:"text" jsonschema:"the text to send back"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Returns its text argument unchanged."},
		func(_ context.Context, _ *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	if *pidfile != "" {
		if err := os.WriteFile(*pidfile, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			log.Fatalf("echoserver: writing the pid file: %v", err)
		}
	}
	switch {
	case *stdio:
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatalf("echoserver: %v", err)
		}
	case *addr != "":
		mux := http.NewServeMux()
		mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		log.Fatal(http.ListenAndServe(*addr, mux))
	default:
		fmt.Fprintln(os.Stderr, "usage: echoserver -http ADDR | -stdio [-pidfile FILE]")
		os.Exit(2)
	}
}
