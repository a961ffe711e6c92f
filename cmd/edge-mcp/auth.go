package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/oauth"
)

// This file is edge-mcp auth login|status|logout: the upstream OAuth
// authorizations. Through a running gateway's admin API when it answers;
// else, with --config, directly on the gateway's token store (login then
// receives the redirect on a loopback listener).

func authCommands() []*command {
	return []*command{
		{name: "auth login", args: "SERVER", nargs: 1, define: authLoginFlags,
			summary: "authorize the gateway at an upstream server (OAuth): prints the URL to open, waits for the redirect, stores the tokens",
			example: "edge-mcp auth login github --config gw.json"},
		{name: "auth status", define: authStatusFlags,
			summary: "list each upstream's authorization: state, valid until, scopes, refreshable, pending URL",
			example: "edge-mcp auth status"},
		{name: "auth logout", args: "SERVER", nargs: 1, define: authLogoutFlags,
			summary: "forget the upstream tokens of a server",
			example: "edge-mcp auth logout github"},
	}
}

// authTarget is where the auth commands act: the admin API, or the token
// store of --config when no gateway answers.
type authTarget struct {
	client     func() *adminClient
	configPath *string
	stateDir   *string
}

func authFlags(fs *flag.FlagSet) *authTarget {
	return &authTarget{
		client:     adminFlags(fs),
		configPath: fs.String("config", "", "config file: used when no gateway answers on --admin, to reach its token store directly"),
		stateDir:   fs.String("state-dir", defaultStateDir(), "the gateway's --state-dir (the config's admin.state_dir wins)"),
	}
}

// viaAdmin reports whether the admin API answers; err is why not when
// there is no --config to fall back on.
func (a *authTarget) viaAdmin(ctx context.Context) (*adminClient, error) {
	c := a.client()
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, _, err := c.do(pctx, http.MethodGet, "/admin/oauth", nil, nil)
	if err == nil {
		return c, nil
	}
	if *a.configPath == "" {
		return nil, fmt.Errorf("%w; or give --config to use the token store without a running gateway", err)
	}
	return nil, nil
}

// local opens the manager over the gateway's token store; redirect is
// its default callback.
func (a *authTarget) local(redirect string, stderr io.Writer) (*oauth.Manager, *config.Config, error) {
	cfg, err := config.Load(*a.configPath)
	if err != nil {
		return nil, nil, err
	}
	m, err := openOAuth(cfg, *a.stateDir, redirect, stderr)
	return m, cfg, err
}

