// Command conformance-client runs the MCP conformance suite's client
// scenarios with edge-mcp as the client: the suite runs it as
//
//	conformance client --command <this binary> --requirements 2026-07-28
//
// and it takes the scenario server's URL as its last argument. It starts the
// edge-mcp binary named by EDGE_MCP with that URL as its only upstream
// (streamable HTTP, no prefix, pass-through), runs the go-sdk conformance
// everything-client named by EVERYTHING_CLIENT against edge-mcp with the
// environment (MCP_CONFORMANCE_*) passed through, relays its exit code and
// stops edge-mcp.
//
// For the auth/* scenarios (MCP_CONFORMANCE_SCENARIO) the upstream gets an
// "oauth" section built from MCP_CONFORMANCE_CONTEXT, and the driver acts
// as the operator: it follows each pending authorization URL the admin API shows
// (before and while the client runs: a step-up arises mid-run) so that
// edge-mcp completes the authorization at its /oauth/callback (auth.go).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

const (
	// upstreamName is the one upstream's name in the generated config.
	upstreamName = "scenario"
	// startTimeout bounds edge-mcp's start (it waits up to 5 s for its
	// upstreams before it prints its address).
	startTimeout = 20 * time.Second
	// statusTimeout bounds the wait for the upstream to settle.
	statusTimeout = 10 * time.Second
	// stopGrace is how long edge-mcp may take to exit after SIGTERM.
	stopGrace = 3 * time.Second
)

// driver is what the arguments and the environment name.
type driver struct {
	edgeMCP     string // the edge-mcp binary (EDGE_MCP)
	client      string // the everything-client binary (EVERYTHING_CLIENT)
	upstreamURL string // the scenario server's URL (the last argument)
	scenario    string // MCP_CONFORMANCE_SCENARIO
	context     string // MCP_CONFORMANCE_CONTEXT
}

func main() {
	code, err := run(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance-client: %v\n", err)
	}
	os.Exit(code)
}

