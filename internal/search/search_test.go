package search

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestTokenize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"getWeatherForecast", []string{"get", "weather", "get_weather", "forecast", "weather_forecast", "getweatherforecast"}},
		{"github__create_issue", []string{"github", "creat", "github_creat", "issu", "creat_issu", "github__create_issue"}},
		{"read-file", []string{"read", "fil", "read_fil", "read-file"}},
		{"fs.read_file", []string{"fs", "read", "fs_read", "fil", "read_fil", "fs.read_file"}},
		{"HTTPServer getAPIKey", []string{"http", "server", "http_server", "httpserver", "get", "server_get", "api", "get_api", "key", "api_key", "getapikey"}},
		{"s3Bucket v2", []string{"s3", "bucket", "s3_bucket", "s3bucket", "v2", "bucket_v2"}},
		{"Send a message to the Slack channel.", []string{"send", "messag", "send_messag", "slack", "messag_slack", "channel", "slack_channel"}},
		{"add_to_cart", []string{"add", "cart", "add_cart", "add_to_cart"}},
		{"Lists the user's issues", []string{"list", "user", "list_user", "issu", "user_issu"}},
		{"creating created creates", []string{"creat", "creat", "creat_creat", "creat", "creat_creat"}},
		{"entries boxes addresses status", []string{"entry", "box", "entry_box", "address", "box_address", "status", "address_status"}},
		{"redis, running; stopped string", []string{"redis", "run", "redis_run", "stop", "run_stop", "string", "stop_string"}},
		{"Größe_berechnen ÜBERSICHT", []string{"größe", "berechnen", "größe_berechnen", "größe_berechnen", "übersicht", "berechnen_übersicht"}},
		{"天気予報を取得 café", []string{"天気予報を取得", "café", "天気予報を取得_café"}},
		{"  --__..  ", nil},
		{"the and of", nil},
		{"", nil},
		{"e.g. 3.14", []string{"e", "g", "e_g", "e.g", "3", "g_3", "14", "3_14", "3.14"}},
	} {
		t.Run(c.in, func(t *testing.T) {
			if got := tokenize(c.in); !slices.Equal(got, c.want) {
				t.Errorf("tokenize(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestStem(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"issues", "issu"}, {"issue", "issu"}, {"files", "fil"}, {"file", "fil"},
		{"queries", "query"}, {"matches", "match"}, {"pushes", "push"}, {"classes", "class"},
		{"apis", "api"}, {"analysis", "analysis"}, {"bus", "bus"}, {"listing", "list"},
		{"logging", "log"}, {"added", "add"}, {"called", "call"}, {"needed", "need"},
		{"speed", "speed"}, {"free", "free"}, {"thing", "thing"}, {"trying", "try"},
		{"use", "use"}, {"naïve", "naïve"}, {"x", "x"}, {"s3", "s3"},
	} {
		if got := string(stem([]byte(c.in))); got != c.want {
			t.Errorf("stem(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// testIndex is the realistic catalogue with 5,000 distractors, built once.
var testIndex = sync.OnceValue(func() *Index { return Build(catalogue(5000)) })

func keys(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Key
	}
	return out
}

func TestSearchCatalogue(t *testing.T) {
	ix := testIndex()
	for _, c := range []struct {
		query string
		want  string
		top   int // want must be among the first top hits
	}{
		{"create a github issue", "github_create_issue", 1},
		{"open a new issue on GitHub", "github_create_issue", 1}, // "open" is not in its text
		{"create jira issue", "jira_create_issue", 1},
		{"send message to slack channel", "slack_post_message", 3},
		{"post to slack", "slack_post_message", 1},
		{"send a discord message", "discord_sendMessage", 1},
		{"read file contents", "fs_read_file", 1},
		{"read multiple files", "fs_read_multiple_files", 1},
		{"write a file", "fs_write_file", 1},
		{"rename a file", "fs_move_file", 1},
		{"overwrite file", "fs_write_file", 1},
		{"weather forecast", "weather_get_forecast", 1},
		{"current weather conditions in a city", "weather_getCurrentConditions", 1},
		{"list tables in the database", "sqlite_list_tables", 1},
		{"run SQL select query", "sqlite_read_query", 3},
		{"merge pull request", "github_merge_pull_request", 1},
		{"JQL", "jira_search", 1},
		{"react with an emoji", "slack_add_reaction", 1},
		{"email recipients", "gmail_send_email", 1},
	} {
		t.Run(c.query, func(t *testing.T) {
			hits := ix.Search(c.query, 10)
			if i := slices.Index(keys(hits), c.want); i < 0 || i >= c.top {
				t.Errorf("Search(%q): %s at rank %d, want within top %d; got %q", c.query, c.want, i+1, c.top, keys(hits))
			}
		})
	}
}

// TestExactName checks that every real tool is the first hit for its exposed
// name, and for its exposed name split into words.
func TestExactName(t *testing.T) {
	ix := testIndex()
	for _, rt := range realTools {
		t.Run(rt.key, func(t *testing.T) {
			if hits := ix.Search(rt.key, 3); len(hits) == 0 || hits[0].Key != rt.key {
				t.Errorf("Search(%q) = %q, want it first", rt.key, keys(hits))
			}
		})
	}
	// A synthetic tool, so the exact name must beat thousands of near twins.
	synth := synthTools(200)[123].key
	if hits := ix.Search(synth, 3); len(hits) == 0 || hits[0].Key != synth {
		t.Errorf("Search(%q) = %q, want it first", synth, keys(hits))
	}
	// The upstream name finds the namespaced tool through its tail term.
	if hits := ix.Search("read_multiple_files", 1); len(hits) == 0 || hits[0].Key != "fs_read_multiple_files" {
		t.Errorf("Search(read_multiple_files) = %q", keys(hits))
	}
}

func TestCaseAndSeparatorSplitting(t *testing.T) {
	ix := testIndex()
	for _, c := range []struct{ query, want string }{
		{"get current conditions", "weather_getCurrentConditions"},
		{"get_current_conditions", "weather_getCurrentConditions"},
		{"GetCurrentConditions", "weather_getCurrentConditions"},
		{"directoryTree", "fs_directory_tree"},
		{"directory-tree", "fs_directory_tree"},
		{"slack.add.reaction", "slack_add_reaction"},
		{"send-message", "discord_sendMessage"},
	} {
		t.Run(c.query, func(t *testing.T) {
			if hits := ix.Search(c.query, 3); len(hits) == 0 || hits[0].Key != c.want {
				t.Errorf("Search(%q) = %q, want %s first", c.query, keys(hits), c.want)
			}
		})
	}
}

func TestSearchEdgeCases(t *testing.T) {
	ix := testIndex()
	for _, q := range []string{"", "   ", "the of and to", "¿¡!?", "zzzunknownzzz"} {
		if hits := ix.Search(q, 10); hits != nil {
			t.Errorf("Search(%q) = %q, want no hits", q, keys(hits))
		}
	}
	if hits := ix.Search("issue", 0); hits != nil {
		t.Errorf("limit 0: got %d hits", len(hits))
	}
	if hits := ix.Search("issue", -1); hits != nil {
		t.Errorf("limit -1: got %d hits", len(hits))
	}
	if hits := Build(nil).Search("issue", 5); hits != nil {
		t.Errorf("empty index: got %q", keys(hits))
	}
	if n := Build(nil).Len(); n != 0 {
		t.Errorf("empty index Len = %d", n)
	}
	if n := ix.Len(); n != len(realTools)+5000 {
		t.Errorf("Len = %d, want %d", n, len(realTools)+5000)
	}
}

// TestTopK checks the heap selection against the full ranking: for every
// limit, the hits are exactly the first limit of the full, sorted list.
func TestTopK(t *testing.T) {
	ix := testIndex()
	for _, q := range []string{"create issue", "file", "message channel", "get customer status"} {
		all := ix.Search(q, ix.Len())
		if len(all) < 20 {
			t.Fatalf("Search(%q) found only %d documents", q, len(all))
		}
		for i := 1; i < len(all); i++ {
			a, b := all[i-1], all[i]
			if a.Score < b.Score || a.Score == b.Score && a.Key >= b.Key {
				t.Fatalf("Search(%q): hit %d %v ranks before %v", q, i, a, b)
			}
		}
		for _, limit := range []int{1, 2, 3, 10, 17, 100} {
			got := ix.Search(q, limit)
			if want := all[:min(limit, len(all))]; !slices.Equal(got, want) {
				t.Errorf("Search(%q, %d) = %v, want %v", q, limit, got, want)
			}
		}
	}
}

// TestDeterministic checks that ties are broken by key, whatever the order
// the documents were indexed in.
func TestDeterministic(t *testing.T) {
	docs := catalogue(2000)
	for i := range 5 {
		// Identical documents under different keys tie exactly.
		docs = append(docs, Doc{Key: fmt.Sprintf("twin_%d", 4-i), Name: "frobnicate_widget", Description: "Frobnicate a widget."})
	}
	reversed := slices.Clone(docs)
	slices.Reverse(reversed)
	a, b := Build(docs), Build(reversed)
	for _, q := range []string{"frobnicate", "create issue", "list files in a directory", "send"} {
		ha, hb := a.Search(q, 50), b.Search(q, 50)
		if !slices.Equal(ha, hb) {
			t.Errorf("Search(%q) depends on document order:\n%v\n%v", q, ha, hb)
		}
	}
	want := []string{"twin_0", "twin_1", "twin_2", "twin_3", "twin_4"}
	if got := keys(a.Search("frobnicate widget", 10)); !slices.Equal(got, want) {
		t.Errorf("ties: got %q, want %q", got, want)
	}
}

func TestFieldWeights(t *testing.T) {
	ix := Build([]Doc{
		{Key: "in_desc", Name: "alpha", Description: "Works with invoices."},
		{Key: "in_params", Name: "beta", Params: []string{"invoice_id", "The identifier"}},
		{Key: "in_name", Name: "invoice", Description: "Does things."},
	})
	if got, want := keys(ix.Search("invoice", 3)), []string{"in_name", "in_params", "in_desc"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestConcurrentSearch(t *testing.T) {
	ix := testIndex()
	queries := []string{"create a github issue", "read file contents", "send message to slack channel", "weather", "customer invoice"}
	want := make([][]Hit, len(queries))
	for i, q := range queries {
		want[i] = ix.Search(q, 10)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				q := (g + i) % len(queries)
				if got := ix.Search(queries[q], 10); !slices.Equal(got, want[q]) {
					t.Errorf("concurrent Search(%q) = %v, want %v", queries[q], got, want[q])
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestDocFromTool(t *testing.T) {
	for _, c := range []struct {
		name, key, tool string
		want            Doc
	}{
		{
			name: "full",
			key:  "github_create_issue",
			tool: `{"name":"create_issue","title":"New issue","description":"Create a new issue","inputSchema":{"type":"object","properties":{"owner":{"type":"string","description":"Repository owner"},"labels":{"type":"array","items":{"type":"object","properties":{"label_name":{"type":"string","title":"Label"}}}},"meta":{"type":"object","properties":{"deep":{"type":"object","description":"One level down","properties":{"deeper":{"description":"Two levels down"}}}}}}}}`,
			want: Doc{Key: "github_create_issue", Name: "github_create_issue", Description: "New issue\nCreate a new issue",
				Params: []string{"owner", "Repository owner", "labels", "label_name", "Label", "meta", "deep", "One level down"}},
		},
		{
			name: "annotation title contained in description",
			key:  "x",
			tool: `{"name":"read","description":"Read a thing","annotations":{"title":"Read","readOnlyHint":true}}`,
			want: Doc{Key: "x", Name: "x read", Description: "Read a thing"},
		},
		{
			name: "same key",
			key:  "echo",
			tool: `{"name":"echo","inputSchema":{"properties":{"text":{"type":"string"}}}}`,
			want: Doc{Key: "echo", Name: "echo", Params: []string{"text"}},
		},
		{
			name: "wrong types",
			key:  "k",
			tool: `{"name":42,"description":["x"],"inputSchema":{"properties":[1,2]}}`,
			want: Doc{Key: "k", Name: "k"},
		},
		{name: "not an object", key: "k", tool: `[1,2,3]`, want: Doc{Key: "k", Name: "k"}},
		{name: "invalid JSON", key: "k", tool: `{"name":"n","description":`, want: Doc{Key: "k", Name: "k n"}},
		{name: "empty", key: "", tool: ``, want: Doc{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := DocFromTool(c.key, json.RawMessage(c.tool))
			if got.Key != c.want.Key || got.Name != c.want.Name || got.Description != c.want.Description || !slices.Equal(got.Params, c.want.Params) {
				t.Errorf("DocFromTool = %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestMemory reports what an index of 10,000 tools costs and checks it stays
// within a few megabytes.
func TestMemory(t *testing.T) {
	docs := catalogue(10000 - len(realTools))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ix := Build(docs)
	runtime.GC()
	runtime.ReadMemStats(&after)
	delta := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("index of %d tools: %d terms, %d postings, about %.2f MiB of heap", ix.Len(), len(ix.terms), len(ix.posts), float64(delta)/(1<<20))
	if delta > 16<<20 {
		t.Errorf("index of %d tools uses %d bytes, want at most 16 MiB", ix.Len(), delta)
	}
	runtime.KeepAlive(ix)
	runtime.KeepAlive(docs) // so that freeing them does not offset the index
}

func ExampleIndex_Search() {
	ix := Build([]Doc{
		DocFromTool("github_create_issue", json.RawMessage(`{"name":"create_issue","description":"Create a new issue in a GitHub repository"}`)),
		DocFromTool("slack_post_message", json.RawMessage(`{"name":"slack_post_message","description":"Post a new message to a Slack channel"}`)),
		DocFromTool("fs_read_file", json.RawMessage(`{"name":"read_file","description":"Read the complete contents of a file"}`)),
	})
	for _, h := range ix.Search("send a message to a Slack channel", 2) {
		fmt.Println(h.Key)
	}
	fmt.Println(strings.Join(keys(ix.Search("createIssue", 1)), ","))
	// Output:
	// slack_post_message
	// github_create_issue
}
