package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/runtime/tasks"
)

// rpc sends one request over c's session and returns its result or error.
func (c *rawClient) rpc(method, params string) (json.RawMessage, *jsonrpc.Error) {
	c.t.Helper()
	res, rerr, _ := c.rpcEvents(method, params)
	return res, rerr
}

// rpcEvents is rpc that also returns every message of the response stream.
func (c *rawClient) rpcEvents(method, params string) (json.RawMessage, *jsonrpc.Error, []string) {
	c.t.Helper()
	c.id++
	var events []string
	resp, body := c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.id, method, params))
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("%s: HTTP %d: %s", method, resp.StatusCode, body)
	}
	data := body
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data = nil
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "data:"); ok && strings.TrimSpace(line) != "" {
				data = []byte(strings.TrimSpace(line))
				events = append(events, string(data))
			}
		}
	}
	msg, err := wire.Decode(data)
	if err != nil {
		c.t.Fatalf("%s: decoding %q: %v", method, data, err)
	}
	r, ok := msg.(*jsonrpc.Response)
	if !ok {
		c.t.Fatalf("%s: not a response: %s", method, data)
	}
	if r.Error != nil {
		e, _ := r.Error.(*jsonrpc.Error)
		if e == nil {
			e = &jsonrpc.Error{Message: r.Error.Error()}
		}
		return nil, e, events
	}
	return r.Result, nil, events
}

// taskStatus is the part of a Task the tests read.
type taskStatus struct {
	TaskID string `json:"taskId"`
	Status string `json:"status"`
}

func decodeInto[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}

// startTasksGateway serves the TypeScript server-everything (its tasks
// are the 2025-11-25 ones of the TypeScript SDK) over stdio behind a
// gateway and returns the gateway's URL.
func startTasksGateway(t *testing.T, session string) string {
	node, script := testenv.Node(t), testenv.ServerEverything(t)
	script, _ = filepath.EvalSymlinks(script)
	entry := fmt.Sprintf(`"ts": {"command": %q, "args": [%q, "stdio"]`, node, script)
	if session != "" {
		entry += fmt.Sprintf(`, "session": %q`, session)
	}
	url, _ := startGateway(t, serversJSON(entry+"}"), Options{})
	return url
}

// createTask calls the server's task tool as a task and returns the task
// id the client was given.
// An ambiguous topic parks the task in input_required until the client
// calls tasks/result (the server's elicitation waits there).
func createTask(t *testing.T, c *rawClient, topic string, ambiguous bool) string {
	t.Helper()
	id, _ := createTaskEvents(t, c, topic, ambiguous)
	return id
}

// createTaskEvents is createTask that also returns the notifications that
// came on the call's stream.
func createTaskEvents(t *testing.T, c *rawClient, topic string, ambiguous bool) (string, []string) {
	t.Helper()
	return createTaskOf(t, c, "simulate-research-query", topic, ambiguous)
}

// createTaskOf is createTaskEvents with the exposed name of the task tool.
func createTaskOf(t *testing.T, c *rawClient, tool, topic string, ambiguous bool) (string, []string) {
	t.Helper()
	res, rerr, events := c.rpcEvents("tools/call", fmt.Sprintf(`{"name":%q,`, tool)+fmt.Sprintf(`"arguments":{"topic":%q,"ambiguous":%v},"task":{"ttl":60000}}`, topic, ambiguous))
	if rerr != nil {
		t.Fatalf("creating a task: %v", rerr)
	}
	created := decodeInto[struct{ Task taskStatus }](t, res)
	if !strings.HasPrefix(created.Task.TaskID, "edge-") || created.Task.Status != "working" {
		t.Fatalf("CreateTaskResult %s: want a gateway task id (edge-…) in status working", res)
	}
	return created.Task.TaskID, events
}

