package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
	"github.com/edge-mcp/edge-mcp/internal/rrproxy"
	"github.com/edge-mcp/edge-mcp/internal/testenv"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
)

// testFleetSecret is the session-token secret of the test fleets.
const testFleetSecret = "fleet-test-secret-0123456789abcdef"

// testFleet is real gateway replicas sharing an in-process NATS, behind a
// strict round-robin proxy.
type testFleet struct {
	nats  *natstest.Server
	gws   []*Gateway
	srvs  []*httptest.Server
	proxy *rrproxy.Proxy
	url   string // the proxy's MCP endpoint

	mu   sync.Mutex
	down map[int]bool // replicas shut down: the proxy skips them

	clusterExtra string // more keys of each replica's cluster section (startFleetWith)
}

// startFleet starts n replicas (r0…) of one fleet with the servers
// section servers, each on its own 127.0.0.1 listener.
func startFleet(t testing.TB, n int, servers string) *testFleet {
	t.Helper()
	return startFleetWith(t, n, servers, "")
}

// startFleetWith is startFleet with more keys for the cluster section
// (such as `"session_ttl": 120`).
func startFleetWith(t testing.TB, n int, servers, clusterExtra string) *testFleet {
	t.Helper()
	f := &testFleet{nats: natstest.Start(t), down: map[int]bool{}, clusterExtra: clusterExtra}
	var urls []string
	for i := range n {
		g, srv := f.startReplica(t, i, servers)
		f.gws, f.srvs = append(f.gws, g), append(f.srvs, srv)
		urls = append(urls, srv.URL)
	}
	p, err := rrproxy.New(urls...)
	if err != nil {
		t.Fatal(err)
	}
	var next atomic.Uint64
	p.Pick = func(_ *http.Request, n int) int { // round robin over live replicas
		f.mu.Lock()
		defer f.mu.Unlock()
		for {
			if i := int(next.Add(1)-1) % n; !f.down[i] {
				return i
			}
		}
	}
	f.proxy = p
	var h http.Handler = p
	if os.Getenv("EDGE_MCP_TEST_DEBUG") != "" { // log every proxied request
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			start := time.Now()
			p.ServeHTTP(w, r)
			t.Logf("proxy: %s → %s %.120s Last-Event-ID=%q %v", r.Method, w.Header().Get("X-Edge-Backend"),
				body, r.Header.Get("Last-Event-ID"), time.Since(start))
		})
	}
	front := httptest.NewServer(h)
	t.Cleanup(front.Close)
	f.url = front.URL + "/mcp"
	return f
}

func (f *testFleet) startReplica(t testing.TB, i int, servers string) (*Gateway, *httptest.Server) {
	t.Helper()
	extra := ""
	if f.clusterExtra != "" {
		extra = ", " + f.clusterExtra
	}
	js := strings.TrimSuffix(servers, "}") + fmt.Sprintf(`, "cluster": {"allow_anonymous_nats": true, "nats_url": %q, "name": "tf", "secret": %q, "replica": "r%d"%s}}`,
		f.nats.ClientURL(), testFleetSecret, i, extra)
	cfg, err := config.Parse("test.json", []byte(js))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	url, g := startGatewayConfig(t, cfg, Options{})
	waitFor(t, "replica joined the fleet", func() bool { return g.fleet.Sessions() != nil && g.fleet.Node() != nil && g.fleet.Node().Connected() })
	srv := &httptest.Server{URL: strings.TrimSuffix(url, "/mcp")}
	return g, srv
}

// stop shuts replica i down (listener and gateway) as if it died; the
// proxy no longer sends it anything.
func (f *testFleet) stop(i int) {
	f.mu.Lock()
	f.down[i] = true
	f.mu.Unlock()
	f.gws[i].Close()
}

