// Command edge-mcp is a small, fast MCP gateway: one MCP endpoint in front of
// many MCP servers.
//
// Run edge-mcp help for the commands; every command has --help. The
// command tree and each command's help text are in cli.go.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/memlimit"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
	"github.com/edge-mcp/edge-mcp/runtime/gateway"
	vserver "github.com/edge-mcp/edge-mcp/runtime/virtual"
	"github.com/edge-mcp/edge-mcp/transports"
)

func main() {
	gateway.Version = currentVersion() // what the banner says and peers see in serverInfo and clientInfo
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "edge-mcp:", err)
	var ue *usageError
	if errors.As(err, &ue) {
		os.Exit(2)
	}
	os.Exit(1)
}

// run runs the command line args. A usage mistake is a *usageError.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd, named := "serve", false
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args, named = args[0], args[1:], true
	}
	switch {
	case cmd == "help":
		return help(stdout, args)
	case wantsHelp(args) && !named:
		return help(stdout, nil)
	case wantsHelp(args):
		return help(stdout, append([]string{cmd}, args...))
	}
	s := streams{stdin: os.Stdin, stdout: stdout, stderr: stderr}
	switch cmd {
	case "serve", "stdio", "status", "module", "pins", "vs", "auth", "interceptors":
		return dispatch(ctx, cmd, args, s)
	case "policy":
		return policyCmd(ctx, args, stdout, stderr)
	case "version":
		return printVersion(stdout)
	default:
		return usagef("unknown command %q; run 'edge-mcp help' for the list", cmd)
	}
}

// policyCmd runs edge-mcp policy ARGS.
func policyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return dispatch(ctx, "policy", args, streams{stdin: os.Stdin, stdout: stdout, stderr: stderr})
}

