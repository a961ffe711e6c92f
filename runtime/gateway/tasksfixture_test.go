package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/testenv"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/runtime/tasks"
)

// taskFixture is a server of the tasks extension (SEP-2663) with the
// fixtures the conformance suite's tasks scenarios call: go-sdk v1.8.0
// serves discovery and the tool list; the task surface (which go-sdk
// lacks) is answered in front of it.
type taskFixture struct {
	mu    sync.Mutex
	n     int
	tasks map[string]*fixtureTask
}

type fixtureTask struct {
	status  string
	result  string // JSON, once completed
	errJSON string // JSON, once failed
	pending map[string]string
	done    time.Time // completes by itself then (zero: never)
	final   string    // result once done or answered
}

func (f *taskFixture) handler() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "tasks-fixture", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Extensions: map[string]any{tasks.Extension: map[string]any{}}}})
	for _, name := range []string{"slow_compute", "failing_job", "protocol_error_job", "confirm_delete", "multi_input", "test_tool_with_task"} {
		mcp.AddTool(srv, &mcp.Tool{Name: name}, func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " ran synchronously"}}}, nil, nil
		})
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "greet"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Name string `json:"name"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Hello, " + in.Name + "!"}}}, nil, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	f.tasks = map[string]*fixtureTask{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage
			Method string
			Params json.RawMessage
		}
		json.Unmarshal(body, &req)
		status, res, rerr, ok := f.answer(r.Header, req.Method, req.Params)
		if !ok {
			r.Body = io.NopCloser(bytes.NewReader(body))
			sdk.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if rerr != "" {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":%s}`, req.ID, rerr)
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, res)
	})
}

const fixtureMissingExt = `{"code":-32021,"message":"this needs the tasks extension","data":{"requiredCapabilities":{"extensions":{"` + tasks.Extension + `":{}}}}}`

// answer answers the task surface: ok false leaves the request to go-sdk.
func (f *taskFixture) answer(h http.Header, method string, params json.RawMessage) (status int, res, rerr string, ok bool) {
	meta, _, _ := wire.Field(params, "_meta")
	caps, _, _ := wire.Field(meta, metaClientCapabilities)
	declared := tasks.DeclaresExtension(caps)
	switch method {
	case "tools/call":
		name, _ := wire.String(params, "name")
		if name == "greet" || h.Get("Mcp-Method") != "" && h.Get("Mcp-Method") != method {
			return 0, "", "", false
		}
		if name == "failing_job" && !declared {
			return 200, "", fixtureMissingExt, true
		}
		if name == "test_tool_with_task" {
			return f.mrtr(params, declared)
		}
		if !declared || name == "" {
			return 0, "", "", false
		}
		args, _, _ := wire.Field(params, "arguments")
		return 200, f.create(name, args), "", true
	case "tasks/get", "tasks/update", "tasks/cancel":
		if !declared {
			return 200, "", fixtureMissingExt, true
		}
		id, _ := wire.String(params, "taskId")
		if got := h.Get("Mcp-Name"); got != "" && got != id {
			return 400, "", `{"code":-32020,"message":"Mcp-Name does not match params.taskId"}`, true
		}
		return f.taskMethod(method, id, params)
	}
	return 0, "", "", false
}

func (f *taskFixture) create(name string, args json.RawMessage) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	id := "fx-" + strconv.Itoa(f.n)
	t := &fixtureTask{status: "working"}
	switch name {
	case "slow_compute":
		secs, _, _ := wire.Field(args, "seconds")
		n, _ := strconv.ParseFloat(string(secs), 64)
		label, _ := wire.String(args, "label")
		t.done, t.final = time.Now().Add(time.Duration(n*float64(time.Second))), `{"content":[{"type":"text","text":"computed `+label+`"}]}`
	case "failing_job":
		t.done, t.final = time.Now().Add(time.Second), `{"content":[{"type":"text","text":"the job failed"}],"isError":true}`
	case "protocol_error_job":
		t.done, t.final = time.Now().Add(200*time.Millisecond), "error"
	case "confirm_delete":
		t.status, t.pending = "input_required", map[string]string{"confirm": fixtureElicit("Delete the file?")}
		t.final = `{"content":[{"type":"text","text":"deleted"}]}`
	case "multi_input":
		t.status, t.pending = "input_required", map[string]string{"first": fixtureElicit("First?"), "second": fixtureElicit("Second?")}
		t.final = `{"content":[{"type":"text","text":"both answered"}]}`
	}
	f.tasks[id] = t
	return fixtureEnvelope(id, "task", t.status) + "}"
}

func fixtureElicit(msg string) string {
	return `{"method":"elicitation/create","params":{"mode":"form","message":"` + msg + `","requestedSchema":{"type":"object","properties":{"confirm":{"type":"boolean"}}}}}`
}

func fixtureEnvelope(id, resultType, status string) string {
	return `{"resultType":"` + resultType + `","taskId":"` + id + `","status":"` + status +
		`","createdAt":"2026-12-01T00:00:00Z","lastUpdatedAt":"2026-12-01T00:00:00Z","ttlMs":600000,"pollIntervalMs":100`
}

