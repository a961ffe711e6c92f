package transports

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func newTestStatelessConn(req *jsonrpc.Request) *statelessConn {
	c := &statelessConn{req: req, ready: make(chan struct{}, 1)}
	c.init()
	return c
}

// TestStatelessConnRequest: the one request is handed out once, by Read or
// TakeRequest; then Read waits for the end; Close runs OnClose once.
func TestStatelessConnRequest(t *testing.T) {
	t.Parallel()
	id, _ := jsonrpc.MakeID(float64(1))
	req := &jsonrpc.Request{ID: id, Method: "tools/call"}
	for _, take := range []string{"Read", "TakeRequest"} {
		t.Run(take, func(t *testing.T) {
			c := newTestStatelessConn(req)
			var _ OneRequest = c
			closed := 0
			c.OnClose(func() { closed++ })
			if take == "Read" {
				msg, err := c.Read(context.Background())
				if err != nil || msg != req {
					t.Fatalf("Read = %v, %v; want the request", msg, err)
				}
			} else if got := c.TakeRequest(); got != req {
				t.Fatalf("TakeRequest = %v; want the request", got)
			}
			if got := c.TakeRequest(); got != nil {
				t.Fatalf("second TakeRequest = %v; want nil", got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			if _, err := c.Read(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Read after the request: %v; want it to wait", err)
			}
			c.Close()
			c.Close()
			if closed != 1 {
				t.Fatalf("OnClose ran %d times; want 1", closed)
			}
			if _, err := c.Read(context.Background()); err != io.EOF {
				t.Fatalf("Read after Close: %v; want io.EOF", err)
			}
			if err := c.Write(context.Background(), &jsonrpc.Response{ID: id}); !errors.Is(err, ErrClosed) {
				t.Fatalf("Write after Close: %v; want ErrClosed", err)
			}
		})
	}
}

// TestStatelessConnQueue: at most maxStreamQueue notifications wait for the
// POST's stream (more are dropped), the response always does, and they
// come out in order.
func TestStatelessConnQueue(t *testing.T) {
	t.Parallel()
	id, _ := jsonrpc.MakeID(float64(7))
	c := newTestStatelessConn(nil)
	for range maxStreamQueue + 10 {
		if err := c.Write(context.Background(), &jsonrpc.Request{Method: "notifications/progress"}); err != nil {
			t.Fatal(err)
		}
	}
	resp := &jsonrpc.Response{ID: id}
	if err := c.Write(context.Background(), resp); err != nil {
		t.Fatal(err)
	}
	var got []jsonrpc.Message
	for {
		msg, ok := c.next()
		if !ok {
			break
		}
		got = append(got, msg)
	}
	if len(got) != maxStreamQueue+1 || got[len(got)-1] != resp {
		t.Fatalf("%d messages queued, last %T; want %d notifications and the response last", len(got), got[len(got)-1], maxStreamQueue)
	}
}