// setup loads the config (or the demo), makes the logger (always on
// stderr) and builds the gateway.
func setup(configPath string, stderr io.Writer, extra func(*config.Config, *gateway.Options)) (*gateway.Gateway, *config.Config, *slog.Logger, error) {
	var (
		cfg  *config.Config
		opts gateway.Options
		err  error
	)
	if configPath == "" {
		cfg, opts = gateway.DemoConfig("127.0.0.1:8080")
	} else if cfg, err = config.Load(configPath); err != nil {
		return nil, nil, nil, err
	}
	level := slog.LevelInfo
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil && cfg.LogLevel != "" {
		return nil, nil, nil, fmt.Errorf("log level %q: %w", cfg.LogLevel, err)
	}
	hopts := &slog.HandlerOptions{Level: level}
	var handler slog.Handler = slog.NewTextHandler(stderr, hopts)
	if cfg.Observability.LogFormat == "json" {
		handler = slog.NewJSONHandler(stderr, hopts)
	}
	log := slog.New(handler)
	opts.Logger = log
	if extra != nil {
		extra(cfg, &opts)
	}
	memlimit.Apply(int64(cfg.Limits.MemoryMB)<<20, log)
	g, err := gateway.New(cfg, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	return g, cfg, log, nil
}

// serveStdio serves one client on stdin/stdout, so a desktop client can
// launch edge-mcp as a local server. Logs go to stderr only.
func stdioFlags(fs *flag.FlagSet) runFunc {
	configPath := fs.String("config", "", "config file (JSON); none: the built-in demo")
	virtual := fs.String("virtual", "", "serve the virtual server `NAME` (virtual_servers) instead of every tool")
	return func(ctx context.Context, _ []string, s streams) error {
		return serveStdio(ctx, *configPath, s.stdin, s.stdout, s.stderr, *virtual)
	}
}

func serveStdio(ctx context.Context, configPath string, stdin io.ReadCloser, stdout io.Writer, stderr io.Writer, virtual string) error {
	g, cfg, log, err := setup(configPath, stderr, nil)
	if err != nil {
		return err
	}
	if virtual != "" && !slices.ContainsFunc(cfg.VirtualServers, func(v vserver.Config) bool { return v.Name == virtual }) {
		g.Close()
		return fmt.Errorf("--virtual %s: the configuration has no such virtual server (virtual_servers)", virtual)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	g.Start(ctx)
	defer g.Close()
	readyCtx, readyCancel := context.WithTimeout(ctx, 5*time.Second)
	if err := g.WaitReady(readyCtx); err != nil {
		log.Warn("not every upstream is connected yet; serving anyway", "err", err)
	}
	readyCancel()
	conn, err := (&mcp.IOTransport{Reader: stdin, Writer: nopWriteCloser{stdout}}).Connect(ctx)
	if err != nil {
		return err
	}
	// The end of stdin ends the session only once every request read has
	// its answer (bounded by the longest call timeout).
	if virtual != "" {
		return g.ServeConnVirtual(newDrainingConn(conn, stdioDrainWait(cfg)), virtual)
	}
	g.ServeConn(newDrainingConn(conn, stdioDrainWait(cfg)))
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// serveOptions are the flags of serve.
type serveOptions struct {
	configPath, listen, adminAddr, stateDir, record string
	allowUnauth                                     bool
}

func serveFlags(fs *flag.FlagSet) runFunc {
	var o serveOptions
	fs.StringVar(&o.configPath, "config", "", "config file (JSON); none: the built-in demo")
	fs.StringVar(&o.listen, "listen", "", "listen address (overrides the config's listen; default 127.0.0.1:8080)")
	fs.StringVar(&o.adminAddr, "admin", "", "admin API listen address, or \"off\" (overrides the config's admin.listen; default "+defaultAdminListen+")")
	fs.StringVar(&o.stateDir, "state-dir", defaultStateDir(), "folder of uploaded modules and run-time attachments (the config's admin.state_dir wins)")
	fs.StringVar(&o.record, "record", "", "write the redacted input of every policy hook call to this folder, for edge-mcp policy test")
	fs.BoolVar(&o.allowUnauth, "allow-unauthenticated", false, "serve without client authentication on a non-loopback address (when something in front authenticates)")
	return func(ctx context.Context, _ []string, s streams) error { return serve(ctx, o, s.stdout, s.stderr) }
}

func serve(ctx context.Context, o serveOptions, stdout, stderr io.Writer) error {
	// The demo keeps no state: its modules, attachments and pins live in a
	// folder of its own that goes when it stops, so nothing one demo
	// pushed shows in another, nor in a gateway with a config.
	demoState := ""
	if o.configPath == "" {
		dir, err := os.MkdirTemp("", "edge-mcp-demo-state-")
		if err != nil {
			return fmt.Errorf("the demo's state folder: %w", err)
		}
		defer os.RemoveAll(dir)
		demoState = dir
	}
	legacy := legacyState(o)
	g, cfg, log, err := setup(o.configPath, stderr, func(c *config.Config, opts *gateway.Options) {
		if demoState != "" {
			c.Admin.StateDir = demoState
		}
		if o.listen != "" {
			c.Listen = o.listen // before New: the listener decides whether auth may be off
		}
		if o.allowUnauth {
			c.Auth.AllowUnauthenticated = true
		}
		opts.StateDir = o.stateDir
		opts.RecordDir = o.record
	})
	if err != nil {
		return err
	}
	if legacy != "" && cfg.Admin.StateDir == "" {
		log.Warn("uploaded modules of an earlier edge-mcp are in the shared state folder, which this config no longer reads: each config has a folder of its own; move state.json and blobs/ there to keep them (or set admin.state_dir)",
			"found", legacy, "state_dir", g.StateDir())
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	g.SetListenAddr(ln.Addr().String())
	adminLn, err := listenAdmin(o.adminAddr, cfg)
	if err != nil {
		ln.Close()
		g.Close()
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	g.Start(ctx)
	reloadOnSIGHUP(ctx, g, log)
	if cfg.Path != "" && (cfg.Admin.WatchConfig == nil || *cfg.Admin.WatchConfig) {
		if err := g.WatchConfig(ctx); err != nil {
			log.Warn("not watching the config file; reload with SIGHUP", "err", err)
		}
	}
	// Give the upstreams a moment, so the first clients see a full
	// catalogue; the slow ones join later with list_changed.
	readyCtx, readyCancel := context.WithTimeout(ctx, 5*time.Second)
	if err := g.WaitReady(readyCtx); err != nil {
		log.Warn("not every upstream is connected yet; serving anyway", "err", err)
	}
	readyCancel()

	// Start-up garbage (module init, config, first catalogue) is freed now
	// rather than whenever the scavenger gets to it: an idle gateway on a
	// small host holds only what it uses.
	debug.FreeOSMemory()

	limits := httpLimits(cfg)
	var requests requestCounter // releaseMemory's sign of an idle gateway
	srv := transports.NewHTTPServer(requests.wrap(g.Handler()), limits)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(limits.Listener(ln)) }()
	var adminSrv *http.Server
	if adminLn != nil {
		adminSrv = transports.NewHTTPServer(requests.wrap(g.AdminHandler()), transports.DefaultHTTPLimits())
		go func() { errc <- adminSrv.Serve(transports.LimitListener(adminLn, 64)) }()
	}

	if o.configPath == "" {
		fmt.Fprintln(stdout, "edge-mcp: no --config given; serving the built-in demo (servers demo-math and demo-text)")
	}
	printBanner(stdout, ln.Addr().String(), cfg.Auth.Mode)
	printState(stdout, g.StateDir(), demoState != "")
	fmt.Fprintf(stdout, "  status: curl %s/status\n", baseURL(ln.Addr().String()))
	if adminLn != nil {
		fmt.Fprintf(stdout, "  admin API: http://%s/admin/modules\n", adminLn.Addr())
	}
	// Likewise the pages of the binary that only start-up ran (trim_linux.go).
	log.Debug("start-up pages of the binary dropped", "KiB", dropStartupPages(log))
	go releaseMemory(ctx, log, &requests) // and what later bursts and requests leave (release.go)

	select {
	case err := <-errc:
		g.Close()
		return err
	case <-ctx.Done():
	}
	return shutdown(g, log, cfg, srv, adminSrv)
}

// shutdown stops a serving gateway gracefully: new sessions are refused
// while the calls in flight finish (within limits.shutdown_grace), then
// the sessions and their streams, the upstreams (stdio children reaped)
// and the listeners are closed. It always returns: what does not finish in
// time is closed.
func shutdown(g *gateway.Gateway, log *slog.Logger, cfg *config.Config, servers ...*http.Server) error {
	grace := cfg.Limits.ShutdownGrace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	log.Info("shutting down: letting the calls in flight finish", "grace", grace)
	drainCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := g.Drain(drainCtx); err != nil {
		log.Warn("shutting down with calls still in flight", "err", err)
	}
	err := g.Close()
	closeCtx, cancelClose := context.WithTimeout(context.Background(), time.Second)
	defer cancelClose()
	for _, srv := range servers {
		if srv != nil && srv.Shutdown(closeCtx) != nil {
			srv.Close()
		}
	}
	log.Info("stopped")
	return err
}

// baseURL is the http:// base a client on this machine reaches the
// listener at: an unspecified address (0.0.0.0, [::]) becomes loopback.
func baseURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// printBanner says where the gateway listens and how to connect, with the
// credentials the listener wants.
func printBanner(w io.Writer, addr, authMode string) {
	url := baseURL(addr) + "/mcp"
	fmt.Fprintf(w, "edge-mcp %s listening on %s\n", gateway.Version, url)
	if host, _, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			fmt.Fprintf(w, "  on every interface (%s): from other machines use this host's name or address instead of 127.0.0.1\n", addr)
		}
	}
	header := ""
	switch authMode {
	case "api_key":
		header = ` --header "Authorization: Bearer <API key>"`
	case "jwt":
		header = ` --header "Authorization: Bearer <JWT>"`
	}
	fmt.Fprintf(w, "  connect an MCP client (streamable HTTP) to %s\n", url)
	fmt.Fprintf(w, "  e.g. claude mcp add --transport http edge %s%s\n", url, header)
}

// legacyState returns the module store an earlier edge-mcp kept directly
// in --state-dir (before each config had a folder of its own) when the
// config's own folder has none yet, else "".
func legacyState(o serveOptions) string {
	if o.configPath == "" || o.stateDir == "" {
		return ""
	}
	old := filepath.Join(o.stateDir, "state.json")
	if _, err := os.Stat(old); err != nil {
		return ""
	}
	if _, err := os.Stat(filepath.Join(config.StateDir(o.stateDir, o.configPath), "state.json")); err == nil {
		return ""
	}
	return old
}

// printState says where the gateway keeps its modules, attachments, pins
// and OAuth tokens.
func printState(w io.Writer, dir string, demo bool) {
	switch {
	case demo:
		fmt.Fprintln(w, "  state: none kept (the demo's modules and pins go when it stops)")
	case dir == "":
		fmt.Fprintln(w, "  state: in memory (no --state-dir and no admin.state_dir)")
	default:
		fmt.Fprintf(w, "  state: %s (modules, attachments, pins, OAuth tokens of this config)\n", dir)
	}
}

const defaultAdminListen = "127.0.0.1:9090"

// httpLimits are the listener's limits against slow and greedy clients:
// the config's, the defaults where it says nothing.
func httpLimits(cfg *config.Config) transports.HTTPLimits {
	l := cfg.Limits
	return transports.HTTPLimits{ReadHeaderTimeout: l.ReadHeaderTimeout, BodyReadTimeout: l.BodyReadTimeout,
		IdleTimeout: l.IdleTimeout, MaxHeaderBytes: l.MaxHeaderBytes, MaxConns: l.MaxConnections, MaxConnsPerIP: l.MaxConnectionsPerIP}.WithDefaults()
}

// listenAdmin opens the admin API's listener: the flag, else the config,
// else the default. The address must work (a taken port is a start-up
// error: an operator who thinks the admin API runs must not find another
// process there). A non-loopback address needs a token.
func listenAdmin(flagAddr string, cfg *config.Config) (net.Listener, error) {
	addr := flagAddr
	if addr == "" {
		addr = cfg.Admin.Listen
	}
	if addr == "" {
		addr = defaultAdminListen
	}
	if addr == "off" {
		return nil, nil
	}
	if !config.LoopbackAddr(addr) && len(cfg.Admin.Tokens) == 0 && os.Getenv("EDGE_MCP_ADMIN_TOKEN") == "" {
		return nil, fmt.Errorf("admin API on %s: not a loopback address, and no admin token is configured: set admin.tokens in the config or EDGE_MCP_ADMIN_TOKEN, or listen on loopback (--admin 127.0.0.1:9090)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin API: listening on %s: %w (choose another address with --admin ADDR or admin.listen, or --admin off)", addr, err)
	}
	return ln, nil
}

// defaultStateDir is $XDG_STATE_HOME/edge-mcp, else ~/.local/state/edge-mcp.
func defaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "edge-mcp")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "edge-mcp")
	}
	return ""
}