// TestTasksThroughGateway creates, polls, lists, fetches and cancels tasks
// of a real server through the gateway from two concurrent sessions, over
// the upstream's shared session and over per-client sessions: each session
// sees gateway task ids and only its own tasks; the other session's ids,
// replayed, are unknown to it for get, result, cancel and list.
func TestTasksThroughGateway(t *testing.T) {
	t.Parallel()
	for _, session := range []string{"shared", "per_client"} {
		t.Run(session, func(t *testing.T) {
			url := startTasksGateway(t, session)
			a, b := newRawClient(t, url), newRawClient(t, url)
			init, rerr := a.rpc("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if caps := decodeInto[struct{ Capabilities map[string]json.RawMessage }](t, init).Capabilities; caps["tasks"] == nil {
				t.Errorf("initialize: no tasks capability although the upstream offers it: %s", init)
			}
			notesA, notesB := statusNotes(t, a), statusNotes(t, b)
			idA, idB := createTask(t, a, "alpha", false), createTask(t, b, "beta", true)
			checkIsolation(t, a, b, idA, idB)
			// A polls its task to the end and gets the result; B cancels its own
			// (waiting for clarification: it never ends by itself).
			waitTask(t, b, idB, "input_required")
			cancelled := decodeInto[taskStatus](t, must(t)(b.rpc("tasks/cancel", `{"taskId":"`+idB+`"}`)))
			if cancelled.TaskID != idB || cancelled.Status != "cancelled" {
				t.Errorf("tasks/cancel: %+v, want %s cancelled", cancelled, idB)
			}
			waitTask(t, a, idA, "completed")
			res := must(t)(a.rpc("tasks/result", `{"taskId":"`+idA+`"}`))
			if !strings.Contains(string(res), "Research Report: alpha") {
				t.Errorf("tasks/result: %s", res)
			}
			if rel := decodeInto[struct {
				Meta map[string]taskStatus `json:"_meta"`
			}](t, res).Meta[tasks.MetaRelatedTask]; rel.TaskID != "" && rel.TaskID != idA {
				t.Errorf("tasks/result relates to task %q, want the gateway id %s", rel.TaskID, idA)
			}
			if got := decodeInto[taskStatus](t, must(t)(b.rpc("tasks/get", `{"taskId":"`+idB+`"}`))); got.Status != "cancelled" {
				t.Errorf("tasks/get after cancel: %+v", got)
			}
			// Status notifications: each session's own, under the gateway ids.
			waitFor(t, "A's completed notification", func() bool { return slices.Contains(notesA.seen(), idA+" completed") })
			waitFor(t, "B's input_required notification", func() bool { return slices.Contains(notesB.seen(), idB+" input_required") })
			for _, n := range []struct {
				seen []string
				mine string
			}{{notesA.seen(), idA}, {notesB.seen(), idB}} {
				for _, s := range n.seen {
					if !strings.HasPrefix(s, n.mine+" ") {
						t.Errorf("a session got the status notification %q, not of its task %s", s, n.mine)
					}
				}
			}
		})
	}
}

// checkIsolation: each of two sessions gets its own task, and the other's
// id, replayed, is unknown to it for get, result, cancel and list.
func checkIsolation(t *testing.T, a, b *rawClient, idA, idB string) {
	t.Helper()
	for _, c := range []struct {
		who  *rawClient
		mine string
		not  string
	}{{a, idA, idB}, {b, idB, idA}} {
		got := decodeInto[taskStatus](t, must(t)(c.who.rpc("tasks/get", `{"taskId":"`+c.mine+`"}`)))
		if got.TaskID != c.mine || got.Status == "" {
			t.Errorf("tasks/get of its own task: %+v, want id %s", got, c.mine)
		}
		for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			if _, rerr := c.who.rpc(m, `{"taskId":"`+c.not+`"}`); rerr == nil || rerr.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("%s of the other session's task %s: %v, want invalid params (unknown task)", m, c.not, rerr)
			}
		}
		list := decodeInto[struct{ Tasks []taskStatus }](t, must(t)(c.who.rpc("tasks/list", `{}`)))
		if len(list.Tasks) != 1 || list.Tasks[0].TaskID != c.mine {
			t.Errorf("tasks/list: %+v, want only its own task %s", list.Tasks, c.mine)
		}
	}
}

