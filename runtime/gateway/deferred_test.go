package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/runtime/toolsearch"
)

// scaleParam is one parameter of a generated tool.
type scaleParam struct{ name, typ, desc string }

// scaleTool is a tool of the large test catalogue.
type scaleTool struct {
	name, desc string
	params     []scaleParam
	required   []string
}

// sp is shorthand for a string parameter.
func sp(name, desc string) scaleParam { return scaleParam{name, "string", desc} }

// scaleKnown are the tools with known answers, by server, modelled on the
// GitHub, Jira, Slack, mail, calendar, database, filesystem and weather
// servers people run. Several compete for the same words on purpose.
var scaleKnown = map[string][]scaleTool{
	"devtools": {
		{"echo", "Echo the text back (a visible tool).", []scaleParam{sp("text", "Text to echo")}, nil},
		{"github_create_issue", "Create a new issue in a GitHub repository.", []scaleParam{sp("owner", "Repository owner"), sp("repo", "Repository name"), sp("title", "Issue title"), sp("body", "Issue body content"), {"labels", "array", "Labels to apply to this issue"}}, []string{"owner", "repo", "title"}},
		{"github_get_issue", "Get details of a specific issue in a GitHub repository.", []scaleParam{sp("owner", "Repository owner"), sp("repo", "Repository name"), {"issue_number", "integer", "The number of the issue"}}, []string{"owner", "repo", "issue_number"}},
		{"github_list_issues", "List issues in a GitHub repository with filtering options.", []scaleParam{sp("owner", "Repository owner"), sp("repo", "Repository name"), sp("state", "Filter by state: open, closed or all")}, nil},
		{"github_add_issue_comment", "Add a comment to an existing GitHub issue.", []scaleParam{sp("owner", ""), sp("repo", ""), {"issue_number", "integer", ""}, sp("body", "Comment text")}, nil},
		{"github_create_pull_request", "Create a new pull request in a GitHub repository to propose merging a branch.", []scaleParam{sp("owner", ""), sp("repo", ""), sp("title", "Pull request title"), sp("head", "The branch where your changes are implemented"), sp("base", "The branch you want the changes pulled into")}, []string{"owner", "repo", "title", "head", "base"}},
		{"github_merge_pull_request", "Merge a pull request.", []scaleParam{sp("owner", ""), sp("repo", ""), {"pull_number", "integer", "Pull request number"}, sp("merge_method", "merge, squash or rebase")}, nil},
		{"github_get_file_contents", "Get the contents of a file or directory from a GitHub repository.", []scaleParam{sp("owner", ""), sp("repo", ""), sp("path", "Path to the file or directory"), sp("branch", "Branch to get contents from")}, nil},
		{"github_search_code", "Search for code across GitHub repositories.", []scaleParam{sp("q", "Search query")}, nil},
		{"github_create_branch", "Create a new branch in a GitHub repository.", []scaleParam{sp("owner", ""), sp("repo", ""), sp("branch", "Name for the new branch"), sp("from_branch", "Source branch")}, nil},
		{"jira_create_issue", "Create a new Jira issue (task, bug or story) in a project.", []scaleParam{sp("project_key", "The Jira project key, e.g. PROJ"), sp("summary", "Summary of the issue"), sp("issue_type", "Task, Bug, Story or Epic")}, []string{"project_key", "summary"}},
		{"jira_transition_issue", "Transition a Jira issue to a new status, for example move it to In Progress or Done.", []scaleParam{sp("issue_key", "Jira issue key, e.g. PROJ-123"), sp("transition_id", "ID of the transition to perform")}, []string{"issue_key", "transition_id"}},
		{"jira_search_issues", "Search Jira issues using JQL (Jira Query Language).", []scaleParam{sp("jql", "JQL query string"), {"limit", "integer", "Maximum results"}}, nil},
		{"jira_add_comment", "Add a comment to a Jira issue.", []scaleParam{sp("issue_key", ""), sp("comment", "Comment text in Markdown")}, nil},
	},
	"comms": {
		{"slack_post_message", "Post a new message to a Slack channel.", []scaleParam{sp("channel_id", "The ID of the channel to post to"), sp("text", "The message text to post")}, []string{"channel_id", "text"}},
		{"slack_reply_to_thread", "Reply to a specific message thread in Slack.", []scaleParam{sp("channel_id", ""), sp("thread_ts", "Timestamp of the parent message"), sp("text", "The reply text")}, nil},
		{"slack_add_reaction", "Add a reaction emoji to a Slack message.", []scaleParam{sp("channel_id", ""), sp("timestamp", "Timestamp of the message to react to"), sp("reaction", "Emoji name without colons")}, nil},
		{"slack_list_channels", "List public channels in the Slack workspace.", []scaleParam{{"limit", "integer", "Maximum number of channels"}}, nil},
		{"email_send_message", "Send an email to the given recipients.", []scaleParam{{"to", "array", "Recipient email addresses"}, sp("subject", "Email subject"), sp("body", "Email body")}, []string{"to", "subject"}},
		{"email_search_inbox", "Search the mailbox for emails matching a query.", []scaleParam{sp("query", "Mail search query, e.g. from:alice")}, nil},
		{"calendar_create_event", "Create a calendar event and invite attendees to a meeting.", []scaleParam{sp("title", "Event title"), sp("start", "Start time, RFC 3339"), sp("end", "End time, RFC 3339"), {"attendees", "array", "Emails of the people to invite"}}, []string{"title", "start"}},
		{"calendar_list_events", "List upcoming events in a calendar.", []scaleParam{sp("calendar_id", ""), sp("time_min", "Lower bound of event start")}, nil},
		{"discord_send_message", "Send a message to a Discord text channel.", []scaleParam{sp("channel_id", "Discord channel ID"), sp("content", "Message content")}, nil},
	},
	"data": {
		{"db_run_sql_query", "Run a read-only SQL query against the PostgreSQL database.", []scaleParam{sp("sql", "The SQL statement")}, []string{"sql"}},
		{"db_list_tables", "List all tables in the database.", nil, nil},
		{"db_describe_table", "Get the schema (columns and types) of a database table.", []scaleParam{sp("table_name", "Name of the table")}, nil},
		{"db_drop_table", "Drop a database table and every row in it.", []scaleParam{sp("table_name", "Name of the table")}, nil},
		{"files_read_file", "Read the complete contents of a file from the file system.", []scaleParam{sp("path", "Path of the file")}, []string{"path"}},
		{"files_write_file", "Create a new file or overwrite an existing file with new content.", []scaleParam{sp("path", ""), sp("content", "")}, nil},
		{"files_move_file", "Move or rename files and directories.", []scaleParam{sp("source", ""), sp("destination", "")}, nil},
		{"files_list_directory", "Get a listing of all files and directories in a path.", []scaleParam{sp("path", "")}, nil},
		{"weather_get_forecast", "Get the weather forecast for a location.", []scaleParam{{"latitude", "number", "Latitude of the location"}, {"longitude", "number", "Longitude of the location"}}, []string{"latitude", "longitude"}},
		{"weather_get_alerts", "Get weather alerts for a US state.", []scaleParam{sp("state", "Two-letter US state code")}, nil},
	},
	"misc": {
		{"danger_wipe_bucket", "Delete every object in a storage bucket.", []scaleParam{sp("bucket", "Bucket name")}, []string{"bucket"}},
	},
}