// reloadOnSIGHUP reloads the config file on every SIGHUP until ctx ends.
func reloadOnSIGHUP(ctx context.Context, g *gateway.Gateway, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if res, err := g.ReloadFile(ctx); err != nil {
					log.Error("SIGHUP: config reload rejected; the running configuration stays", "err", err)
				} else {
					log.Info("SIGHUP: configuration reloaded", "result", res.String())
				}
			}
		}
	}()
}

func statusFlags(fs *flag.FlagSet) runFunc {
	url := fs.String("url", "http://127.0.0.1:8080", "base URL of a running edge-mcp")
	key := fs.String("key", "", "a client API key or JWT, when the gateway authenticates its clients (default: env EDGE_MCP_KEY)")
	return func(ctx context.Context, _ []string, s streams) error {
		return status(ctx, *url, cmp.Or(*key, os.Getenv("EDGE_MCP_KEY")), s.stdout)
	}
}

// status prints the /status document of the gateway at url, which needs
// a client key (Bearer) when the gateway authenticates its clients.
func status(ctx context.Context, url, key string, stdout io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/status", nil)
	if err != nil {
		return err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("no edge-mcp answers at %s (GET /status: connection refused): start one (edge-mcp serve), or give its address with --url", url)
	}
	if err != nil {
		return fmt.Errorf("asking %s for its status: %w (--url sets the gateway's address)", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return fmt.Errorf("asking %s for its status: HTTP %s: the gateway authenticates its clients; give a client key with --key or EDGE_MCP_KEY", url, resp.Status)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("asking %s for its status: HTTP %s", url, resp.Status)
	}
	var doc struct {
		Servers []gateway.ServerStatus `json:"servers"`
		Fleet   *fleet.Status          `json:"fleet"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return fmt.Errorf("decoding status: %w", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tTRANSPORT\tSTATE\tPROTOCOL\tTOOLS\tPROMPTS\tRESOURCES\tTEMPLATES\tHEALTH CHECK\tRETRIES\tNEXT RETRY\tLAST ERROR")
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return time.Since(t).Round(time.Second).String() + " ago"
	}
	in := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return "in " + time.Until(t).Round(time.Second).String()
	}
	var tools, connected int
	for _, s := range doc.Servers {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\n", s.Name, s.Transport, s.State, s.ProtocolVersion,
			s.Tools, s.Prompts, s.Resources, s.Templates, ago(s.LastHealthCheck), s.Retries, in(s.NextRetry), s.LastError)
		tools += s.Tools
		if s.State == gateway.StateConnected {
			connected++
		}
	}
	fmt.Fprintf(tw, "TOTAL\t\t%d/%d connected\t\t%d\n", connected, len(doc.Servers), tools)
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printFleet(stdout, doc.Fleet); err != nil {
		return err
	}
	if len(doc.Servers) == 0 {
		return errors.New("no servers configured")
	}
	return nil
}