// raw posts one JSON-RPC message through the proxy with session id sid
// and returns the HTTP status and body.
func (f *testFleet) raw(t testing.TB, method, sid, body string, hdr ...http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, f.url, strings.NewReader(body))
	for _, h := range hdr {
		for k, v := range h {
			req.Header[k] = v
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// initRaw opens a session through the proxy and returns its id.
func (f *testFleet) initRaw(t testing.TB, hdr ...http.Header) string {
	t.Helper()
	req, _ := http.NewRequest("POST", f.url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	for _, h := range hdr {
		for k, v := range h {
			req.Header[k] = v
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	if code, body := f.raw(t, "POST", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, hdr...); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	return sid
}

// servedBy counts the sessions each replica serves.
func (f *testFleet) servedBy() []int {
	out := make([]int, len(f.gws))
	for i, g := range f.gws {
		out[i] = len(g.route.allSessions())
	}
	return out
}

// TestFleetSessionAcrossReplicas: a go-sdk client's whole session through
// a strict round-robin proxy over three replicas: every request lands on
// another replica than the one before, and each serves it.
func TestFleetSessionAcrossReplicas(t *testing.T) {
	t.Parallel()
	up := testenvEverything(t)
	f := startFleet(t, 3, serversJSON(fmt.Sprintf(`"everything": {"url": %q}`, up)))
	cs := connect(t, f.url, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := range 3 {
		if got := toolNames(t, cs); len(got) == 0 {
			t.Fatalf("round %d: no tools", round)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})
		if err != nil || res.IsError {
			t.Fatalf("round %d: call: %v %+v", round, err, res)
		}
		if got := textOf(res); got != "This is a simple text response for testing." {
			t.Fatalf("round %d: tool said %q", round, got)
		}
		if err := cs.Ping(ctx, nil); err != nil {
			t.Fatalf("round %d: ping: %v", round, err)
		}
		if _, err := cs.ListResources(ctx, nil); err != nil {
			t.Fatalf("round %d: resources/list: %v", round, err)
		}
	}
	for i, n := range f.servedBy() {
		if n != 1 {
			t.Fatalf("replica %d serves %d sessions, want 1 each (%v)", i, n, f.servedBy())
		}
	}
	sid := cs.ID()
	if err := cs.Close(); err != nil {
		t.Fatalf("DELETE: %v", err)
	}
	waitFor(t, "every replica closed the deleted session", func() bool {
		return f.servedBy()[0]+f.servedBy()[1]+f.servedBy()[2] == 0
	})
	for i := range 3 {
		if code, body := f.raw(t, "POST", sid, `{"jsonrpc":"2.0","id":9,"method":"ping"}`); code != http.StatusNotFound {
			t.Fatalf("replay %d after DELETE: %d %s", i, code, body)
		}
	}
}

// TestFleetSessionRefusesBadTokens: a session id that is not a live token
// of this fleet for this identity gets 404 on every replica (the client
// initialises again), never someone else's session.
func TestFleetSessionRefusesBadTokens(t *testing.T) {
	t.Parallel()
	up := testenvEverything(t)
	const aliceKey, bobKey = "alice-key-0123456789abcdef", "bob-key-0123456789abcdef"
	f := startFleet(t, 3, fmt.Sprintf(`{"mcpServers": {"everything": {"url": %q}},
		"auth": {"mode": "api_key", "api_keys": [{"name": "alice", "key": %q}, {"name": "bob", "key": %q}]}}`, up, aliceKey, bobKey))
	alice, bob := bearer(aliceKey), bearer(bobKey)
	sid := f.initRaw(t, alice)
	claims := cluster.SessionClaims{Identity: "alice", Method: "api_key", Version: "2025-11-25", Owner: "r0"}
	seal := func(fleet, secret string, at time.Time) string {
		s, err := cluster.NewSealer(fleet, []string{secret})
		if err != nil {
			t.Fatal(err)
		}
		tok, err := s.SealAt(claims, at)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	altered := []byte(sid)
	altered[len(altered)/2] ^= 1
	if altered[len(altered)/2] == '-' || altered[len(altered)/2] == '_' {
		altered[len(altered)/2] = 'A'
	}
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	if code, body := f.raw(t, "POST", sid, ping, alice); code != http.StatusOK {
		t.Fatalf("the good token: %d %s", code, body)
	}
	for _, tc := range []struct {
		name, sid string
		who       http.Header
	}{
		{"forged", "U0FNRS1PTEQtU0VTU0lPTi1GT1JHRUQtQlktSEFORA", alice},
		{"altered", string(altered), alice},
		{"other fleet", seal("other", testFleetSecret, time.Now()), alice},
		{"other secret", seal("tf", "some-other-secret-0123456789abcdef", time.Now()), alice},
		{"expired", seal("tf", testFleetSecret, time.Now().Add(-cluster.SessionTTL-time.Minute)), alice},
		{"another identity's", sid, bob},
		{"another identity's, never seen", seal("tf", testFleetSecret, time.Now()), bob},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range 3 { // each replica in turn
				for _, m := range []string{"POST", "GET", "DELETE"} {
					body := ""
					if m == "POST" {
						body = ping
					}
					if code, got := f.raw(t, m, tc.sid, body, tc.who); code != http.StatusNotFound {
						t.Fatalf("try %d %s: %d %s", i, m, code, got)
					}
				}
			}
		})
	}
	// A token sealed with the fleet's secret and name for this identity
	// is a session: the fleet trusts its secret.
	if code, body := f.raw(t, "POST", seal("tf", testFleetSecret, time.Now()), ping, alice); code != http.StatusOK {
		t.Fatalf("a valid token made elsewhere: %d %s", code, body)
	}
	if code, body := f.raw(t, "POST", sid, ping, alice); code != http.StatusOK {
		t.Fatalf("the good token after the attempts: %d %s", code, body)
	}
}

// fleetUpstream is a go-sdk server whose tools ask the client to sample,
// report progress, and whose resource "mem://note" can be subscribed to.
func fleetUpstream(t testing.TB) (*mcp.Server, string) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "fleet-up", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	mcp.AddTool(s, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Q string `json:"q"`
	}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Q}}}})
		if err != nil {
			return nil, nil, fmt.Errorf("sampling: %w", err)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "model said: " + textContent(res.Content)}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		for i := 1.0; i <= 3; i++ {
			p := &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: i, Total: 3}
			if err := req.Session.NotifyProgress(ctx, p); err != nil {
				return nil, nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	s.AddResource(&mcp.Resource{URI: "mem://note", Name: "note"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "mem://note", Text: "n"}}}, nil
	})
	return s, serveMCP(t, s)
}