// scaleServers are the upstreams of the large catalogue, in config order.
var scaleServers = []string{"devtools", "comms", "data", "misc"}

// Vocabulary of the distractors. It overlaps the known tools' words
// (create, issue, message, file, channel, event, table...) on purpose.
var (
	scaleVendors = []string{"acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka", "tyrell", "cyberdyne", "soylent", "vandelay", "aperture", "oscorp", "zendesk", "hubspot", "salesforce", "stripe", "shopify", "twilio"}
	scaleSystems = []string{"CRM", "billing system", "ticketing system", "inventory service", "HR portal", "analytics platform", "ERP", "CMS", "helpdesk", "data warehouse", "logistics API", "marketing suite"}
	scaleVerbs   = []string{"create", "get", "list", "update", "delete", "search", "archive", "export", "import", "sync", "approve", "assign", "close", "reopen", "validate", "schedule", "cancel", "refresh", "publish", "send"}
	scaleNouns   = []string{"invoice", "order", "customer", "ticket", "record", "report", "contact", "lead", "shipment", "product", "employee", "campaign", "asset", "contract", "payment", "subscription", "vendor", "document", "note", "task", "event", "message", "file", "issue", "comment", "attachment", "user", "team", "project", "table"}
	scaleAttrs   = []string{"status", "owner", "creation date", "total amount", "priority", "tags", "identifier", "metadata", "history", "due date", "region", "currency"}
)