// run drives one scenario and returns the exit code to relay.
func run(args []string, getenv func(string) string) (int, error) {
	d, err := parse(args, getenv)
	if err != nil {
		return 2, err
	}
	tmp, err := os.MkdirTemp("", "conformance-client-*")
	if err != nil {
		return 1, fmt.Errorf("creating a temporary directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	cfgPath := filepath.Join(tmp, "edge-mcp.json")
	var oauth map[string]any
	if authScenario(d.scenario) {
		if oauth, err = oauthSection(d.scenario, d.context); err != nil {
			return 2, err
		}
	}
	if err := writeConfig(cfgPath, d.upstreamURL, oauth); err != nil {
		return 1, err
	}
	gw, err := startGateway(d.edgeMCP, cfgPath, filepath.Join(tmp, "state"))
	if err != nil {
		return 1, err
	}
	defer gw.stop()
	if oauth != nil {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { operator(ctx, gw.adminOAuthURL()); close(done) }()
		defer func() { cancel(); <-done }()
	}
	if err := waitUpstream(gw.statusURL()); err != nil {
		fmt.Fprintf(os.Stderr, "conformance-client: %v; running the client anyway\n", err)
	}
	var env []string
	if clientCredentialsScenario(d.scenario) {
		env = append(env, "MCP_CONFORMANCE_SCENARIO="+clientScenario)
	}
	return runClient(d.client, gw.url, env)
}

// parse reads the arguments (the URL is the last one) and the environment.
func parse(args []string, getenv func(string) string) (driver, error) {
	if len(args) == 0 {
		return driver{}, errors.New("arguments: usage: conformance-client [...] <server-url>")
	}
	d := driver{
		edgeMCP:     getenv("EDGE_MCP"),
		client:      getenv("EVERYTHING_CLIENT"),
		upstreamURL: args[len(args)-1],
		scenario:    getenv("MCP_CONFORMANCE_SCENARIO"),
		context:     getenv("MCP_CONFORMANCE_CONTEXT"),
	}
	if d.edgeMCP == "" {
		return driver{}, errors.New("environment: EDGE_MCP (the edge-mcp binary) is not set")
	}
	if d.client == "" {
		return driver{}, errors.New("environment: EVERYTHING_CLIENT (the go-sdk everything-client binary) is not set")
	}
	if !strings.HasPrefix(d.upstreamURL, "http://") && !strings.HasPrefix(d.upstreamURL, "https://") {
		return driver{}, fmt.Errorf("arguments: the last argument %q is not an http(s) URL", d.upstreamURL)
	}
	return d, nil
}

// config returns the edge-mcp config with url as its only upstream:
// streamable HTTP, no prefix, so names pass through unchanged; with its
// "oauth" section when oauth is not nil.
func config(url string, oauth map[string]any) ([]byte, error) {
	up := map[string]any{"type": "streamable-http", "url": url}
	if oauth != nil {
		up["oauth"] = oauth
	}
	cfg := map[string]any{"mcpServers": map[string]any{upstreamName: up}}
	return json.MarshalIndent(cfg, "", "  ")
}

// writeConfig writes the config for url (and oauth) to path.
func writeConfig(path, url string, oauth map[string]any) error {
	b, err := config(url, oauth)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("config: writing %s: %w", path, err)
	}
	return nil
}

// gateway is a running edge-mcp.
type gateway struct {
	cmd    *exec.Cmd
	exited chan struct{}
	url    string // its MCP endpoint, http://host:port/mcp
	admin  string // its admin API, http://host:port
}

// listenRE matches edge-mcp's "listening on http://…/mcp" line, adminRE
// the admin API's line that follows it.
var (
	listenRE = regexp.MustCompile(`listening on (http://\S+/mcp)`)
	adminRE  = regexp.MustCompile(`admin API: (http://[^/\s]+)/`)
)

// startGateway starts edge-mcp on a free loopback port and waits for the
// address it prints. Its stderr (the log) goes to ours.
func startGateway(bin, cfgPath, stateDir string) (*gateway, error) {
	cmd := exec.Command(bin, "serve", "--config", cfgPath,
		"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--state-dir", stateDir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("starting edge-mcp: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting edge-mcp: %w", err)
	}
	gw := &gateway{cmd: cmd, exited: make(chan struct{})}
	urlc := make(chan [2]string, 1)
	go scanListen(out, urlc)
	go func() { _ = cmd.Wait(); close(gw.exited) }()
	select {
	case urls := <-urlc:
		gw.url, gw.admin = urls[0], urls[1]
		return gw, nil
	case <-gw.exited:
		return nil, fmt.Errorf("starting edge-mcp: it exited (%v) before listening", cmd.ProcessState)
	case <-time.After(startTimeout):
		gw.stop()
		return nil, fmt.Errorf("starting edge-mcp: no \"listening on\" line within %v", startTimeout)
	}
}

// scanListen sends the first listen URL in r and the admin API's URL to
// urlc, then drains r.
func scanListen(r io.Reader, urlc chan<- [2]string) {
	sc := bufio.NewScanner(r)
	var urls [2]string
	sent := false
	for sc.Scan() {
		if m := listenRE.FindStringSubmatch(sc.Text()); m != nil && urls[0] == "" {
			urls[0] = m[1]
		}
		if m := adminRE.FindStringSubmatch(sc.Text()); m != nil && urls[0] != "" && !sent {
			urls[1] = m[1]
			urlc <- urls
			sent = true
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// adminOAuthURL returns the admin API's list of upstream authorizations,
// which carries the pending authorization URLs (/status does not).
func (g *gateway) adminOAuthURL() string { return g.admin + "/admin/oauth" }

// statusURL returns the gateway's /status URL.
func (g *gateway) statusURL() string {
	return strings.TrimSuffix(g.url, "/mcp") + "/status"
}

// stop sends SIGTERM and kills edge-mcp when it has not exited after
// stopGrace.
func (g *gateway) stop() {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(stopGrace):
		fmt.Fprintf(os.Stderr, "conformance-client: stopping edge-mcp: no exit %v after SIGTERM; killing it\n", stopGrace)
		_ = g.cmd.Process.Kill()
		<-g.exited
	}
}

// waitUpstream polls /status until the upstream is connected or failed.
func waitUpstream(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	last := "no answer"
	for {
		state, err := upstreamState(ctx, url)
		switch {
		case err != nil:
			last = err.Error()
		case state == "connected" || state == "failed":
			return nil
		default:
			last = "state " + state
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the upstream in %s: not connected or failed within %v (%s)", url, statusTimeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// statusDoc is the part of /status the driver reads.
type statusDoc struct {
	Servers []struct {
		Name          string `json:"name"`
		State         string `json:"state"`
		Authorization *struct {
			LastError string `json:"last_error"`
		} `json:"authorization"`
	} `json:"servers"`
}

// status reads /status.
func status(ctx context.Context, url string) (*statusDoc, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st statusDoc
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("decoding /status: %w", err)
	}
	return &st, nil
}

// upstreamState returns the state /status reports for the upstream; an
// authorization that failed (a wrong iss) counts as failed.
func upstreamState(ctx context.Context, url string) (string, error) {
	st, err := status(ctx, url)
	if err != nil {
		return "", err
	}
	for _, s := range st.Servers {
		if s.Name != upstreamName {
			continue
		}
		if a := s.Authorization; a != nil && strings.HasPrefix(a.LastError, "authorization failed") {
			return "failed", nil
		}
		return s.State, nil
	}
	return "", errors.New("the upstream is not in /status")
}

// runClient runs the everything-client against url with our environment
// (env added) and returns its exit code.
func runClient(bin, url string, env []string) (int, error) {
	cmd := exec.Command(bin, url)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ee.ExitCode() < 0 { // killed by a signal
			return 1, fmt.Errorf("running the everything-client: %v", err)
		}
		return ee.ExitCode(), nil
	default:
		return 1, fmt.Errorf("running the everything-client: %w", err)
	}
}
