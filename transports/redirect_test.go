package transports_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/transports"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStreamableClientFollowsRedirect: a server that redirects its endpoint
// (POST /mcp → 307 → /mcp/, as some frameworks do) is still reached.
func TestStreamableClientFollowsRedirect(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(&mcp.Implementation{Name: "r", Version: "1"}, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp/", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/mcp/", http.StatusTemporaryRedirect)
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := (&transports.StreamableClientTransport{URL: hs.URL + "/mcp"}).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	id, _ := jsonrpc.MakeID(float64(1))
	err = conn.Write(ctx, &jsonrpc.Request{ID: id, Method: "initialize", Params: json.RawMessage(
		`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := conn.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := msg.(*jsonrpc.Response); !ok || r.Error != nil || len(r.Result) == 0 {
		t.Fatalf("initialize through a redirect: %+v", msg)
	}
}