// scaleCatalogue returns perServer tools for each of scaleServers: the
// known ones, then deterministic distractors.
func scaleCatalogue(perServer int) map[string][]scaleTool {
	rng := rand.New(rand.NewPCG(3, 5))
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	out := make(map[string][]scaleTool, len(scaleServers))
	n := 0
	for _, server := range scaleServers {
		tools := slices.Clone(scaleKnown[server])
		for len(tools) < perServer {
			vendor, verb, noun, attr := pick(scaleVendors), pick(scaleVerbs), pick(scaleNouns), pick(scaleAttrs)
			name := fmt.Sprintf("%s_%s_%s_%s_%d", vendor, verb, noun, strings.ReplaceAll(attr, " ", "_"), n)
			n++
			desc := fmt.Sprintf("%s a %s in the %s %s. Returns the %s %s and %s.", strings.ToUpper(verb[:1])+verb[1:], noun,
				strings.ToUpper(vendor[:1])+vendor[1:], pick(scaleSystems), noun, pick(scaleAttrs), pick(scaleAttrs))
			params := []scaleParam{sp(noun+"_id", "Identifier of the "+noun), {"limit", "integer", "Maximum number of results"}}
			if rng.IntN(3) == 0 {
				params = append(params, sp(strings.ReplaceAll(pick(scaleAttrs), " ", "_"), "Only "+pick(scaleNouns)+" records with this value"))
			}
			tools = append(tools, scaleTool{name: name, desc: desc, params: params, required: []string{noun + "_id"}})
		}
		out[server] = tools
	}
	return out
}

// schema is the tool's inputSchema.
func (st scaleTool) schema() map[string]any {
	props := map[string]any{}
	for _, p := range st.params {
		prop := map[string]any{"type": p.typ}
		if p.typ == "array" {
			prop["items"] = map[string]any{"type": "string"}
		}
		if p.desc != "" {
			prop["description"] = p.desc
		}
		props[p.name] = prop
	}
	s := map[string]any{"type": "object", "properties": props}
	if len(st.required) > 0 {
		s["required"] = st.required
	}
	return s
}

// scaleCalls counts the calls each upstream tool received, by
// "server/tool".
type scaleCalls struct{ m sync.Map }

func (c *scaleCalls) add(key string) {
	v, _ := c.m.LoadOrStore(key, new(atomic.Int32))
	v.(*atomic.Int32).Add(1)
}

func (c *scaleCalls) count(key string) int {
	if v, ok := c.m.Load(key); ok {
		return int(v.(*atomic.Int32).Load())
	}
	return 0
}

// scaleUpstream serves tools with a go-sdk server; every tool answers
// "<server>/<tool> <arguments>".
func scaleUpstream(t testing.TB, server string, tools []scaleTool, calls *scaleCalls) string {
	s := mcp.NewServer(&mcp.Implementation{Name: server, Version: "1"}, nil)
	for _, st := range tools {
		name := st.name
		s.AddTool(&mcp.Tool{Name: name, Description: st.desc, InputSchema: st.schema()}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.add(server + "/" + name)
			args := string(req.Params.Arguments)
			if args == "" {
				args = "{}"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: server + "/" + name + " " + args}}}, nil
		})
	}
	return serveMCP(t, s)
}

// scaleEnv is a gateway in front of the large catalogue.
type scaleEnv struct {
	url   string
	g     *Gateway
	calls *scaleCalls
	total int
}

// scaleRules defers every tool but echo, and asks for approval of danger_*.
const scaleRules = `"tool_rules": [{"visibility": "deferred"}, {"tools": ["echo"], "visibility": "visible"}, {"tools": ["danger_*"], "require_approval": true}]`

// startScaleGateway serves perServer tools from each of four go-sdk
// upstreams behind a gateway configured with scaleRules and extra (more
// top-level config members, or "").
func startScaleGateway(t testing.TB, perServer int, extra string) *scaleEnv {
	t.Helper()
	env := &scaleEnv{calls: &scaleCalls{}}
	var entries []string
	for server, tools := range scaleCatalogue(perServer) {
		env.total += len(tools)
		entries = append(entries, fmt.Sprintf(`%q: {"url": %q}`, server, scaleUpstream(t, server, tools, env.calls)))
	}
	slices.Sort(entries)
	cfg := fmt.Sprintf(`{"mcpServers": {%s}, %s%s}`, strings.Join(entries, ","), scaleRules, extra)
	env.url, env.g = startGateway(t, cfg, Options{})
	waitFor(t, "the whole catalogue", func() bool { return len(env.g.route.catalogue().Lists[kindTools]) == env.total })
	return env
}