// taskMethod answers tasks/get, tasks/update and tasks/cancel.
func (f *taskFixture) taskMethod(method, id string, params json.RawMessage) (int, string, string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tasks[id]
	if t == nil {
		return 200, "", `{"code":-32602,"message":"unknown task"}`, true
	}
	switch method {
	case "tasks/cancel":
		if t.status == "working" || t.status == "input_required" {
			t.status = "cancelled"
		}
		return 200, `{"resultType":"complete"}`, "", true
	case "tasks/update":
		responses, _, _ := wire.Field(params, "inputResponses")
		for k := range t.pending {
			if _, ok, _ := wire.Field(responses, k); ok {
				delete(t.pending, k)
			}
		}
		if t.status == "input_required" && len(t.pending) == 0 {
			t.status, t.result = "completed", t.final
		}
		return 200, `{"resultType":"complete"}`, "", true
	}
	if t.status == "working" && !t.done.IsZero() && time.Now().After(t.done) {
		if t.final == "error" {
			t.status, t.errJSON = "failed", `{"code":-32603,"message":"the job crashed"}`
		} else {
			t.status, t.result = "completed", t.final
		}
	}
	res := fixtureEnvelope(id, "complete", t.status)
	switch {
	case t.status == "completed":
		res += `,"result":` + t.result
	case t.status == "failed":
		res += `,"error":` + t.errJSON
	case t.status == "input_required":
		out := map[string]json.RawMessage{}
		for k, v := range t.pending {
			out[k] = json.RawMessage(v)
		}
		b, _ := json.Marshal(out)
		res += `,"inputRequests":` + string(b)
	}
	return 200, res + "}", "", true
}

// mrtr answers test_tool_with_task: round 1 asks for user_name
// (input_required), round 2 creates a task whose result names it.
func (f *taskFixture) mrtr(params json.RawMessage, declared bool) (int, string, string, bool) {
	if !declared {
		return 200, "", fixtureMissingExt, true
	}
	responses, ok, _ := wire.Field(params, "inputResponses")
	if !ok {
		return 200, `{"resultType":"input_required","inputRequests":{"user_name":` + fixtureElicit("Your name?") + `},"requestState":"round-1"}`, "", true
	}
	answer, _, _ := wire.Field(responses, "user_name")
	content, _, _ := wire.Field(answer, "content")
	name, _ := wire.String(content, "name")
	if name == "" {
		name = string(content)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	id := "fx-" + strconv.Itoa(f.n)
	text, _ := json.Marshal("hello " + name)
	f.tasks[id] = &fixtureTask{status: "working", done: time.Now(), final: `{"content":[{"type":"text","text":` + string(text) + `}]}`}
	return 200, fixtureEnvelope(id, "task", "working") + "}", "", true
}

// taskScenarios are the conformance suite's tasks scenarios (0.2.0-alpha.12).
var taskScenarios = []string{"tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields", "tasks-request-state-removal",
	"tasks-mrtr-input", "tasks-request-headers", "tasks-dispatch-and-envelope", "tasks-status-notifications",
	"tasks-required-task-error", "tasks-mrtr-composition"}

// ansiRE matches the colours the suite prints even with NO_COLOR.
var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*m")

// checkRE matches one check line of the suite's output.
var checkRE = regexp.MustCompile(`\[([a-z0-9-]+)\s*\] (SUCCESS|FAILURE|WARNING|SKIPPED|INFO)`)

// runTaskScenarios runs the tasks scenarios against url and returns each
// check's status, and the passed and failed counts.
// It may run on a goroutine of its own: it does not fail t.
func runTaskScenarios(t *testing.T, node, suite, url string) (checks map[string]string, passed, failed int) {
	checks = map[string]string{}
	// The scenarios share nothing (a task is found by its own id) and
	// spend their time waiting on the fixture's slow tasks: run a few
	// at a time.
	var mu sync.Mutex
	var wg sync.WaitGroup
	turns := make(chan struct{}, 4)
	for _, sc := range taskScenarios {
		dir := t.TempDir()
		wg.Go(func() {
			turns <- struct{}{}
			defer func() { <-turns }()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, suite, "server", "--url", url, "--scenario", sc)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "NO_COLOR=1")
			out, _ := cmd.CombinedOutput()
			out = ansiRE.ReplaceAll(out, nil)
			mu.Lock()
			defer mu.Unlock()
			for _, m := range checkRE.FindAllStringSubmatch(string(out), -1) {
				checks[sc+"/"+m[1]] = m[2]
				switch m[2] {
				case "SUCCESS":
					passed++
				case "FAILURE":
					failed++
				}
			}
		})
	}
	wg.Wait()
	return checks, passed, failed
}

// TestTaskScenariosThroughGateway runs the conformance suite's tasks
// scenarios (not scored) against a server of the tasks extension directly
// and through the gateway: every check has the same outcome both ways.
func TestTaskScenariosThroughGateway(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("conformance suite: skipped in -short mode")
	}
	f := &taskFixture{}
	direct := serveHandler(t, f.handler())
	through, _ := startGateway(t, serversJSON(fmt.Sprintf(`"fx": {"url": %q}`, direct)), Options{})
	// Both runs at once: the scenarios spend most of their time waiting
	// on the fixture's slow tasks.
	var want, got map[string]string
	var dp, df, tp, tf int
	var wg sync.WaitGroup
	node, suite := testenv.Node(t), testenv.ConformanceNext(t)
	wg.Go(func() { want, dp, df = runTaskScenarios(t, node, suite, direct) })
	got, tp, tf = runTaskScenarios(t, node, suite, through)
	wg.Wait()
	t.Logf("tasks scenarios: direct %d passed, %d failed; through edge-mcp %d passed, %d failed", dp, df, tp, tf)
	for check, status := range want {
		if got[check] != status {
			t.Errorf("%s: %s through edge-mcp, %s directly", check, got[check], status)
		}
	}
	for check, status := range got {
		if _, ok := want[check]; !ok {
			t.Errorf("%s: %s through edge-mcp only", check, status)
		}
	}
}
