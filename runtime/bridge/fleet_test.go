package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/internal/natstest"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/transports"
)

// echoGateway serves a handed-over request by answering it with the
// identity it came from.
type echoGateway struct{}

func (echoGateway) InputTimeout() time.Duration        { return 0 }
func (echoGateway) InputRounds() int                   { return 0 }
func (echoGateway) Capabilities(string) map[string]any { return nil }
func (echoGateway) ServerInfo() any                    { return nil }
func (echoGateway) Instructions() string               { return "" }
func (echoGateway) Hints() Hints                       { return Hints{} }
func (echoGateway) Fleet() Fleet                       { return nil }
func (echoGateway) RetryWait(string) time.Duration     { return time.Second }
func (echoGateway) PeerOf(id auth.Identity) any        { return id }
func (echoGateway) Log() *slog.Logger                  { return slog.New(slog.DiscardHandler) }
func (echoGateway) ServeOne(conn transports.OneRequest) {
	req := conn.TakeRequest()
	id := transports.Peer(conn).(auth.Identity)
	_ = conn.Write(context.Background(), &jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{"served_for":"` + id.Name + `"}`)})
}

func openNode(t *testing.T, url, replica string) *cluster.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := &config.Cluster{NatsURL: url, Name: "t", Secrets: []string{"0123456789abcdef0123456789abcdef"}, AllowAnonymousNATS: true}
	n, err := cluster.Open(ctx, cfg, replica, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	return n
}

// TestOverNATS: a retry handed to a replica over NATS is served there
// and its answer comes back; a replica that is not there is gone.
func TestOverNATS(t *testing.T) {
	s := natstest.Start(t)
	a, b := openNode(t, s.ClientURL(), "a"), openNode(t, s.ClientURL(), "b")
	br, err := New(echoGateway{}, "t", []string{"0123456789abcdef0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := br.ServeRetries(ctx, b); err != nil {
		t.Fatal(err)
	}
	f := OverNATS(a)
	if f.Replica() != "a" {
		t.Fatalf("Replica() = %q", f.Replica())
	}
	data, _ := json.Marshal(retry{Identity: "alice", Method: "apikey", TimeoutMs: 5000,
		Request: json.RawMessage(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`)})
	hctx, hcancel := context.WithTimeout(ctx, 10*time.Second)
	defer hcancel()
	var reply []byte
	for { // b's subscription reaches the server asynchronously
		if reply, err = f.HandOver(hctx, "b", data); !errors.Is(err, ErrReplicaGone) || hctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || !strings.Contains(string(reply), `"served_for":"alice"`) || !strings.Contains(string(reply), `"id":7`) {
		t.Fatalf("HandOver = %s, %v; want b's answer for alice", reply, err)
	}
	if _, err := f.HandOver(hctx, "nobody", data); !errors.Is(err, ErrReplicaGone) {
		t.Fatalf("HandOver to a replica that is not there: %v, want ErrReplicaGone", err)
	}
}