// searchResult is the structuredContent of tool_search.
type searchResultJSON struct {
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
}

// toolSearch calls tool_search and returns the names it found, best first,
// checking that text and structured content agree.
func toolSearch(t testing.TB, cs *mcp.ClientSession, query string, limit int) ([]string, searchResultJSON) {
	t.Helper()
	args := map[string]any{"query": query}
	if limit > 0 {
		args["limit"] = limit
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: toolSearchName, Arguments: args})
	if err != nil {
		t.Fatalf("tool_search %q: %v", query, err)
	}
	if res.IsError {
		t.Fatalf("tool_search %q: tool error %q", query, textOf(res))
	}
	var sr searchResultJSON
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &sr); err != nil {
		t.Fatalf("tool_search %q: structuredContent %s: %v", query, b, err)
	}
	names := make([]string, len(sr.Tools))
	text := textOf(res)
	for i, tool := range sr.Tools {
		names[i] = tool.Name
		if !strings.Contains(text, fmt.Sprintf("%d. %s\n", i+1, tool.Name)) {
			t.Errorf("tool_search %q: the text does not list %s as match %d: %q", query, tool.Name, i+1, text)
		}
	}
	return names, sr
}

func TestDeferredToolSearch10k(t *testing.T) {
	t.Parallel()
	env := startScaleGateway(t, 2500, `, "access": [{"identities": ["anonymous"], "deny_tools": ["db_drop_table"]}]`)
	if env.total != 10000 {
		t.Fatalf("catalogue of %d tools, want 10000", env.total)
	}
	cs := connect(t, env.url, nil)

	t.Run("list", func(t *testing.T) {
		names := toolNames(t, cs)
		slices.Sort(names)
		if want := []string{"echo", toolInvokeName, toolSearchName}; !slices.Equal(names, want) {
			t.Fatalf("tools/list = %v, want %v (deferred tools left out)", names, want)
		}
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range res.Tools {
			if tool.Name == toolSearchName && !strings.Contains(tool.Description, "9998 more tools") {
				t.Errorf("tool_search description does not count the deferred tools: %q", tool.Description)
			}
		}
	})

	t.Run("ranking", func(t *testing.T) {
		for _, c := range []struct {
			query string
			want  string
			top   int // want must be among the first top matches
		}{
			{"create a github issue", "github_create_issue", 1},
			{"merge pull request", "github_merge_pull_request", 1},
			{"open a pull request to merge my branch", "github_create_pull_request", 3},
			{"move a jira issue to done", "jira_transition_issue", 3},
			{"JQL", "jira_search_issues", 1},
			{"post a message to a slack channel", "slack_post_message", 3},
			{"react with an emoji", "slack_add_reaction", 1},
			{"send an email", "email_send_message", 3},
			{"invite people to a calendar meeting", "calendar_create_event", 1},
			{"weather forecast", "weather_get_forecast", 1},
			{"run a SQL query", "db_run_sql_query", 1},
			{"list database tables", "db_list_tables", 3},
			{"read a file", "files_read_file", 3},
			{"rename a file", "files_move_file", 3},
			{"files_list_directory", "files_list_directory", 1},
		} {
			names, _ := toolSearch(t, cs, c.query, 10)
			if i := slices.Index(names, c.want); i < 0 || i >= c.top {
				t.Errorf("tool_search %q: %s at rank %d, want within the first %d; got %q", c.query, c.want, i+1, c.top, names)
			}
		}
	})

	t.Run("result", func(t *testing.T) {
		names, sr := toolSearch(t, cs, "weather", 0)
		if len(names) == 0 || len(names) > toolsearch.DefaultLimit {
			t.Fatalf("tool_search weather: %d matches, want 1..%d", len(names), toolsearch.DefaultLimit)
		}
		for _, tool := range sr.Tools {
			if tool.Name == "weather_get_forecast" {
				if tool.Description != "Get the weather forecast for a location." || !strings.Contains(string(tool.InputSchema), `"latitude"`) {
					t.Errorf("match %+v lacks the description or inputSchema", tool)
				}
			}
		}
		if names, _ := toolSearch(t, cs, "issue", 200); len(names) != toolsearch.MaxLimit {
			t.Errorf("limit 200: %d matches, want the maximum %d", len(names), toolsearch.MaxLimit)
		}
		if names, _ := toolSearch(t, cs, "xyzzy plugh", 0); len(names) != 0 {
			t.Errorf("nonsense query matched %v", names)
		}
		for _, args := range []map[string]any{{}, {"query": ""}, {"query": 3}, {"query": "x", "limit": 0}, {"query": "x", "limit": 1.5}, {"query": "x", "limit": -1e300}, {"query": "x", "limit": "5"}, {"query": []any{"x"}}} {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: toolSearchName, Arguments: args})
			if err != nil || !res.IsError || !strings.Contains(textOf(res), "tool_search") {
				t.Errorf("tool_search %v: err %v, result %+v: want a tool error", args, err, res)
			}
		}
		if names, _ := toolSearch(t, cs, "echo", 0); slices.Contains(names, "echo") {
			t.Errorf("visible tool echo is searched: %v", names)
		}
	})

	t.Run("invoke", func(t *testing.T) {
		args := map[string]any{"latitude": 52.5, "longitude": 13.4}
		before := env.calls.count("data/weather_get_forecast")
		txt, isErr := callText(t, cs, toolInvokeName, map[string]any{"name": "weather_get_forecast", "arguments": args})
		if isErr || !strings.HasPrefix(txt, "data/weather_get_forecast ") || !strings.Contains(txt, `"latitude":52.5`) {
			t.Errorf("tool_invoke weather_get_forecast = %q (isError %v)", txt, isErr)
		}
		// Deferred tools stay callable by name.
		txt, isErr = callText(t, cs, "weather_get_forecast", args)
		if isErr || !strings.HasPrefix(txt, "data/weather_get_forecast ") {
			t.Errorf("direct weather_get_forecast = %q (isError %v)", txt, isErr)
		}
		if got := env.calls.count("data/weather_get_forecast") - before; got != 2 {
			t.Errorf("upstream got %d calls, want 2", got)
		}
		// Arguments as a JSON string, as some models write them.
		if txt, isErr := callText(t, cs, toolInvokeName, map[string]any{"name": "github_get_issue", "arguments": `{"owner":"o","repo":"r","issue_number":7}`}); isErr || !strings.Contains(txt, `"issue_number":7`) {
			t.Errorf("tool_invoke with string arguments = %q (isError %v)", txt, isErr)
		}
		// The chain applies: arguments are validated against the schema.
		before = env.calls.count("data/files_read_file")
		txt, isErr = callText(t, cs, toolInvokeName, map[string]any{"name": "files_read_file", "arguments": map[string]any{"path": 42}})
		if !isErr || !strings.Contains(txt, "invalid arguments") || env.calls.count("data/files_read_file") != before {
			t.Errorf("tool_invoke with bad arguments = %q (isError %v); the upstream must not be reached", txt, isErr)
		}
		for _, c := range []struct {
			args map[string]any
			want string
		}{
			{map[string]any{"name": "no_such_tool"}, `"no_such_tool"`},
			{map[string]any{}, `needs "name"`},
			{map[string]any{"name": toolSearchName}, "gateway's own tools"},
			{map[string]any{"name": "echo", "arguments": []any{1}}, "must be a JSON object"},
		} {
			if txt, isErr := callText(t, cs, toolInvokeName, c.args); !isErr || !strings.Contains(txt, c.want) {
				t.Errorf("tool_invoke %v = %q (isError %v), want a tool error containing %s", c.args, txt, isErr, c.want)
			}
		}
		// A visible tool through tool_invoke.
		if txt, _ := callText(t, cs, toolInvokeName, map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}}); txt != `devtools/echo {"text":"hi"}` {
			t.Errorf("tool_invoke echo = %q", txt)
		}
	})

	t.Run("access", func(t *testing.T) {
		names, _ := toolSearch(t, cs, "drop database table db_drop_table", 50)
		if slices.Contains(names, "db_drop_table") {
			t.Errorf("a denied tool was found: %v", names)
		}
		if !slices.Contains(names, "db_describe_table") {
			t.Errorf("the search found none of the allowed table tools: %v", names)
		}
		txt, isErr := callText(t, cs, toolInvokeName, map[string]any{"name": "db_drop_table", "arguments": map[string]any{"table_name": "users"}})
		if !isErr || !strings.Contains(txt, `"db_drop_table"`) {
			t.Errorf("tool_invoke of a denied tool = %q (isError %v)", txt, isErr)
		}
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "db_drop_table"}); err == nil {
			t.Error("a denied tool could be called directly")
		}
		if n := env.calls.count("data/db_drop_table"); n != 0 {
			t.Errorf("the denied tool reached the upstream %d times", n)
		}
	})

	t.Run("approval", func(t *testing.T) {
		for _, c := range []struct {
			action  string
			reached bool
		}{{"accept", true}, {"decline", false}} {
			var asked atomic.Value
			client := connect(t, env.url, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked.Store(req.Params.Message)
				return &mcp.ElicitResult{Action: c.action, Content: map[string]any{"approve": true}}, nil
			}})
			before := env.calls.count("misc/danger_wipe_bucket")
			txt, isErr := callText(t, client, toolInvokeName, map[string]any{"name": "danger_wipe_bucket", "arguments": map[string]any{"bucket": "logs"}})
			msg, _ := asked.Load().(string)
			if !strings.Contains(msg, "danger_wipe_bucket") || !strings.Contains(msg, `"misc"`) {
				t.Errorf("%s: the person was asked %q", c.action, msg)
			}
			reached := env.calls.count("misc/danger_wipe_bucket") > before
			if reached != c.reached || isErr == c.reached {
				t.Errorf("%s: upstream reached %v, result %q (isError %v)", c.action, reached, txt, isErr)
			}
		}
	})
}

