package gateway

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// gatedUpstream is a go-sdk server whose tool "gate" reports progress
// (which turns the call's POST into an event stream) and answers once
// release is closed.
func gatedUpstream(t testing.TB, release <-chan struct{}) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "gated", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "gate"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		p := &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1, Total: 2}
		if err := req.Session.NotifyProgress(ctx, p); err != nil {
			return nil, nil, err
		}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
	})
	return serveMCP(t, s)
}

// cuttingFront is a front before the fleet's proxy that drops the
// connection of the first tools/call POST once its stream has started (as
// a balancer's idle timeout or a broken connection would), and records
// the Last-Event-ID of every GET.
type cuttingFront struct {
	next    http.Handler
	mu      sync.Mutex
	cut     bool
	gets    []string
	callAt  string // the backend of the cut call
	resumAt string // the backend of the GET that resumed a POST stream
}

func (c *cuttingFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		c.mu.Lock()
		c.gets = append(c.gets, r.Header.Get("Last-Event-ID"))
		c.mu.Unlock()
	}
	if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") != "" {
		var body bytes.Buffer
		_, _ = body.ReadFrom(r.Body)
		r.Body = http.NoBody
		if strings.Contains(body.String(), `"tools/call"`) {
			c.mu.Lock()
			first := !c.cut
			c.cut = true
			c.mu.Unlock()
			if first {
				w = &cutAfterFirstEvent{ResponseWriter: w}
			}
		}
		r.Body = readCloser{bytes.NewReader(body.Bytes())}
	}
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := w.(*cutAfterFirstEvent); ok {
			c.callAt = w.Header().Get("X-Edge-Backend")
		}
		if id := r.Header.Get("Last-Event-ID"); id != "" && !strings.Contains(id, "/0-") {
			c.resumAt = w.Header().Get("X-Edge-Backend")
		}
	}()
	c.next.ServeHTTP(w, r)
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// cutAfterFirstEvent passes the first SSE event (the priming event that
// makes the stream resumable) and then drops the connection.
type cutAfterFirstEvent struct {
	http.ResponseWriter
	seen []byte
}

func (w *cutAfterFirstEvent) Write(b []byte) (int, error) {
	w.seen = append(w.seen, b...)
	if i := bytes.Index(w.seen, []byte("\n\n")); i >= 0 {
		n := len(b) - (len(w.seen) - i - 2)
		if n > 0 {
			_, _ = w.ResponseWriter.Write(b[:n])
		}
		http.NewResponseController(w.ResponseWriter).Flush()
		panic(http.ErrAbortHandler)
	}
	return w.ResponseWriter.Write(b)
}

func (w *cutAfterFirstEvent) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// resumes lists the GETs that resumed a POST stream (stream number not 0).
func (c *cuttingFront) resumes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for _, id := range c.gets {
		if _, ev, ok := strings.Cut(id, "/"); ok && !strings.HasPrefix(ev, "0-") {
			ids = append(ids, id)
		}
	}
	return ids
}

// callResult is what a call made in the background got.
type callResult struct {
	res *mcp.CallToolResult
	err error
}

// cutCall starts a fleet of 3 before a cuttingFront, a session through it,
// and a call of "gate" whose POST stream the front drops; the call's
// result arrives on the channel.
func cutCall(t *testing.T, ctx context.Context, release <-chan struct{}) (*testFleet, *cuttingFront, *mcp.ClientSession, <-chan callResult) {
	t.Helper()
	f := startFleet(t, 3, serversJSON(fmt.Sprintf(`"up": {"url": %q}`, gatedUpstream(t, release))))
	front := &cuttingFront{next: f.proxy}
	srv := httptest.NewServer(front)
	t.Cleanup(srv.Close)
	cs := connect(t, srv.URL+"/mcp", nil)
	done := make(chan callResult, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "gate"}
		params.SetProgressToken("p")
		res, err := cs.CallTool(ctx, params)
		done <- callResult{res, err}
	}()
	return f, front, cs, done
}

// TestFleetCallResumedOnAnotherReplica: a call's POST stream dropped by
// the front before the answer is resumed by the client with a GET, which a
// non-sticky balancer sends to another replica than the one that holds the
// call: the answer still reaches the client (that replica relays the
// stream), and the session goes on.
func TestFleetCallResumedOnAnotherReplica(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	release := make(chan struct{})
	_, front, cs, done := cutCall(t, ctx, release)
	waitFor(t, "the client resuming the dropped call stream", func() bool { return len(front.resumes()) > 0 })
	close(release)
	select {
	case r := <-done:
		if r.err != nil || textOf(r.res) != "released" {
			t.Fatalf("call after its stream was resumed elsewhere: %v %+v", r.err, r.res)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer 10 s after the tool finished: the call's stream was resumed (Last-Event-ID %q) on a replica that does not hold it", front.resumes())
	}
	front.mu.Lock()
	callAt, resumAt := front.callAt, front.resumAt
	front.mu.Unlock()
	if callAt == "" || callAt == resumAt {
		t.Fatalf("the call went to replica %q and its resumption to %q: not across replicas", callAt, resumAt)
	}
	if err := cs.Ping(ctx, nil); err != nil {
		t.Fatalf("ping after the resumed call: %v", err)
	}
}

// TestFleetCallResumedAfterItsReplicaDied: when the replica holding a
// dropped call stream is gone by the time the client resumes it elsewhere,
// the call gets an error at once (it will never be answered) instead of
// waiting for its deadline, and the session goes on.
func TestFleetCallResumedAfterItsReplicaDied(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	release := make(chan struct{})
	f, front, cs, done := cutCall(t, ctx, release)
	t.Cleanup(func() { close(release) }) // the upstream's handler, still waiting
	var holder int
	waitFor(t, "the call stream dropped", func() bool {
		front.mu.Lock()
		defer front.mu.Unlock()
		_, err := fmt.Sscan(front.callAt, &holder)
		return err == nil
	})
	f.stop(holder)
	select {
	case r := <-done:
		if r.err == nil {
			t.Fatalf("call held by a dead replica answered %+v", r.res)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer 10 s after the replica holding the call died (resumed with %q)", front.resumes())
	}
	if len(front.resumes()) == 0 {
		t.Fatal("the client did not resume the call stream")
	}
	if err := cs.Ping(ctx, nil); err != nil {
		t.Fatalf("ping after the lost call: %v", err)
	}
}