// TestFleetServerToClient: what an upstream sends the client crosses
// replicas: a sampling request during a call is answered by the client
// through another replica than the one whose call waits; progress of a
// call reaches the client; a resource update for a subscription made on
// one replica reaches the GET stream held by another.
func TestFleetServerToClient(t *testing.T) {
	t.Parallel()
	up, upURL := fleetUpstream(t)
	f := startFleet(t, 3, serversJSON(fmt.Sprintf(`"up": {"url": %q}`, upURL)))
	var (
		mu       sync.Mutex
		progress []float64
		updated  = make(chan string, 4)
	)
	cs := connect(t, f.url, &mcp.ClientOptions{
		CreateMessageHandler: sampled("forty-two"),
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, r.Params.Progress)
			mu.Unlock()
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("sampling answered through another replica", func(t *testing.T) {
		before := f.answersForwarded()
		for i := range 3 {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"q": "q"}})
			if err != nil || res.IsError {
				t.Fatalf("call %d: %v %+v", i, err, res)
			}
			if got := textOf(res); got != "model said: forty-two" {
				t.Fatalf("call %d: %q", i, got)
			}
		}
		if n := f.answersForwarded() - before; n < 3 {
			t.Fatalf("%d of 3 answers crossed replicas; the round robin should send each elsewhere", n)
		}
	})
	t.Run("progress", func(t *testing.T) {
		params := &mcp.CallToolParams{Name: "slow"}
		params.SetProgressToken("p1")
		if res, err := cs.CallTool(ctx, params); err != nil || textOf(res) != "done" {
			t.Fatalf("call: %v %+v", err, res)
		}
		waitFor(t, "three progress notifications", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(progress) == 3
		})
	})
	t.Run("resource update to the GET stream on another replica", func(t *testing.T) {
		holder := f.streamHolder(t)
		for f.proxy.Count()%3 == uint64(holder) { // the subscription goes elsewhere
			if err := cs.Ping(ctx, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "mem://note"}); err != nil {
			t.Fatal(err)
		}
		if err := up.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "mem://note"}); err != nil {
			t.Fatal(err)
		}
		select {
		case uri := <-updated:
			if uri != "mem://note" {
				t.Fatalf("updated %q", uri)
			}
		case <-ctx.Done():
			t.Fatal("no notifications/resources/updated reached the client")
		}
	})
}

// answersForwarded counts the client answers the replicas sent to
// another replica.
func (f *testFleet) answersForwarded() int64 {
	var n int64
	for _, g := range f.gws {
		if fs := g.fleet.Sessions(); fs != nil {
			n += fs.Forwarded()
		}
	}
	return n
}

// streamHolder is the replica holding the (one) client's GET stream.
func (f *testFleet) streamHolder(t testing.TB) int {
	t.Helper()
	holder := -1
	waitFor(t, "a replica holds the GET stream", func() bool {
		for i, g := range f.gws {
			if g.fleet.Sessions().Streams() > 0 {
				holder = i
				return true
			}
		}
		return false
	})
	return holder
}

