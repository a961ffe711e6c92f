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
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm"
	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/policy/intercept/conformance"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/interceptchain"
)

// This file is edge-mcp interceptors: the SEP-2624 interceptors a config
// (or one module) provides, listed or run against a conformance fixture,
// without a gateway.

func interceptorCommands() []*command {
	return []*command{
		{name: "interceptors ls", define: interceptorsLsFlags,
			summary: "list the interceptors of a config's policy modules and interceptor servers: name, source, type, events, mode, fail-open, in the chain (no gateway needed); without --config and --module, a running gateway's chain with its servers' state and counts (admin API)",
			example: "edge-mcp interceptors ls --config gw.json"},
		{name: "interceptors test", args: "NAME", nargs: 1, define: interceptorsTestFlags,
			summary: "run one conformance fixture against interceptor NAME of a module, or of a config's modules and interceptor servers",
			example: "edge-mcp interceptors test security/cross-boundary-guard --module guard.wasm --fixture relaybleed.json"},
		{name: "interceptors promote", args: "NAME", nargs: 1, define: adminOnly(interceptorMode("promote")),
			summary: "make an audit interceptor of a running gateway's chain enforce (until the next reload: the config's mode returns then)",
			example: "edge-mcp interceptors promote pii/deny"},
		{name: "interceptors demote", args: "NAME", nargs: 1, define: adminOnly(interceptorMode("demote")),
			summary: "run an interceptor of a running gateway's chain in audit mode (until the next reload)",
			example: "edge-mcp interceptors demote pii/deny"},
	}
}

// interceptorMode is interceptors promote or demote NAME: POST
// /admin/interceptors/NAME/promote or /demote.
func interceptorMode(verb string) func(context.Context, *adminClient, []string, io.Writer) error {
	return func(ctx context.Context, c *adminClient, args []string, stdout io.Writer) error {
		var res struct{ Mode, Was string }
		if err := c.call(ctx, http.MethodPost, "/admin/interceptors/"+url.PathEscape(args[0])+"/"+verb, nil, &res); err != nil {
			return fmt.Errorf("%s %s: %w", verb, args[0], err)
		}
		fmt.Fprintf(stdout, "%s: %s → %s until the next reload\n", args[0], res.Was, res.Mode)
		return nil
	}
}

// icSource is where interceptors come from: a config's chain, or one
// module file.
type icSource struct {
	config, module string
	// stateDir is the gateway's --state-dir: where the tokens of
	// interceptor servers with oauth are (the config's admin.state_dir
	// wins).
	stateDir string
	timeout  time.Duration
	// oneInstance runs each module in one instance that is never
	// recycled, so that per-session state (cross-boundary-guard's) lasts
	// a fixture's steps, as in the conformance replay.
	oneInstance bool
}

func (o *icSource) define(fs *flag.FlagSet, withModule bool) {
	fs.StringVar(&o.config, "config", "", "the gateway's config file: its policies' modules and its interceptor servers")
	if withModule {
		fs.StringVar(&o.module, "module", "", "a module file (.wasm), or an oci:// reference to pull, instead of --config")
	}
	fs.StringVar(&o.stateDir, "state-dir", defaultStateDir(), "the gateway's --state-dir: the OAuth tokens of interceptor servers with an oauth section (the config's admin.state_dir wins)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long compiling the modules and reaching the interceptor servers may take")
}

// loaded is what an icSource opened; close releases it.
type loaded struct {
	cfg     *config.Config
	set     *interceptchain.Set
	modules map[string][]intercept.Interceptor // by policy name (or the module file's)
	close   func()
}