// TestTasksOfEndedSessionForgotten: when a session ends, the gateway
// forgets its task ids, so a new session replaying one gets "unknown".
func TestTasksOfEndedSessionForgotten(t *testing.T) {
	t.Parallel()
	url := startTasksGateway(t, "")
	a := newRawClient(t, url)
	id := createTask(t, a, "gone", false)
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", a.sid)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	b := newRawClient(t, url)
	waitFor(t, "the ended session's task to be forgotten", func() bool {
		_, rerr := b.rpc("tasks/get", `{"taskId":"`+id+`"}`)
		return rerr != nil && rerr.Code == jsonrpc.CodeInvalidParams
	})
}

// waitTask polls tasks/get until the task reaches status.
func waitTask(t *testing.T, c *rawClient, id, status string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := decodeInto[taskStatus](t, must(t)(c.rpc("tasks/get", `{"taskId":"`+id+`"}`)))
		if got.Status == status {
			return
		}
		if time.Now().After(deadline) || slices.Contains([]string{"completed", "failed", "cancelled"}, got.Status) {
			t.Fatalf("task %s: status %q, want %q", id, got.Status, status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// must fails the test on a JSON-RPC error.
func must(t *testing.T) func(json.RawMessage, *jsonrpc.Error) json.RawMessage {
	return func(res json.RawMessage, rerr *jsonrpc.Error) json.RawMessage {
		t.Helper()
		if rerr != nil {
			t.Fatalf("unexpected error: %v", rerr)
		}
		return res
	}
}

// notes collects the task status notifications of a session's GET stream
// as "taskId status".
type notes struct {
	mu   sync.Mutex
	list []string
	msgs []string // "taskId statusMessage"
}

func (n *notes) seen() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.list)
}

// statusNotes opens c's GET stream and collects its task status
// notifications until the test ends.
func statusNotes(t *testing.T, c *rawClient) *notes {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("opening the GET stream: %v %v", err, resp)
	}
	n := &notes{}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data:")
			if !ok {
				continue
			}
			n.add(data)
		}
	}()
	return n
}

// TestTaskInputReachesItsOwner: two sessions on one shared upstream
// session wait in tasks/result at once for their tasks, each of which asks
// its client for a clarification (an elicitation related to the task).
// Nothing in the transport says which call each request belongs to; the
// related task does: each session gets its own task's question, and its
// answer shows in its own result.
func TestTaskInputReachesItsOwner(t *testing.T) {
	t.Parallel()
	url := startTasksGateway(t, "shared")
	type res struct {
		who, text string
		err       error
	}
	out := make(chan res, 2)
	var ids []string
	var clients []*rawClient
	for _, who := range []string{"historical", "current"} {
		c := &rawClient{t: t, url: url}
		must(t)(c.rpc("initialize", `{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"`+who+`","version":"1"}}`))
		c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		id := createTask(t, c, "topic-"+who, true)
		waitTask(t, c, id, "input_required")
		ids, clients = append(ids, id), append(clients, c)
	}
	for i, who := range []string{"historical", "current"} {
		go func() {
			text, err := clients[i].resultAnswering(ids[i], who)
			out <- res{who, text, err}
		}()
	}
	for range 2 {
		r := <-out
		if r.err != nil {
			t.Errorf("%s: %v", r.who, r.err)
		} else if !strings.Contains(r.text, "Clarification**: "+r.who) {
			t.Errorf("%s: the result does not carry its own answer:\n%.600s", r.who, r.text)
		}
	}
}

