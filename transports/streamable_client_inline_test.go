package transports

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestWriteAndReadAnswer checks what WriteAndRead gives its answer
// function and what it leaves to Read: the response when it comes first
// (as a JSON body or first on its event stream), and nothing when other
// messages of the stream came before it, so that Read keeps their order.
func TestWriteAndReadAnswer(t *testing.T) {
	t.Parallel()
	const answer = `{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`
	const note = `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`
	for _, tt := range []struct {
		name       string
		body       func(w http.ResponseWriter)
		direct     bool   // the answer function gets the response
		readFirst  string // else: the method of what Read returns before it
		httpStatus int
	}{
		{name: "json body", direct: true, body: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, answer)
		}},
		{name: "first event", direct: true, body: func(w http.ResponseWriter) {
			scSSEHeaders(w)
			io.WriteString(w, "id: prime\ndata:\n\n") // a priming event carries no message
			io.WriteString(w, "data: "+answer+"\n\n")
		}},
		{name: "after a notification", readFirst: "notifications/message", body: func(w http.ResponseWriter) {
			scSSEHeaders(w)
			io.WriteString(w, "data: "+note+"\n\n")
			io.WriteString(w, "data: "+answer+"\n\n")
		}},
		{name: "http error", body: func(w http.ResponseWriter) {
			http.Error(w, "down", http.StatusBadGateway)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts, _ := scRawServer(t, func(w http.ResponseWriter, r *http.Request, msg jsonrpc.Message) {
				req, _ := msg.(*jsonrpc.Request)
				switch {
				case req == nil || !req.IsCall():
					w.WriteHeader(http.StatusAccepted)
				case req.Method == "initialize":
					w.Header().Set("Content-Type", "application/json")
					io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"`+scProtocolVersion+`","capabilities":{},"serverInfo":{"name":"raw","version":"1"}}}`)
				default:
					tt.body(w)
				}
			})
			conn := scConnect(t, ts.URL, nil)
			scHandshake(t, conn)
			var direct []*jsonrpc.Response
			err := conn.(StreamReader).WriteAndRead(context.Background(), scEchoCall(2, "x"), func(r *jsonrpc.Response) {
				direct = append(direct, r)
			})
			if err != nil {
				t.Fatal(err)
			}
			if tt.direct {
				if len(direct) != 1 || direct[0].ID != scID(2) || direct[0].Error != nil {
					t.Fatalf("answer function got %+v, want the response to 2", direct)
				}
			} else {
				if len(direct) != 0 {
					t.Fatalf("answer function got %+v, want nothing (Read delivers)", direct)
				}
				if tt.readFirst != "" {
					if req, ok := scRead(t, conn).(*jsonrpc.Request); !ok || req.Method != tt.readFirst {
						t.Fatalf("Read returned %+v first, want %s", req, tt.readFirst)
					}
				}
				scReadResponse(t, conn, 2)
			}
			// Exactly one answer: Read has nothing more.
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if msg, err := conn.Read(ctx); err == nil {
				t.Fatalf("Read returned %+v after the answer", msg)
			}
		})
	}
}

// countingConn counts the writes on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestPOSTIsOneWrite checks that a POST's headers and small body leave in
// one write: net/http flushes the headers on their own first unless it
// knows the body is in memory, which costs a syscall here and another read
// (and wake-up) on the server.
func TestPOSTIsOneWrite(t *testing.T) {
	t.Parallel()
	ts, _, _ := scNewServer(t, nil)
	var writes atomic.Int64
	var mu sync.Mutex
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, &writes}, nil
	}}
	t.Cleanup(tr.CloseIdleConnections)
	conn, err := (&StreamableClientTransport{URL: ts.URL, HTTPClient: &http.Client{Transport: tr}}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	scHandshake(t, conn)
	time.Sleep(50 * time.Millisecond) // the standalone GET, if any, is out
	for i := int64(2); i < 7; i++ {
		before := writes.Load()
		scWrite(t, conn, scEchoCall(i, "hello"))
		scReadResponse(t, conn, i)
		if n := writes.Load() - before; n != 1 {
			t.Fatalf("call %d took %d writes, want 1", i, n)
		}
	}
}
