// Command edge-mcp is a small, fast MCP gateway: one MCP endpoint in front of
// many MCP servers.
//
// Usage:
//
//	edge-mcp                                  serve the built-in demo on 127.0.0.1:8080
//	edge-mcp serve --config FILE [--listen ADDR]
//	edge-mcp stdio [--config FILE]            serve one client on stdin/stdout
//	edge-mcp status [--url URL]
//	edge-mcp module push FILE.wasm [--name NAME] | ls | rm NAME | rollback NAME   [--admin URL] [--token T]
//	edge-mcp policy test MODULE.wasm --hook HOOK --input CASE.json [--config CFG.json]
package main

import (
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
	"syscall"
	"text/tabwriter"
	"time"

	gateway "github.com/edge-mcp/edge-mcp/runtime"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "edge-mcp:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, stdout, stderr)
	case "stdio":
		return serveStdio(ctx, args, os.Stdin, stdout, stderr)
	case "status":
		return status(ctx, args, stdout)
	case "module":
		return moduleCmd(ctx, args, stdout, stderr)
	case "policy":
		return policyCmd(ctx, args, stdout, stderr)
	case "version":
		return printVersion(stdout)
	default:
		return fmt.Errorf("unknown command %q (want serve, stdio, status, module, policy or version)", cmd)
	}
}

// setup loads the config (or the demo), makes the logger (always on
// stderr) and builds the gateway.
func setup(configPath string, stderr io.Writer, extra func(*gateway.Config, *gateway.Options)) (*gateway.Gateway, *gateway.Config, *slog.Logger, error) {
	var (
		cfg  *gateway.Config
		opts gateway.Options
		err  error
	)
	if configPath == "" {
		cfg, opts = gateway.DemoConfig("127.0.0.1:8080")
	} else if cfg, err = gateway.LoadConfig(configPath); err != nil {
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
	g, err := gateway.New(cfg, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	return g, cfg, log, nil
}

// serveStdio serves one client on stdin/stdout, so a desktop client can
// launch edge-mcp as a local server. Logs go to stderr only.
func serveStdio(ctx context.Context, args []string, stdin io.ReadCloser, stdout io.Writer, stderr io.Writer) error {
	fs := flag.NewFlagSet("stdio", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "config file (JSON); none: the built-in demo")
	if err := fs.Parse(args); err != nil {
		return err
	}
	g, _, log, err := setup(*configPath, stderr, nil)
	if err != nil {
		return err
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
	g.ServeConn(conn)
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "config file (JSON); none: the built-in demo")
	listen := fs.String("listen", "", "listen address (overrides the config's listen; default 127.0.0.1:8080)")
	adminAddr := fs.String("admin", "", "admin API listen address, or \"off\" (overrides the config's admin.listen; default "+defaultAdminListen+")")
	stateDir := fs.String("state-dir", defaultStateDir(), "folder of uploaded modules and run-time attachments (the config's admin.state_dir wins)")
	record := fs.String("record", "", "write the redacted input of every policy hook call to this folder, for edge-mcp policy test")
	allowUnauth := fs.Bool("allow-unauthenticated", false, "serve without client authentication on a non-loopback address (when something in front authenticates)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	g, cfg, log, err := setup(*configPath, stderr, func(c *gateway.Config, o *gateway.Options) {
		if *listen != "" {
			c.Listen = *listen // before New: the listener decides whether auth may be off
		}
		if *allowUnauth {
			c.Auth.AllowUnauthenticated = true
		}
		o.StateDir = *stateDir
		o.RecordDir = *record
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	adminLn, err := listenAdmin(*adminAddr, cfg, log)
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

	srv := &http.Server{Handler: g.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	var adminSrv *http.Server
	if adminLn != nil {
		adminSrv = &http.Server{Handler: g.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- adminSrv.Serve(adminLn) }()
	}

	url := "http://" + ln.Addr().String() + "/mcp"
	if *configPath == "" {
		fmt.Fprintln(stdout, "edge-mcp: no --config given; serving the built-in demo (servers demo-math and demo-text)")
	}
	fmt.Fprintf(stdout, "edge-mcp %s listening on %s\n", gateway.Version, url)
	fmt.Fprintf(stdout, "  connect an MCP client (streamable HTTP) to %s\n", url)
	fmt.Fprintf(stdout, "  e.g. claude mcp add --transport http edge %s\n", url)
	fmt.Fprintf(stdout, "  status: curl http://%s/status\n", ln.Addr())
	if adminLn != nil {
		fmt.Fprintf(stdout, "  admin API: http://%s/admin/modules\n", adminLn.Addr())
	}

	select {
	case err := <-errc:
		g.Close()
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(shutdownCtx)
	if adminSrv != nil {
		adminSrv.Shutdown(shutdownCtx)
	}
	return g.Close()
}

const defaultAdminListen = "127.0.0.1:9090"

// listenAdmin opens the admin API's listener: the flag, else the config,
// else the default. An address given explicitly must work; the default is
// skipped with a warning when taken. A non-loopback address needs a token.
func listenAdmin(flagAddr string, cfg *gateway.Config, log *slog.Logger) (net.Listener, error) {
	addr, explicit := flagAddr, true
	if addr == "" {
		addr = cfg.Admin.Listen
	}
	if addr == "" {
		addr, explicit = defaultAdminListen, false
	}
	if addr == "off" {
		return nil, nil
	}
	if !gateway.LoopbackAddr(addr) && len(cfg.Admin.Tokens) == 0 && os.Getenv("EDGE_MCP_ADMIN_TOKEN") == "" {
		return nil, fmt.Errorf("admin API on %s: not a loopback address, and no admin token is configured (admin.tokens or EDGE_MCP_ADMIN_TOKEN)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if explicit {
			return nil, fmt.Errorf("admin API: listening on %s: %w", addr, err)
		}
		log.Warn("admin API not started: its default address is taken (set --admin)", "addr", addr, "err", err)
		return nil, nil
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

func status(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8080", "base URL of a running edge-mcp")
	if err := fs.Parse(args); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url+"/status", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("asking %s for its status: %w", *url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("asking %s for its status: HTTP %s", *url, resp.Status)
	}
	var doc struct {
		Servers []gateway.ServerStatus `json:"servers"`
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
	if len(doc.Servers) == 0 {
		return errors.New("no servers configured")
	}
	return nil
}