// TestDeferredIndexShared: sessions with the same deferred tools share one
// search index, and a catalogue with the same content keeps it.
func TestDeferredIndexShared(t *testing.T) {
	env := startScaleGateway(t, 300, "")
	a, b := connect(t, env.url, nil), connect(t, env.url, nil)
	toolSearch(t, a, "weather forecast", 0)
	toolSearch(t, b, "weather forecast", 0)
	var views []*catalogue
	for _, s := range env.g.route.allSessions() {
		s.mu.Lock()
		if s.view != nil {
			views = append(views, s.view.cat)
		}
		s.mu.Unlock()
	}
	if len(views) != 2 || views[0] == views[1] || len(views[0].Deferred) != env.total-1 {
		t.Fatalf("want two distinct session views, got %d", len(views))
	}
	if toolsearch.Shared(deferredTools(views[0].Deferred)) != toolsearch.Shared(deferredTools(views[1].Deferred)) {
		t.Error("two sessions with the same deferred tools built two indexes")
	}
	// Same content under other item pointers (a rebuilt snapshot): same index.
	clone := make([]*item, len(views[0].Deferred))
	for i, it := range views[0].Deferred {
		c := *it
		clone[i] = &c
	}
	if toolsearch.Shared(deferredTools(clone)) != toolsearch.Shared(deferredTools(views[0].Deferred)) {
		t.Error("a catalogue with the same tools did not reuse the index")
	}
	// Changed content: another index.
	clone[0] = &item{Exposed: clone[0].Exposed, Raw: json.RawMessage(`{"name":"changed"}`)}
	if toolsearch.Shared(deferredTools(clone)) == toolsearch.Shared(deferredTools(views[0].Deferred)) {
		t.Error("a changed tool definition reused the old index")
	}
}