// openOAuth opens the OAuth manager a gateway running cfg with
// --state-dir stateDir would use (runtime/oauth.Open over the same token
// store: the config's admin.state_dir wins), logging warnings to stderr;
// redirect is its default callback ("" as the gateway's). The auth
// commands and the interceptors commands (for interceptor servers with
// oauth) use it.
func openOAuth(cfg *config.Config, stateDir, redirect string, stderr io.Writer) (*oauth.Manager, error) {
	dir := cfg.Admin.StateDir
	if dir == "" && stateDir != "" {
		dir = config.StateDir(stateDir, cfg.Path)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return oauth.Open(cfg, dir, log, redirect)
}

func authLoginFlags(fs *flag.FlagSet) runFunc {
	a := authFlags(fs)
	noBrowser := fs.Bool("no-browser", false, "do not try to open a browser")
	wait := fs.Duration("timeout", 10*time.Minute, "how long to wait for the authorization")
	return func(ctx context.Context, args []string, s streams) error {
		ctx, cancel := context.WithTimeout(ctx, *wait)
		defer cancel()
		c, err := a.viaAdmin(ctx)
		if err != nil {
			return err
		}
		if c != nil {
			return loginViaAdmin(ctx, c, args[0], !*noBrowser, s.stdout)
		}
		return loginLocal(ctx, a, args[0], !*noBrowser, s)
	}
}

// loginViaAdmin starts the authorization in the running gateway, prints
// its URL and waits until the gateway reports the server authorized.
func loginViaAdmin(ctx context.Context, c *adminClient, server string, browser bool, stdout io.Writer) error {
	var st oauth.Status
	if err := c.call(ctx, http.MethodPost, "/admin/oauth/"+url.PathEscape(server)+"/login", []byte("{}"), &st); err != nil {
		return fmt.Errorf("starting the authorization of %q: %w", server, err)
	}
	if st.PendingURL == "" {
		fmt.Fprintf(stdout, "server %q is authorized (%s)\n", server, st.State)
		return nil
	}
	announce(stdout, server, st.PendingURL, browser)
	for {
		var list struct{ Servers []oauth.Status }
		if err := c.call(ctx, http.MethodGet, "/admin/oauth", nil, &list); err != nil {
			return err
		}
		for _, cur := range list.Servers {
			if cur.Server != server || cur.Identity != "" {
				continue
			}
			if cur.State == oauth.StateAuthorized && cur.PendingURL == "" {
				fmt.Fprintf(stdout, "server %q is authorized\n", server)
				return nil
			}
			if cur.PendingURL == "" && cur.LastError != "" {
				return fmt.Errorf("authorizing %q: %s", server, cur.LastError)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("authorizing %q: no answer in time: %w", server, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// loginLocal runs the authorization here, on the gateway's token store,
// with the redirect on a loopback listener (callbackPort, or one of its
// own on a free port).
func loginLocal(ctx context.Context, a *authTarget, server string, browser bool, s streams) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening for the authorization redirect: %w", err)
	}
	redirect := "http://" + ln.Addr().String() + "/oauth/callback"
	m, _, err := a.local(redirect, s.stderr)
	if err != nil {
		ln.Close()
		return err
	}
	defer m.Close()
	srv := &http.Server{Handler: m.CallbackHandler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer func() {
		// Let the callback page reach the browser before the listener goes.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	st, err := m.Login(ctx, server, "")
	if errors.Is(err, oauth.ErrUnknownServer) {
		return fmt.Errorf("server %q has no \"oauth\" section in %s", server, *a.configPath)
	}
	if err != nil {
		return err
	}
	if st.PendingURL != "" {
		announce(s.stdout, server, st.PendingURL, browser)
		if err := m.Handler(server, "").Await(ctx); err != nil {
			return err
		}
	}
	fmt.Fprintf(s.stdout, "server %q is authorized; the tokens are stored (sealed) for the gateway\n", server)
	return nil
}

// announce prints the URL to open and, where there is a desktop, opens it.
func announce(stdout io.Writer, server, u string, browser bool) {
	fmt.Fprintf(stdout, "To authorize edge-mcp at server %q, open:\n\n  %s\n\nWaiting for the authorization…\n", server, u)
	if browser {
		openBrowser(u)
	}
}

// openBrowser starts the desktop's browser on u, when there is a desktop;
// it never waits for it.
func openBrowser(u string) {
	var cmd *exec.Cmd
	switch {
	case runtime.GOOS == "darwin":
		cmd = exec.Command("open", u)
	case runtime.GOOS == "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
	case os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != "":
		cmd = exec.Command("xdg-open", u)
	default:
		return
	}
	if cmd.Start() == nil {
		go cmd.Wait()
	}
}

func authStatusFlags(fs *flag.FlagSet) runFunc {
	a := authFlags(fs)
	return func(ctx context.Context, _ []string, s streams) error {
		c, err := a.viaAdmin(ctx)
		if err != nil {
			return err
		}
		var list struct{ Servers []oauth.Status }
		if c != nil {
			if err := c.call(ctx, http.MethodGet, "/admin/oauth", nil, &list); err != nil {
				return err
			}
		} else {
			m, _, err := a.local("", s.stderr)
			if err != nil {
				return err
			}
			defer m.Close()
			list.Servers = m.Status()
		}
		printAuthStatus(s.stdout, list.Servers)
		return nil
	}
}

func printAuthStatus(w io.Writer, list []oauth.Status) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no server has an \"oauth\" section")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tIDENTITY\tGRANT\tSTATE\tVALID UNTIL\tREFRESHABLE\tSCOPES")
	var pending []string
	for _, st := range list {
		until := "-"
		if !st.ValidUntil.IsZero() {
			until = st.ValidUntil.UTC().Format(time.RFC3339)
		}
		id := st.Identity
		if id == "" {
			id = "(shared)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%t\t%s\n", st.Server, id, st.Grant, st.State, until, st.Refreshable, strings.Join(st.Scopes, " "))
		if st.PendingURL != "" {
			pending = append(pending, fmt.Sprintf("%s: pending until %s: %s", st.Server, st.PendingExpires.UTC().Format(time.RFC3339), st.PendingURL))
		}
		if st.LastError != "" {
			pending = append(pending, fmt.Sprintf("%s: %s", st.Server, st.LastError))
		}
	}
	tw.Flush()
	for _, p := range pending {
		fmt.Fprintln(w, p)
	}
}

func authLogoutFlags(fs *flag.FlagSet) runFunc {
	a := authFlags(fs)
	identity := fs.String("identity", "", "forget the tokens of this downstream identity (a server with \"identity\": \"per_client\") instead of the shared ones")
	return func(ctx context.Context, args []string, s streams) error {
		c, err := a.viaAdmin(ctx)
		if err != nil {
			return err
		}
		if c != nil {
			path := "/admin/oauth/" + url.PathEscape(args[0])
			if *identity != "" {
				path += "?identity=" + url.QueryEscape(*identity)
			}
			if err := c.call(ctx, http.MethodDelete, path, nil, nil); err != nil {
				return err
			}
		} else {
			m, _, err := a.local("", s.stderr)
			if err != nil {
				return err
			}
			defer m.Close()
			if err := m.Logout(args[0], *identity); err != nil {
				return fmt.Errorf("server %q: %w", args[0], err)
			}
		}
		fmt.Fprintf(s.stdout, "forgot the tokens of server %q\n", args[0])
		return nil
	}
}
