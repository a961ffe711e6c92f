package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	w "github.com/edge-mcp/edge-mcp/policy/wasmtest"
)

// TestFirstPolicyDoc follows docs/first-policy.md step by step: every sh
// block runs, in order, in bash with the release binary on PATH, against
// the built-in demo gateway the page starts, with no network (GOPROXY=off)
// and an empty module cache. What each step must print is checked after
// it.
func TestFirstPolicyDoc(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a Wasm module and runs a gateway")
	}
	doc, err := os.ReadFile("../../docs/first-policy.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte("```console\n$ edge-mcp\n```")) {
		t.Fatal("the page no longer starts the gateway with a bare edge-mcp; change the test with it")
	}
	bin := releaseBinary(t)
	p := startBinary(t, "serve", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0")
	if p.admin == "" {
		t.Fatalf("no admin address printed\n%s", p.stderr)
	}
	// What each step must print, by a command it contains.
	checks := []struct{ step, want, not string }{
		{"policy test", `"action": "deny"`, ""},
		{"module ls", "hello", ""},
		{"--shadow", "STILL ALLOWED", ""},
		{"policy promote", "blocked by policy hello: upper", ""},
		{"sed -i", "hello says no: upper", ""},
		{"policy rollback", "blocked by policy hello: upper", "says no"},
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) < len(checks) {
		t.Fatalf("%d sh blocks in the page, want at least %d", len(blocks), len(checks))
	}
	work := t.TempDir()
	cwd, cwdFile := work, filepath.Join(t.TempDir(), "cwd")
	env := append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"EDGE_MCP_ADMIN_URL="+p.admin, "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off", "GOMODCACHE="+t.TempDir())
	checked := 0
	for i, b := range blocks {
		script := strings.ReplaceAll(string(b[1]), "http://127.0.0.1:8080", p.base)
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script+"\npwd > "+cwdFile)
		cmd.Dir, cmd.Env = cwd, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			p.sigterm(t, 15*time.Second) // its log is complete once it exited
			t.Fatalf("step %d:\n%s\nfailed: %v\n%s\ngateway log:\n%s", i+1, b[1], err, out, p.stderr)
		}
		if d, err := os.ReadFile(cwdFile); err == nil {
			cwd = strings.TrimSpace(string(d))
		}
		for _, c := range checks {
			if !strings.Contains(script, c.step) {
				continue
			}
			checked++
			if !strings.Contains(string(out), c.want) || c.not != "" && strings.Contains(string(out), c.not) {
				t.Errorf("step %d (%s) printed:\n%s\nwant %q (and not %q)", i+1, c.step, out, c.want, c.not)
			}
		}
	}
	if checked != len(checks) {
		t.Errorf("%d of the %d checks found their step in the page", checked, len(checks))
	}
	p.sigterm(t, 15*time.Second) // its log is complete once it exited
	log := p.stderr.String()
	for _, want := range []string{"policy shadow decision differs", "policy denied a call"} {
		if !strings.Contains(log, want) {
			t.Errorf("the gateway's log lacks %q:\n%s", want, log)
		}
	}
}

// Issue #27 item 4: `edge-mcp stdio` answers every request of a piped
// client whose input ends right after its last request.
func TestStdioAnswersEveryRequestAtEndOfInput(t *testing.T) {
	t.Parallel()
	var in bytes.Buffer
	in.WriteString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}` + "\n")
	in.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	const calls = 20
	for i := 1; i <= calls; i++ {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"text_upper","arguments":{"text":"call %d"}}}`+"\n", i, i)
	}
	in.WriteString(`{"jsonrpc":"2.0","id":"last","method":"tools/list"}` + "\n")
	for run := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, releaseBinary(t), "stdio")
		cmd.Stdin = bytes.NewReader(in.Bytes())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, stderr.String())
		}
		seen := map[string]int{}
		for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal(line, &msg); err != nil || msg.Result == nil {
				t.Fatalf("run %d: not an answer: %s (%v)", run, line, err)
			}
			seen[string(msg.ID)]++
		}
		if len(seen) != calls+2 {
			t.Errorf("run %d: %d answers to %d requests: %v\n%s", run, len(seen), calls+2, seen, stderr.String())
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("run %d: request %s answered %d times", run, id, n)
			}
		}
	}
}

