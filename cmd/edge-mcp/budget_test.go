package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
)

// The hostile tests of issue 24, part 3: what one identity can make the
// gateway hold for it is bounded by its share of the client-memory budget,
// and of a per_client server's sessions, and another identity is still
// served. Each runs the release binary with auth.mode api_key and two
// identities: mallory attacks, alice comes after.

const (
	malloryKey = "mallory-key-0123456789abcdef0123456789"
	aliceKey   = "alice-key-0123456789abcdef0123456789ab"
)

// budgetUpstream is a 2025-11-25 go-sdk server: "confirm" asks the client
// (elicitation), "hello" answers at once.
func budgetUpstream(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "budget-up", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "confirm"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Pad string `json:"pad"`
	}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "sure?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}})
		if err != nil {
			return nil, nil, fmt.Errorf("elicitation: %w", err)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "hello"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// floodUpstream is a minimal streamable HTTP MCP server whose one tool,
// flood, answers by SSE with n progress notifications (or its argument
// n) of size bytes each
// (encoded once, up front: the race-instrumented test process must not
// spend its time encoding them) and then its result "flooded".
func floodUpstream(t *testing.T, n, size int) string {
	t.Helper()
	big := []byte(strings.Repeat("x", size))
	results := map[string]string{
		"initialize": `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"flood","version":"1"}}`,
		"tools/list": `{"tools":[{"name":"flood","inputSchema":{"type":"object"}}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					N int `json:"n"`
				} `json:"arguments"`
				Meta struct {
					ProgressToken json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil || req.ID == nil {
			w.WriteHeader(http.StatusAccepted) // a notification
			return
		}
		w.Header().Set("Mcp-Session-Id", "flood")
		if req.Method != "tools/call" {
			result, ok := results[req.Method]
			if !ok {
				result = `{}` // ping and the like
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`+result+`}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range cmp.Or(req.Params.Arguments.N, n) {
			fmt.Fprintf(w, `data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d,"message":"`, req.Params.Meta.ProgressToken, i+1)
			w.Write(big)
			io.WriteString(w, "\"}}\n\n")
		}
		io.WriteString(w, `data: {"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"content":[{"type":"text","text":"flooded"}]}}`+"\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// startBudgetGateway starts the release binary in front of budgetUpstream
// with the two identities, the server's extra keys and limits.
func startBudgetGateway(t *testing.T, server, limits string) *process {
	t.Helper()
	return startGatewayWith(t, fmt.Sprintf(`{"url": %q, "protocol_version": "2025-11-25"%s}`, budgetUpstream(t), server), limits)
}

// startGatewayWith starts the release binary in front of the server up
// (its config object) with the two identities and limits.
func startGatewayWith(t *testing.T, up, limits string) *process {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gw.json")
	doc := fmt.Sprintf(`{"mcpServers": {"up": %s},
		"auth": {"mode": "api_key", "api_keys": [{"name": "mallory", "key": %q}, {"name": "alice", "key": %q}]},
		"limits": {%s}}`, up, malloryKey, aliceKey, limits)
	os.WriteFile(cfg, []byte(doc), 0o600)
	p := startBinary(t, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--admin", "off", "--state-dir", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := waitConnectedAs(ctx, p.base, aliceKey, 1); err != nil {
		t.Fatalf("%v", err)
	}
	return p
}

// memStats is the client_memory section of /status.
type memStats struct {
	Limit       int64        `json:"limit_bytes"`
	PerIdentity int64        `json:"per_identity_bytes"`
	Used        int64        `json:"used_bytes"`
	Stores      []storeStats `json:"stores"`
}

// storeStats are one store's figures in memStats.
type storeStats struct {
	Store   string `json:"store"`
	Used    int64  `json:"used_bytes"`
	Dropped int64  `json:"dropped"`
	Refused int64  `json:"refused"`
}

// clientMemory reads the client_memory section of the gateway's /status;
// a gateway without one fails the test (and gets zero figures).
func clientMemory(t *testing.T, base string) *memStats {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/status", nil)
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("getting /status: %v", err)
	}
	defer resp.Body.Close()
	var doc struct {
		ClientMemory *memStats `json:"client_memory"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatalf("decoding /status: %v", err)
	}
	if doc.ClientMemory == nil {
		t.Error("/status has no client_memory section")
		return &memStats{}
	}
	return doc.ClientMemory
}

// store returns the figures of one store ("resumption", "input_rounds").
func (st *memStats) store(name string) storeStats {
	for _, s := range st.Stores {
		if s.Store == name {
			return s
		}
	}
	return storeStats{}
}

// rawMCP is a streamable HTTP client at the HTTP level, for what the
// go-sdk client does not show: event ids and resumption.
type rawMCP struct {
	base, key, sid string
}

func (c *rawMCP) do(ctx context.Context, method, body string, header map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+"/mcp", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return http.DefaultClient.Do(req)
}

// open initializes a session.
func (c *rawMCP) open(ctx context.Context) error {
	resp, err := c.do(ctx, http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if c.sid = resp.Header.Get("Mcp-Session-Id"); resp.StatusCode != http.StatusOK || c.sid == "" {
		return fmt.Errorf("initialize: HTTP %d, session %q", resp.StatusCode, c.sid)
	}
	resp, err = c.do(ctx, http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// sseEvent is one event of an SSE body: its id and data.
type sseEvent struct{ id, data string }

// readEvents reads an SSE body to its end.
func readEvents(r io.Reader) ([]sseEvent, error) {
	var (
		out []sseEvent
		cur sseEvent
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "data: "):
			cur.data += line[6:]
		}
	}
	return out, sc.Err()
}

// rpc sends a request and returns its answer's result or error message
// (from a JSON or an SSE answer).
func (c *rawMCP) rpc(ctx context.Context, method, params string) (json.RawMessage, string, error) {
	resp, err := c.do(ctx, http.MethodPost, `{"jsonrpc":"2.0","id":7,"method":"`+method+`","params":`+params+`}`, nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body := []byte{}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		evs, err := readEvents(resp.Body)
		if err != nil || len(evs) == 0 {
			return nil, "", fmt.Errorf("%s: %d events: %v", method, len(evs), err)
		}
		body = []byte(evs[len(evs)-1].data)
	} else if body, err = io.ReadAll(resp.Body); err != nil {
		return nil, "", err
	}
	var answer struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, "", fmt.Errorf("%s: answer %.200s: %w", method, body, err)
	}
	if answer.Error != nil {
		return nil, answer.Error.Message, nil
	}
	return answer.Result, "", nil
}

// floodCall is a tools/call of floodUpstream's tool for n notifications
// (0: its default), with a progress token so that they reach the client.
func floodCall(n int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"flood","arguments":{"n":%d},"_meta":{"progressToken":"p"}}}`, n)
}

// floodQuiet calls the flood tool and reads its answer without parsing
// it (cheap under the race detector): its end must be the result.
func (c *rawMCP) floodQuiet(ctx context.Context) error {
	resp, err := c.do(ctx, http.MethodPost, floodCall(0), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var tail tailWriter
	if _, err := io.Copy(&tail, resp.Body); err != nil {
		return err
	}
	if !strings.Contains(string(tail.b), "flooded") {
		return fmt.Errorf("flood: HTTP %d, no result at the end: %q", resp.StatusCode, tail.b)
	}
	return nil
}

// tailWriter keeps the last 512 bytes written to it.
type tailWriter struct{ b []byte }

func (w *tailWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p[max(len(p)-512, 0):]...)
	w.b = w.b[max(len(w.b)-512, 0):]
	return len(p), nil
}

// flood calls the flood tool and returns the events of its answer.
func (c *rawMCP) flood(ctx context.Context, n int) ([]sseEvent, error) {
	resp, err := c.do(ctx, http.MethodPost, floodCall(n), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	evs, err := readEvents(resp.Body)
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 || !strings.Contains(evs[len(evs)-1].data, "flooded") {
		return evs, fmt.Errorf("flood: HTTP %d, %d events, no result", resp.StatusCode, len(evs))
	}
	return evs, nil
}

// TestHostileResumptionBudget: one identity opens many sessions, each
// answered by SSE with 18 progress events of 256 KB, and leaves them open
// so that their events are kept for resumption (issue 24: 300 such
// sessions held 1.75 GB, 4 MiB each). With limits.memory_mb 64 the
// client-memory budget is 16 MiB, 4 MiB of it per identity: the sessions'
// stores drop the identity's oldest events to stay within the share,
// /status shows at most the share held, the process's peak RSS stays
// within the memory limit + 24 MiB (about 60 MiB; before the budget, 30
// sessions took it to about 147 MiB), and a second identity's stream is
// still kept and resumed.
func TestHostileResumptionBudget(t *testing.T) {
	t.Parallel()
	const sessions, events, size, memoryMB = 30, 18, 256 << 10, 64
	p := startGatewayWith(t, fmt.Sprintf(`{"url": %q}`, floodUpstream(t, events, size)), fmt.Sprintf(`"memory_mb": %d`, memoryMB))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	var failed atomic.Int64
	work := make(chan struct{}, sessions)
	for range sessions {
		work <- struct{}{}
	}
	close(work)
	for range 4 {
		wg.Go(func() {
			for range work {
				c := &rawMCP{base: p.base, key: malloryKey}
				if err := c.open(ctx); err != nil {
					t.Errorf("mallory's session: %v", err)
					failed.Add(1)
					return
				}
				if err := c.floodQuiet(ctx); err != nil {
					t.Errorf("mallory's flood: %v", err)
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
	st := clientMemory(t, p.base)
	res := st.store("resumption")
	t.Logf("after %d sessions of %d × %d KiB events: %.1f MiB held for resumption (limit %.0f MiB, per identity %.0f MiB), %d events dropped, %d not kept",
		sessions, events, size>>10, float64(res.Used)/(1<<20), float64(st.Limit)/(1<<20), float64(st.PerIdentity)/(1<<20), res.Dropped, res.Refused)
	if st.Used > st.Limit || res.Used > st.PerIdentity || res.Used == 0 {
		t.Errorf("held %d bytes for resumption, want some and at most the identity's share %d (total %d)", res.Used, st.PerIdentity, st.Limit)
	}
	if st.Limit != memoryMB<<20/4 {
		t.Errorf("limit %d, want a quarter of memory_mb", st.Limit)
	}

	// alice is still served: her events are kept and a resuming GET
	// replays them (not a fresh stream).
	alice := &rawMCP{base: p.base, key: aliceKey}
	if err := alice.open(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := alice.flood(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	first := ""
	for _, e := range evs {
		if e.id != "" && e.data != "" {
			first = e.id
			break
		}
	}
	resp, err := alice.do(ctx, http.MethodGet, "", map[string]string{"Last-Event-ID": first})
	if err != nil {
		t.Fatal(err)
	}
	replay, err := readEvents(resp.Body)
	resp.Body.Close()
	if err != nil || len(replay) != 4 || strings.Contains(replay[0].data, "list_changed") || !strings.Contains(replay[3].data, "flooded") {
		t.Errorf("alice's resume after %s: %d events (%v), want the 3 other progress events and the result", first, len(replay), err)
	}
	if peak := p.peakRSS(t); peak > (memoryMB+24)<<20 {
		t.Errorf("peak RSS %.0f MiB, want at most the memory limit + 24 MiB", float64(peak)/(1<<20))
	} else {
		t.Logf("peak RSS %.0f MiB", float64(peak)/(1<<20))
	}
}

// call2026 sends a raw 2026-07-28 tools/call of the confirm tool with pad
// bytes of arguments as key, and returns its answer's result type or error
// message.
func call2026(ctx context.Context, base, key string, pad int) (resultType, errMsg string, err error) {
	meta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"confirm","arguments":{"pad":"` + strings.Repeat("p", pad) + `"},"_meta":` + meta + `}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "confirm")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", "", err
	}
	if i := strings.Index(string(got), "data: "); i >= 0 { // an SSE answer
		got = []byte(strings.TrimSpace(strings.SplitN(string(got[i+6:]), "\n", 2)[0]))
	}
	var answer struct {
		Result struct {
			ResultType string `json:"resultType"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(got, &answer); err != nil {
		return "", "", fmt.Errorf("answer %.200s: %w", got, err)
	}
	if answer.Error != nil {
		return "", answer.Error.Message, nil
	}
	return answer.Result.ResultType, "", nil
}

// TestHostileParkedRounds: one identity calls an eliciting tool of a 2025
// upstream from a 2026-07-28 client, 8 at a time with 30 KB arguments,
// and never retries: each call parks the upstream's request for
// limits.input_timeout (issue 24: 4000 such calls held 822 MB for 60 s).
// With limits.memory_mb 64 the client-memory budget is 16 MiB, 4 MiB per
// identity: the calls
// over the share are refused with an error naming the budget, /status
// shows at most the share held, and a second identity's call still gets
// its input_required round.
func TestHostileParkedRounds(t *testing.T) {
	t.Parallel()
	const calls, pad = 400, 30 << 10
	p := startBudgetGateway(t, "", `"memory_mb": 64`)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	var parked, refused atomic.Int64
	work := make(chan struct{}, calls)
	for range calls {
		work <- struct{}{}
	}
	close(work)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range work {
				rt, msg, err := call2026(ctx, p.base, malloryKey, pad)
				switch {
				case err != nil:
					t.Errorf("mallory's call: %v", err)
					return
				case rt == "input_required":
					parked.Add(1)
				case strings.Contains(msg, "client memory budget"):
					refused.Add(1)
				default:
					t.Errorf("mallory's call: result type %q, error %q", rt, msg)
					return
				}
			}
		})
	}
	wg.Wait()
	st := clientMemory(t, p.base)
	rounds := st.store("input_rounds")
	t.Logf("%d calls parked, %d refused; %.1f MiB held for input rounds (per identity %.0f MiB), %d refusals counted",
		parked.Load(), refused.Load(), float64(rounds.Used)/(1<<20), float64(st.PerIdentity)/(1<<20), rounds.Refused)
	if refused.Load() == 0 || parked.Load() == 0 {
		t.Errorf("want some calls parked and the rest refused over the budget, got %d and %d", parked.Load(), refused.Load())
	}
	if rounds.Used > st.PerIdentity || rounds.Used == 0 || rounds.Refused != refused.Load() {
		t.Errorf("held %d bytes, %d refusals counted; want at most %d, and %d", rounds.Used, rounds.Refused, st.PerIdentity, refused.Load())
	}
	rt, msg, err := call2026(ctx, p.base, aliceKey, pad)
	if err != nil || rt != "input_required" {
		t.Errorf("alice's call during the attack: result type %q, error %q %v; want input_required", rt, msg, err)
	}
	t.Logf("peak RSS %.0f MiB", float64(p.peakRSS(t))/(1<<20))
}

// bearer adds an Authorization header to every request, when it has a key.
type bearer struct {
	key string
	rt  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.key != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	return b.rt.RoundTrip(r)
}

// TestHostilePerClientShare: one identity opens sessions on a per_client
// server with max_client_sessions 4 and calls it from each (issue 24: it
// took 4 of 4 and everyone else was refused for the 10 minutes of
// idleness). Now it gets half of them (the default
// max_client_sessions_per_identity), its further sessions are refused
// naming that key, and a second identity is served.
func TestHostilePerClientShare(t *testing.T) {
	t.Parallel()
	p := startBudgetGateway(t, `, "session": "per_client", "max_client_sessions": 4`, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := func(key string) error {
		c := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.base + "/mcp",
			HTTPClient: &http.Client{Transport: bearer{key, http.DefaultTransport}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		t.Cleanup(func() { cs.Close() }) // the session, and its upstream one, stay open
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "hello"})
		if err != nil {
			return err
		}
		if res.IsError || len(res.Content) == 0 || res.Content[0].(*mcp.TextContent).Text != "hello" {
			return fmt.Errorf("result %+v", res.Content)
		}
		return nil
	}
	served, refused := 0, 0
	for range 4 {
		switch err := call(malloryKey); {
		case err == nil:
			served++
		case strings.Contains(err.Error(), "max_client_sessions_per_identity"):
			refused++
		default:
			t.Fatalf("mallory's call: %v", err)
		}
	}
	if served != 2 || refused != 2 {
		t.Errorf("mallory: %d served, %d refused; want 2 and 2\n%s", served, refused, p.stderr)
	}
	if err := call(aliceKey); err != nil {
		t.Errorf("alice's call after mallory's sessions: %v", err)
	}
}

// createTask calls server-everything's task tool as a 2025-11-25 task and
// returns the gateway's task id, or the text of the tool error it got.
func (c *rawMCP) createTask(ctx context.Context, topic string) (id, toolErr string, err error) {
	res, msg, err := c.rpc(ctx, "tools/call", fmt.Sprintf(`{"name":"simulate-research-query","arguments":{"topic":%q},"task":{"ttl":600000}}`, topic))
	if err != nil || msg != "" {
		return "", "", fmt.Errorf("creating a task: %v %s", err, msg)
	}
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(res, &created); err != nil {
		return "", "", err
	}
	if created.IsError && len(created.Content) > 0 {
		return "", created.Content[0].Text, nil
	}
	if !strings.HasPrefix(created.Task.TaskID, "edge-") {
		return "", "", fmt.Errorf("CreateTaskResult %s: no gateway task id", res)
	}
	return created.Task.TaskID, "", nil
}

// TestHostileTaskBudget: one identity creates tasks from many sessions
// (each session may keep 1000). With a per-identity share of 6 KiB of
// the client-memory budget, its oldest tasks are forgotten as new ones
// come (tasks/get names them unknown), /status shows at most the share
// held for tasks, and a second identity's task is recorded and found.
func TestHostileTaskBudget(t *testing.T) {
	t.Parallel()
	const sessions, perSession, share = 2, 20, 6 << 10
	node, script := testenv.Node(t), testenv.ServerEverything(t)
	script, _ = filepath.EvalSymlinks(script)
	p := startGatewayWith(t, fmt.Sprintf(`{"command": %q, "args": [%q, "stdio"]}`, node, script),
		fmt.Sprintf(`"client_memory": %d, "client_memory_per_identity": %d, "resume_events": -1`, 4*share, share))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var first string
	var firstSess *rawMCP
	for range sessions {
		c := &rawMCP{base: p.base, key: malloryKey}
		if err := c.open(ctx); err != nil {
			t.Fatal(err)
		}
		for i := range perSession {
			id, toolErr, err := c.createTask(ctx, fmt.Sprintf("topic %d", i))
			if err != nil || toolErr != "" {
				t.Fatalf("mallory's task %d: %v %s", i, err, toolErr)
			}
			if first == "" {
				first, firstSess = id, c
			}
		}
	}
	st := clientMemory(t, p.base)
	tasks := st.store("tasks")
	t.Logf("%d tasks created by one identity: %d bytes held for tasks (share %d), %d forgotten", sessions*perSession, tasks.Used, st.PerIdentity, tasks.Dropped)
	if tasks.Used > share || tasks.Used == 0 || tasks.Dropped == 0 {
		t.Errorf("held %d bytes for tasks with %d forgotten; want some, at most %d, and some forgotten", tasks.Used, tasks.Dropped, share)
	}
	if _, msg, err := firstSess.rpc(ctx, "tasks/get", `{"taskId":"`+first+`"}`); err != nil || msg == "" {
		t.Errorf("mallory's first task is still recorded (%v %q); want it forgotten", err, msg)
	}
	alice := &rawMCP{base: p.base, key: aliceKey}
	if err := alice.open(ctx); err != nil {
		t.Fatal(err)
	}
	id, toolErr, err := alice.createTask(ctx, "mine")
	if err != nil || toolErr != "" {
		t.Fatalf("alice's task: %v %s", err, toolErr)
	}
	if _, msg, err := alice.rpc(ctx, "tasks/get", `{"taskId":"`+id+`"}`); err != nil || msg != "" {
		t.Errorf("alice's task: %v %s", err, msg)
	}
}
