package transports_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/transports"
)

// budgetUpstream is an MCP server without sessions on a loopback listener:
// "big" calls get a result of size bytes and "small" ones a tiny result,
// as a JSON body with a Content-Length (path /length), a chunked JSON body
// (/chunked) or an event stream (/sse), written in 64 KiB pieces.
func budgetUpstream(t *testing.T, size int) string {
	t.Helper()
	blob := strings.Repeat("x", size)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		result := `"small"`
		if req.Method == "big" {
			result = `"` + blob + `"`
		}
		msg := `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"blob":` + result + `}}`
		switch r.URL.Path {
		case "/length":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(msg)))
		case "/chunked":
			w.Header().Set("Content-Type", "application/json")
		case "/sse":
			w.Header().Set("Content-Type", "text/event-stream")
			msg = "event: message\ndata: " + msg + "\n\n"
		}
		rc := http.NewResponseController(w)
		for len(msg) > 0 {
			n := min(len(msg), 64<<10)
			if _, err := w.Write([]byte(msg[:n])); err != nil {
				return
			}
			_ = rc.Flush()
			msg = msg[n:]
		}
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestStreamableClientBudget runs 8 concurrent 16 MiB answers through a
// 32 MiB budget, reading none of them until every call has been written:
// the answers that cannot get their bytes fail with the budget error, none
// hangs, the budget returns to zero and a small call then succeeds.
func TestStreamableClientBudget(t *testing.T) {
	const size = 16<<20 - 4<<10 // two fit in the budget with their envelopes
	url := budgetUpstream(t, size)
	for _, mode := range []string{"length", "chunked", "sse"} {
		t.Run(mode, func(t *testing.T) {
			budget := transports.NewByteBudget(32 << 20)
			conn, err := (&transports.StreamableClientTransport{URL: url + "/" + mode, Budget: budget}).Connect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					id, _ := jsonrpc.MakeID(float64(i + 1))
					if err := conn.Write(ctx, &jsonrpc.Request{ID: id, Method: "big", Params: json.RawMessage(`{}`)}); err != nil {
						t.Errorf("Write %d: %v", i+1, err)
					}
				})
			}
			wg.Wait()
			ok, over := 0, 0
			for range 8 {
				msg, err := conn.Read(ctx)
				if err != nil {
					t.Fatalf("Read: %v (ok %d, over budget %d)", err, ok, over)
				}
				resp := msg.(*jsonrpc.Response)
				switch {
				case resp.Error == nil && len(resp.Result) > size:
					ok++
				case resp.Error != nil && transports.IsLocal(resp) && strings.Contains(resp.Error.Error(), "in-flight budget of 33554432 bytes"):
					over++
				default:
					t.Fatalf("unexpected answer to %v: error %v, %d bytes of result", resp.ID.Raw(), resp.Error, len(resp.Result))
				}
			}
			t.Logf("%s: %d answered, %d over budget", mode, ok, over)
			if over == 0 {
				t.Fatal("8 answers of 16 MiB all fit in a budget of 32 MiB")
			}
			budgetSettles(t, budget, 2*size) // the last answer read (its charge counts the buffer it grew in)
			id, _ := jsonrpc.MakeID("small")
			if err := conn.Write(ctx, &jsonrpc.Request{ID: id, Method: "small", Params: json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
			msg, err := conn.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if resp := msg.(*jsonrpc.Response); resp.Error != nil {
				t.Fatalf("small call after the big ones: %v", resp.Error)
			}
			budgetSettles(t, budget, 1024) // the small answer read last
			conn.Close()
			budgetSettles(t, budget, 0)
		})
	}
}

// budgetSettles waits for the bytes of budget to return to zero.
// budgetSettles waits until at most held bytes of b are in use: the bytes
// of the message a connection's Read returned last stay charged until its
// next Read (or Close), so only that one may remain.
func budgetSettles(t *testing.T, b *transports.ByteBudget, held int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for b.InUse() > held {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of the budget still in use", b.InUse())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// budgetEcho answers "big" calls with a result of size bytes and other
// calls with a tiny one.
func budgetEcho(size int) func(transports.Connection) {
	blob := json.RawMessage(`{"blob":"` + strings.Repeat("x", size) + `"}`)
	return func(c transports.Connection) {
		go func() {
			defer c.Close()
			for {
				msg, err := c.Read(context.Background())
				if err != nil {
					return
				}
				req, ok := msg.(*jsonrpc.Request)
				if !ok || !req.IsCall() {
					continue
				}
				result := json.RawMessage(`{"blob":"small"}`)
				if req.Method == "big" {
					result = blob
				}
				if err := c.Write(context.Background(), &jsonrpc.Response{ID: req.ID, Result: result}); err != nil {
					return
				}
			}
		}()
	}
}

// budgetCall writes a call and reads its answer.
func budgetCall(t *testing.T, conn transports.Connection, id int64, method string) *jsonrpc.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.Write(ctx, &jsonrpc.Request{ID: mustID(float64(id)), Method: method, Params: json.RawMessage(`{}`)}); err != nil {
		t.Fatalf("Write %s: %v", method, err)
	}
	msg, err := conn.Read(ctx)
	if err != nil {
		t.Fatalf("Read the answer to %s: %v", method, err)
	}
	resp := msg.(*jsonrpc.Response)
	if resp.ID != mustID(float64(id)) {
		t.Fatalf("answer to %v, want %d", resp.ID.Raw(), id)
	}
	return resp
}

// budgetStreamCheck runs calls through conn while most of budget is held
// elsewhere: a big answer fails with the budget error (its bytes read on
// and dropped, not buffered), a small one succeeds; once the budget is
// free, a big answer succeeds; the budget returns to zero.
func budgetStreamCheck(t *testing.T, conn transports.Connection, budget *transports.ByteBudget, size int) {
	t.Helper()
	held := budget.Max() - int64(size)/2
	if !budget.TryAcquire(held) {
		t.Fatal("cannot hold the budget")
	}
	resp := budgetCall(t, conn, 1, "big")
	if resp.Error == nil || !transports.IsLocal(resp) || !strings.Contains(resp.Error.Error(), "in-flight budget") {
		t.Fatalf("big answer over the budget: error %v, %d bytes of result", resp.Error, len(resp.Result))
	}
	if resp := budgetCall(t, conn, 2, "small"); resp.Error != nil {
		t.Fatalf("small call with the budget nearly exhausted: %v", resp.Error)
	}
	budget.Release(held)
	if resp := budgetCall(t, conn, 3, "big"); resp.Error != nil || len(resp.Result) < size {
		t.Fatalf("big call within the budget: error %v, %d bytes of result", resp.Error, len(resp.Result))
	}
	budgetSettles(t, budget, int64(size)+1024) // the big answer read last
}

func TestWebSocketClientBudget(t *testing.T) {
	const size = 16 << 20
	srv := transports.NewWebSocketServer(budgetEcho(size), transports.WebSocketServerOptions{})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Close()
	budget := transports.NewByteBudget(32 << 20)
	conn, err := (&transports.WebSocketClientTransport{URL: hs.URL, Budget: budget, DisableCompression: true}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	budgetStreamCheck(t, conn, budget, size)
	conn.Close()
	budgetSettles(t, budget, 0)
}

func TestCommandClientBudget(t *testing.T) {
	budget := transports.NewByteBudget(32 << 20)
	tr := stdioHelper("budget", nil)
	tr.Budget = budget
	conn, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	budgetStreamCheck(t, conn, budget, 16<<20)
	conn.Close()
	budgetSettles(t, budget, 0)
}