// Issue #27 item 2: the demo keeps no state: a module pushed to one demo
// is not listed by the next, and the banner says where state is kept.
func TestDemoKeepsNoState(t *testing.T) {
	wasm := w.Example(t, "redact-secrets")
	for i := range 2 {
		p := startBinary(t, "serve", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0")
		if !strings.Contains(p.banner, "state: none kept") {
			t.Errorf("the demo's banner does not say it keeps no state:\n%s", p.banner)
		}
		if i == 0 {
			req, _ := http.NewRequest("PUT", p.admin+"/admin/modules/redact", bytes.NewReader(wasm))
			req.Header.Set("Content-Type", "application/wasm")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("push to the first demo: %s", resp.Status)
			}
		}
		resp, err := http.Get(p.admin + "/admin/modules")
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		body.ReadFrom(resp.Body)
		resp.Body.Close()
		if i == 1 && strings.Contains(body.String(), "redact") {
			t.Errorf("the second demo lists a module: %s", body.String())
		}
		p.sigterm(t, 15*time.Second)
	}
}

// Issue #27 item 6: edge-mcp version and the banner say the same version,
// also when the toolchain stamped a module version (go build in a git
// checkout, go install module@version).
func TestVersionOneEverywhere(t *testing.T) {
	t.Parallel()
	stamped := &debug.BuildInfo{Main: debug.Module{Path: "github.com/edge-mcp/edge-mcp", Version: "v0.0.0-20261202212400-36c6f00aa1b2+dirty"}}
	if got := versionOf(stamped); got != stamped.Main.Version {
		t.Errorf("version of a stamped build = %q, want %q", got, stamped.Main.Version)
	}

	out, err := exec.Command(releaseBinary(t), "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	v := strings.TrimPrefix(first, "edge-mcp ")
	p := startBinary(t, "serve", "--listen", "127.0.0.1:0", "--admin", "off")
	if !strings.Contains(p.banner, "edge-mcp "+v+" listening on") {
		t.Errorf("edge-mcp version says %q; the banner:\n%s", v, p.banner)
	}
}

// Issue #27 item 6: on every interface the banner prints a URL a client can
// use and, with API keys, the header the client must send.
func TestBannerOnEveryInterface(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr, mode string
		want       []string
		not        string
	}{
		{"[::]:8080", "api_key", []string{"listening on http://127.0.0.1:8080/mcp", "on every interface ([::]:8080)",
			`claude mcp add --transport http edge http://127.0.0.1:8080/mcp --header "Authorization: Bearer <API key>"`}, "[::]"},
		{"0.0.0.0:9000", "jwt", []string{"http://127.0.0.1:9000/mcp", `--header "Authorization: Bearer <JWT>"`}, ""},
		{"127.0.0.1:8080", "", []string{"claude mcp add --transport http edge http://127.0.0.1:8080/mcp\n"}, "every interface"},
	}
	for _, tc := range tests {
		t.Run(tc.addr, func(t *testing.T) {
			var b strings.Builder
			printBanner(&b, tc.addr, tc.mode)
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("banner lacks %q:\n%s", w, b.String())
				}
			}
			if tc.not == "[::]" && strings.Contains(b.String(), "http://[::]") {
				t.Errorf("banner prints an unspecified address as a URL:\n%s", b.String())
			}
			if tc.not == "every interface" && strings.Contains(b.String(), tc.not) {
				t.Errorf("loopback banner talks of every interface:\n%s", b.String())
			}
		})
	}
}

// Issue #27 item 6: with no gateway, the client commands name the URL they
// tried and the flag that changes it.
func TestNoGatewaySaysWhereItLooked(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"status", "--url", url}, []string{"no edge-mcp answers at " + url, "--url"}},
		{[]string{"module", "ls", "--admin", url}, []string{"no gateway's admin API answers at " + url, "--admin URL", "EDGE_MCP_ADMIN_URL"}},
		{[]string{"policy", "ls", "--admin", url}, []string{"answers at " + url, "--admin URL"}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			err := run(context.Background(), tc.args, io.Discard, io.Discard)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v lacks %q", err, w)
				}
			}
		})
	}
}

// Issue #27 item 2, upgrading: modules an earlier edge-mcp stored directly
// in --state-dir are not silently left behind: the gateway says where they
// are and where this config's state lives now.
func TestLegacyStateWarned(t *testing.T) {
	base := t.TempDir()
	if err := os.WriteFile(filepath.Join(base, "state.json"), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "gw.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startBinary(t, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--admin", "off", "--state-dir", base)
	if !strings.Contains(p.banner, "state: "+filepath.Join(base, "gw-")) {
		t.Errorf("the banner does not print the config's state folder under %s:\n%s", base, p.banner)
	}
	p.sigterm(t, 15*time.Second)
	if log := p.stderr.String(); !strings.Contains(log, "uploaded modules of an earlier edge-mcp") || !strings.Contains(log, filepath.Join(base, "state.json")) {
		t.Errorf("no warning about %s/state.json:\n%s", base, log)
	}
}