// TestFleetReplicaDiesMidSession: a replica shut down (listener and
// gateway) in the middle of a session, the GET stream's holder included,
// takes nothing of the session with it: the next requests on the others
// go on.
func TestFleetReplicaDiesMidSession(t *testing.T) {
	t.Parallel()
	up, upURL := fleetUpstream(t)
	f := startFleet(t, 3, serversJSON(fmt.Sprintf(`"up": {"url": %q}`, upURL)))
	updated := make(chan string, 4)
	cs := connect(t, f.url, &mcp.ClientOptions{
		CreateMessageHandler:   sampled("still here"),
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	f.stop(f.streamHolder(t))
	for i := range 4 {
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatalf("list %d after the replica died: %v", i, err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"q": "q"}})
		if err != nil || textOf(res) != "model said: still here" {
			t.Fatalf("call %d after the replica died: %v %+v", i, err, res)
		}
		if err := cs.Ping(ctx, nil); err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
	}
	// The client's GET stream came back on a live replica: a resource
	// update still reaches it.
	holder := f.streamHolder(t)
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "mem://note"}); err != nil {
		t.Fatal(err)
	}
	if err := up.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "mem://note"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-updated:
	case <-ctx.Done():
		t.Fatalf("no resource update reached the GET stream (now on replica %d)", holder)
	}
}

// TestFleetConformance runs the official conformance server suite through
// the round-robin proxy over three replicas: it must pass as it does
// directly (40 passed, 0 failed).
func TestFleetConformance(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("conformance suite: skipped in -short mode")
	}
	up := testenvEverything(t)
	f := startFleet(t, 3, serversJSON(fmt.Sprintf(`"everything": {"url": %q}`, up)))
	passed, failed, out := testenv.RunConformance(t, f.url)
	if passed != 40 || failed != 0 {
		t.Fatalf("conformance through 3 replicas behind round robin: %d passed, %d failed (want 40 passed, 0 failed)\n%s", passed, failed, out)
	}
	if f.proxy.Count() < 100 {
		t.Fatalf("only %d requests went through the proxy", f.proxy.Count())
	}
}

// countingUpstream is a go-sdk server whose tool "count" counts the calls
// of each upstream session: per-client state.
func countingUpstream(t testing.TB) string {
	t.Helper()
	var mu sync.Mutex
	counts := map[string]int{}
	s := mcp.NewServer(&mcp.Implementation{Name: "counter", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "count"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		mu.Lock()
		counts[req.Session.ID()]++
		n := counts[req.Session.ID()]
		mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(n)}}}, nil, nil
	})
	return serveMCP(t, s)
}

// TestFleetPerClientUpstream: a per_client upstream session lives on the
// replica that opened the downstream session; the others send its calls
// there, so the upstream sees one session whichever replica the client
// reaches. When that replica dies, the next replica re-creates it (the
// count starts again) and the fleet then uses that one.
func TestFleetPerClientUpstream(t *testing.T) {
	t.Parallel()
	up := countingUpstream(t)
	f := startFleet(t, 3, serversJSON(fmt.Sprintf(`"counter": {"url": %q, "session": "per_client"}`, up)))
	cs := connect(t, f.url, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	count := func() string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "count"})
		if err != nil || res.IsError {
			t.Fatalf("count: %v %+v", err, res)
		}
		return textOf(res)
	}
	for want := 1; want <= 6; want++ {
		if got := count(); got != fmt.Sprint(want) {
			t.Fatalf("call %d counted %s: the calls did not all reach one upstream session", want, got)
		}
	}
	owner := -1
	for i, g := range f.gws {
		for _, s := range g.route.allSessions() {
			if !s.fleet.Remote() {
				owner = i
			}
		}
	}
	if owner < 0 {
		t.Fatal("no replica owns the session")
	}
	f.stop(owner)
	var got []string
	for range 6 {
		got = append(got, count())
	}
	if strings.Join(got, " ") != "1 2 3 4 5 6" {
		t.Fatalf("after the owner died: counts %v, want one re-created upstream session (1 … 6)", got)
	}
}