// TestDeferredInvokeRateLimit: a tool's own rate limit holds when it is
// called through tool_invoke over streamable HTTP, where admission charged
// the request to tool_invoke.
func TestDeferredInvokeRateLimit(t *testing.T) {
	t.Parallel()
	calls := &scaleCalls{}
	up := scaleUpstream(t, "data", scaleKnown["data"], calls)
	url, _ := startGateway(t, fmt.Sprintf(`{"mcpServers": {"data": {"url": %q}},
		"tool_rules": [{"visibility": "deferred"}, {"tools": ["weather_get_forecast"], "rate": {"rps": 0.001, "burst": 1}}]}`, up), Options{})
	cs := connect(t, url, nil)
	args := map[string]any{"name": "weather_get_forecast", "arguments": map[string]any{"latitude": 1, "longitude": 2}}
	if txt, isErr := callText(t, cs, toolInvokeName, args); isErr {
		t.Fatalf("first call: %q", txt)
	}
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: toolInvokeName, Arguments: args}); err == nil || !strings.Contains(err.Error(), "rate limit") {
		t.Errorf("second call through tool_invoke: %v %+v, want a rate limit error", err, res)
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "weather_get_forecast", Arguments: args["arguments"]}); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Errorf("a direct call after it: %v, want HTTP 429 from admission", err)
	}
	if n := calls.count("data/weather_get_forecast"); n != 1 {
		t.Errorf("the upstream got %d calls, want 1", n)
	}
	// Other tools are not limited.
	if txt, isErr := callText(t, cs, toolInvokeName, map[string]any{"name": "db_list_tables"}); isErr {
		t.Errorf("db_list_tables: %q", txt)
	}
}