// resultAnswering calls tasks/result for task id and answers every
// elicitation that arrives on the call's stream with interpretation
// answer; it checks each names task id and returns the result's text.
func (c *rawClient) resultAnswering(id, answer string) (string, error) {
	body := `{"jsonrpc":"2.0","id":"result-1","method":"tasks/result","params":{"taskId":"` + id + `"}}`
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok || strings.TrimSpace(data) == "" {
			continue // not data, or a priming event
		}
		var m struct {
			ID     json.RawMessage
			Method string
			Params struct {
				Meta map[string]taskStatus `json:"_meta"`
			}
			Result json.RawMessage
			Error  json.RawMessage
		}
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			return "", err
		}
		switch {
		case m.Method == "elicitation/create":
			if got := m.Params.Meta[tasks.MetaRelatedTask].TaskID; got != id {
				return "", fmt.Errorf("an elicitation related to task %q reached the owner of %s", got, id)
			}
			answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"interpretation":%q}}}`, m.ID, answer)
			go c.postQuiet(answer)
		case string(m.ID) == `"result-1"` && m.Error != nil:
			return "", fmt.Errorf("tasks/result: %s", m.Error)
		case string(m.ID) == `"result-1"`:
			return string(m.Result), nil
		}
	}
	return "", fmt.Errorf("the stream ended without the result: %v", sc.Err())
}

// postQuiet posts a message from another goroutine than the test's.
func (c *rawClient) postQuiet(body string) {
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// add records data when it is a task status notification.
func (n *notes) add(data string) {
	var m struct {
		Method string
		Params struct {
			taskStatus
			StatusMessage string
		}
	}
	if json.Unmarshal([]byte(data), &m) == nil && m.Method == "notifications/tasks/status" {
		n.mu.Lock()
		n.list = append(n.list, m.Params.TaskID+" "+m.Params.Status)
		n.msgs = append(n.msgs, m.Params.TaskID+" "+m.Params.StatusMessage)
		n.mu.Unlock()
	}
}

func (n *notes) messages() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.msgs)
}

// TestTaskFirstStatusNotLost: a server that sends a task's first status
// before its tools/call result (the TypeScript SDK does) has it reach the
// client, not dropped as a task no one owns: on the call's stream (before
// the result, as the server sent it) or, when it comes after, on the
// session's stream.
func TestTaskFirstStatusNotLost(t *testing.T) {
	t.Parallel()
	url := startTasksGateway(t, "shared")
	c := newRawClient(t, url)
	n := statusNotes(t, c)
	id, events := createTaskEvents(t, c, "first", false)
	for _, e := range events {
		n.add(e)
	}
	waitFor(t, "the task's first status (Gathering sources)", func() bool {
		return slices.Contains(n.messages(), id+" Gathering sources...")
	})
}

// TestTasksListMergesUpstreams: tasks/list gathers the caller's tasks of
// every upstream (two TypeScript servers over stdio), and only them.
func TestTasksListMergesUpstreams(t *testing.T) {
	t.Parallel()
	node, script := testenv.Node(t), testenv.ServerEverything(t)
	script, _ = filepath.EvalSymlinks(script)
	url, _ := startGateway(t, serversJSON(
		fmt.Sprintf(`"one": {"command": %q, "args": [%q, "stdio"], "prefix": "one"}`, node, script),
		fmt.Sprintf(`"two": {"command": %q, "args": [%q, "stdio"], "prefix": "two"}`, node, script)), Options{})
	a, b := newRawClient(t, url), newRawClient(t, url)
	a1, _ := createTaskOf(t, a, "one_simulate-research-query", "a1", true)
	a2, _ := createTaskOf(t, a, "two_simulate-research-query", "a2", true)
	b1, _ := createTaskOf(t, b, "two_simulate-research-query", "b1", true)
	for _, tc := range []struct {
		c    *rawClient
		want []string
	}{{a, []string{a1, a2}}, {b, []string{b1}}} {
		list := decodeInto[struct{ Tasks []taskStatus }](t, must(t)(tc.c.rpc("tasks/list", `{}`)))
		var got []string
		for _, task := range list.Tasks {
			got = append(got, task.TaskID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("tasks/list: %v, want %v (the caller's own, oldest first)", got, tc.want)
		}
	}
}