func (o *icSource) open(ctx context.Context, stderr io.Writer) (*loaded, error) {
	if (o.config == "") == (o.module == "") {
		return nil, usagef("give --config FILE or --module FILE.wasm")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	eng, err := policy.NewEngine(ctx, policy.EngineConfig{})
	if err != nil {
		return nil, err
	}
	l := &loaded{modules: map[string][]intercept.Interceptor{}}
	var closers []func()
	l.close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	closers = append(closers, func() { _ = eng.Close(context.Background()) })
	load := func(ctx context.Context, name, path string, opts policy.ModuleOptions) ([]intercept.Interceptor, error) {
		wasm, err := readModule(ctx, path, l.cfg)
		if err != nil {
			return nil, err
		}
		if o.oneInstance {
			opts.PoolSize, opts.RecycleAfterCalls = 1, -1
		}
		m, err := eng.Load(ctx, name, wasm, opts)
		if err != nil {
			return nil, err
		}
		closers = append(closers, func() { _ = m.Close() })
		ics, err := interceptchain.ModuleInterceptors(ctx, m)
		l.modules[name] = ics
		return ics, err
	}
	if o.module != "" {
		name := strings.TrimSuffix(filepath.Base(o.module), ".wasm")
		if _, err := load(ctx, name, o.module, policy.ModuleOptions{}); err != nil {
			l.close()
			return nil, fmt.Errorf("%s: %w", o.module, err)
		}
		return l, nil
	}
	if l.cfg, err = config.Load(o.config); err != nil {
		l.close()
		return nil, err
	}
	policies := map[string]policy.Spec{}
	for _, p := range l.cfg.Policies {
		policies[p.Name] = p
	}
	modules := func(ctx context.Context, name string) ([]intercept.Interceptor, error) {
		sp := policies[name]
		if id, uploaded := config.UploadedModule(sp.Module); uploaded {
			return nil, fmt.Errorf("module %q is in a gateway's module store; this command reads module files", id)
		}
		opts, err := policy.SpecOptions(&sp)
		if err != nil {
			return nil, err
		}
		return load(ctx, name, sp.Module, opts)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	opts := interceptchain.Options{Logger: log, Modules: modules, Relist: time.Hour}
	if slices.ContainsFunc(l.cfg.InterceptorServers, func(sc config.Server) bool { return sc.OAuth != nil }) {
		// Their tokens come as the gateway's do: from the same manager
		// over the same token store (a client_credentials grant on the
		// first 401; an authorization_code token stored by edge-mcp
		// auth login or the gateway).
		auth, err := openOAuth(l.cfg, o.stateDir, "", stderr)
		if err != nil {
			l.close()
			return nil, err
		}
		closers = append(closers, auth.Close)
		opts.HTTPClient = auth.HTTPClient
	}
	if l.set, err = interceptchain.NewSet(l.cfg, opts); err == nil {
		err = l.set.Start(ctx)
	}
	if err != nil {
		l.close()
		return nil, err
	}
	closers = append(closers, func() { _ = l.set.Close() })
	return l, nil
}

// lookup finds an interceptor by name and says where it is from.
func (l *loaded) lookup(name string) (intercept.Interceptor, string, bool) {
	if l.set != nil {
		return l.set.Lookup(name)
	}
	for mod, ics := range l.modules {
		for _, ic := range ics {
			if ic.Describe().Name == name {
				return ic, "module " + mod, true
			}
		}
	}
	return nil, "", false
}

func interceptorsLsFlags(fs *flag.FlagSet) runFunc {
	var o icSource
	o.define(fs, true)
	client := adminFlags(fs)
	return func(ctx context.Context, _ []string, s streams) error {
		if o.config == "" && o.module == "" { // a running gateway's chain
			var ls interceptchain.Listing
			c := client()
			code, raw, err := c.do(ctx, http.MethodGet, "/admin/interceptors", nil, nil)
			if err == nil {
				err = check(code, raw)
			}
			if err == nil {
				err = json.Unmarshal(raw, &ls)
			}
			if err != nil {
				return fmt.Errorf("interceptors of the gateway at %s: %w", c.base, err)
			}
			return printListing(s.stdout, &ls, true, true)
		}
		l, err := o.open(ctx, s.stderr)
		if err != nil {
			return err
		}
		defer l.close()
		if l.set != nil {
			return printListing(s.stdout, l.set.List(), true, false)
		}
		ls := &interceptchain.Listing{}
		for name, ics := range l.modules {
			for _, ic := range ics {
				d := ic.Describe()
				ls.Interceptors = append(ls.Interceptors, interceptchain.Listed{Name: d.Name, Source: "module " + name, Type: string(d.Type),
					Events: interceptchain.Events(d), Mode: string(cmp.Or(d.Mode, intercept.Active)), FailOpen: d.FailOpen})
			}
		}
		return printListing(s.stdout, ls, false, false)
	}
}

// printListing writes one row per interceptor: the modules', the reached
// servers', then the stand-ins of servers never reached (CHAIN says
// whether the chain runs it, when there is a chain; the counts, from a
// running gateway); then what went wrong with the servers.
func printListing(w io.Writer, ls *interceptchain.Listing, chain, counts bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "NAME\tSOURCE\tTYPE\tEVENTS\tMODE\tFAIL-OPEN\tCHAIN"
	if counts {
		head += "\tCALLS\tDENIALS\tFAILURES\tAUDITS\tP50"
	}
	fmt.Fprintln(tw, head)
	for _, l := range ls.Interceptors {
		in := "-"
		if chain {
			in = map[bool]string{true: "yes", false: "no"}[l.InChain]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%t\t%s", l.Name, l.Source, l.Type, l.Events, l.Mode, l.FailOpen, in)
		if counts {
			p50 := "-"
			if l.Calls > 0 {
				p50 = (time.Duration(l.P50Micros) * time.Microsecond).String()
			}
			fmt.Fprintf(tw, "\t%d\t%d\t%d\t%d\t%s", l.Calls, l.Denials, l.Failures, l.Audits, p50)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, st := range ls.Servers {
		if counts {
			fmt.Fprintf(w, "server %s: %s, %d interceptors\n", st.Name, st.State, st.Interceptors)
		}
		if st.State != "reached" {
			fmt.Fprintf(w, "server %s: not reached: %s\n", st.Name, st.LastError)
		}
		for _, sk := range st.Skipped {
			fmt.Fprintf(w, "server %s: skipped: %s\n", st.Name, sk)
		}
	}
	return nil
}

func interceptorsTestFlags(fs *flag.FlagSet) runFunc {
	o := icSource{oneInstance: true}
	var fixture string
	o.define(fs, true)
	fs.StringVar(&fixture, "fixture", "", "a fixture of the SEP-2624 conformance format (testdata/interceptors-conformance/fixtures) (required)")
	return func(ctx context.Context, pos []string, s streams) error {
		if fixture == "" {
			return usagef("edge-mcp interceptors test: --fixture is required; run 'edge-mcp interceptors test --help'")
		}
		raw, err := os.ReadFile(fixture)
		if err != nil {
			return err
		}
		f, err := conformance.Parse(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", fixture, err)
		}
		l, err := o.open(ctx, s.stderr)
		if err != nil {
			return err
		}
		defer l.close()
		if _, _, ok := l.lookup(pos[0]); !ok {
			return fmt.Errorf("no interceptor %q (edge-mcp interceptors ls lists them)", pos[0])
		}
		if err := conformance.Replay(ctx, fixtureHost{l: l, name: pos[0]}, f); err != nil {
			fmt.Fprintf(s.stdout, "FAIL %s: %v\n", f.ID, err)
			return fmt.Errorf("fixture %s failed", f.ID)
		}
		fmt.Fprintf(s.stdout, "ok   %s\n", f.ID)
		return nil
	}
}

// fixtureHost binds a fixture's interceptors: the only one, or the one
// named name, to interceptor name; any other to the interceptor of its
// own name, under the fixture's descriptor (hooks, mode, failOpen).
type fixtureHost struct {
	l    *loaded
	name string
}

func (h fixtureHost) NewSession(_ context.Context, fis []conformance.Interceptor) (conformance.Session, error) {
	var ics []intercept.Interceptor
	for _, fi := range fis {
		target := fi.Name
		if len(fis) == 1 || fi.Name == h.name {
			target = h.name
		}
		ic, _, ok := h.l.lookup(target)
		if !ok {
			return nil, fmt.Errorf("the fixture's interceptor %q (behavior %q) is not among those given; only the conformance replay binds behaviors", fi.Name, fi.Behavior)
		}
		d, err := fi.Descriptor()
		if err != nil {
			return nil, err
		}
		bound, err := intercept.Bind(ic, d)
		if err != nil {
			return nil, err
		}
		ics = append(ics, bound)
	}
	if len(ics) == 0 {
		return nil, errors.New("the fixture names no interceptors")
	}
	return conformance.NewLocal(ics, nil, nil)
}

// readModule reads a module file, or pulls an oci:// module with the
// registry settings of cfg's admin section (nil: the defaults), verified
// as the gateway would.
func readModule(ctx context.Context, path string, cfg *config.Config) ([]byte, error) {
	if !config.OCIModule(path) {
		return os.ReadFile(path)
	}
	admin := &config.Admin{}
	if cfg != nil {
		admin = &cfg.Admin
	}
	o, err := admin.RegistryOptions(path)
	if err != nil {
		return nil, err
	}
	ref, err := ociwasm.ParseRef(path)
	if err != nil {
		return nil, err
	}
	a, err := ociwasm.Pull(ctx, ref, o)
	if err != nil {
		return nil, err
	}
	return a.Wasm, nil
}