// TestFleetRefusesBadNATSMessages: garbage on every subject and bucket
// the sessions use is refused (and logged), never a crash, and the
// session goes on.
func TestFleetRefusesBadNATSMessages(t *testing.T) {
	t.Parallel()
	up := testenvEverything(t)
	f := startFleet(t, 3, serversJSON(fmt.Sprintf(`"everything": {"url": %q}`, up)))
	cs := connect(t, f.url, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cs.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	holder := f.streamHolder(t)
	n := f.gws[holder].fleet.Node()
	nc := n.Conn()
	sid := cs.ID()
	garbage := [][]byte{nil, []byte("{"), []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), []byte(`[1,2]`),
		bytes.Repeat([]byte("x"), 100000), []byte(`{"session":"` + sid + `","response":"nope"}`),
		[]byte(`{"session":"` + sid + `","request":{"jsonrpc":"2.0","method":"notifications/x"}}`),
		[]byte(`{"session":"` + sid + `","params":{"requestId":[1]}}`)}
	var calls sync.WaitGroup
	for i := range f.gws {
		r := cluster.Token(fmt.Sprintf("r%d", i))
		for _, g := range garbage {
			for _, subj := range []string{n.Subject("sess", n.Route(sid), "out"), n.Subject("replica", r, "answer"), n.Subject("cancel")} {
				if err := nc.Publish(subj, g); err != nil {
					t.Fatal(err)
				}
			}
			// A call gets an answer ("not the owner") or none; never a
			// crash. The calls wait for their answers together.
			calls.Go(func() { _, _ = nc.Request(n.Subject("replica", r, "call"), g, time.Second) })
		}
	}
	calls.Wait()
	kv, err := n.JetStream().KeyValue(ctx, n.Bucket("sessions"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range garbage[:5] {
		if _, err := kv.Put(ctx, fleet.RecordKey(sid), g); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kv.Put(ctx, fleet.RecordKey(sid), []byte(`{"id":"`+sid+`","level":"loudest"}`)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := cs.Ping(ctx, nil); err != nil {
			t.Fatalf("ping after the garbage: %v", err)
		}
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatalf("list after the garbage: %v", err)
		}
	}
}

// TestFleetCancelAcrossReplicas: a client's notifications/cancelled that
// lands on another replica than its call's still cancels the call
// upstream.
func TestFleetCancelAcrossReplicas(t *testing.T) {
	t.Parallel()
	started, cancelled := make(chan bool, 1), make(chan bool, 1)
	s := mcp.NewServer(&mcp.Implementation{Name: "waiter", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "wait"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		started <- true
		select {
		case <-ctx.Done():
			cancelled <- true
		case <-time.After(20 * time.Second):
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "waited"}}}, nil, nil
	})
	f := startFleet(t, 3, serversJSON(fmt.Sprintf(`"waiter": {"url": %q}`, serveMCP(t, s))))
	sid := f.initRaw(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // the cancelled call's POST gets no answer: end it
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", f.url, strings.NewReader(
			`{"jsonrpc":"2.0","id":"w1","method":"tools/call","params":{"name":"wait","arguments":{}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	select {
	case <-started:
	case <-time.After(15 * time.Second):
		t.Fatal("the call did not start")
	}
	// The call holds one replica; round robin sends this to the next.
	if code, body := f.raw(t, "POST", sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"w1","reason":"changed my mind"}}`); code != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d %s", code, body)
	}
	select {
	case <-cancelled:
	case <-time.After(15 * time.Second):
		t.Fatal("the cancellation did not reach the upstream")
	}
}

// TestFleetBacklogFollowsTheGETStream: a notification produced while no
// replica holds the client's GET stream waits on the replica that made
// it, and reaches the GET stream once the client opens one, on another
// replica.
func TestFleetBacklogFollowsTheGETStream(t *testing.T) {
	t.Parallel()
	up, upURL := fleetUpstream(t)
	f := startFleet(t, 3, serversJSON(fmt.Sprintf(`"up": {"url": %q}`, upURL)))
	sid := f.initRaw(t)
	subscriber := int(f.proxy.Count() % 3)
	if code, body := f.raw(t, "POST", sid, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"mem://note"}}`); code != http.StatusOK {
		t.Fatalf("subscribe: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := up.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "mem://note"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the update kept on the subscribing replica", func() bool {
		sess := f.gws[subscriber].route.allSessions()
		return len(sess) == 1 && f.gws[subscriber].http.BacklogLen(sid) == 1
	})
	for f.proxy.Count()%3 == uint64(subscriber) {
		f.raw(t, "POST", sid, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", f.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	var got strings.Builder
	for !strings.Contains(got.String(), "notifications/resources/updated") {
		n, err := resp.Body.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("GET stream ended without the update: %v\n%s", err, got.String())
		}
	}
}

var _ = bytes.NewReader
