// Package interceptchain builds the SEP-2624 interceptor chain a config
// describes: it dials the interceptor servers (at start, again while one
// is unreachable, listing again on a timer and after a reconnect, since
// the SEP names no list_changed notification), selects their and the
// policy modules' interceptors by the entries' name globs, applies the
// entries' overrides and scopes, and stands in for a server never reached
// with an interceptor whose every call fails, so that the entry's
// fail_open decides: fail-closed by default, the refusal naming the
// server. It knows no gateway types.
package interceptchain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/interceptors"
)

// DefaultRelist is the time between two interceptors/list of a server.
const DefaultRelist = time.Minute

// Options configure a Set.
type Options struct {
	// Logger receives what goes wrong with servers and entries; nil
	// discards. Chain.Logger defaults to it.
	Logger *slog.Logger
	// Chain configures every chain the Set builds.
	Chain intercept.Options
	// Modules returns the interceptors of the policy named name, for the
	// module entries (ModuleInterceptors of the loaded module, usually);
	// required when there are any.
	Modules func(ctx context.Context, name string) ([]intercept.Interceptor, error)
	// HTTPClient returns the HTTP client for a remote interceptor server
	// (for a server with oauth: one that authorizes its requests); nil:
	// transports.SharedHTTPClient, and a server with oauth is never
	// reached, with an error that says so.
	HTTPClient func(s config.Server) (*http.Client, error)
	// Relist is the time between two interceptors/list of a reached
	// server (DefaultRelist when 0).
	Relist time.Duration
	// OnChange, when set, is called with each new chain after Start.
	OnChange func(*intercept.Chain)
	// Previous is the Set this one replaces (a reload), or nil: a server
	// whose config is the same in both keeps its connection and its last
	// list instead of being dialed again; the others are dialed anew.
	// Closing either Set leaves the shared connections to the other.
	Previous *Set
}

// Set is the chain of one config generation. Chain is safe for
// concurrent use; Provision (NewSet), Start and Close are called once each.
type Set struct {
	entries []config.InterceptorEntry
	servers []*server
	byName  map[string]*server
	opts    Options
	log     *slog.Logger

	chain   atomic.Pointer[intercept.Chain]
	mu      sync.Mutex // guards modules, the servers' state, lastKey and modes
	modules map[string][]intercept.Interceptor
	lastKey string
	// modes are the run-time mode overrides (SetMode) by interceptor
	// name; they last as long as the Set: a reload starts without them.
	modes map[string]intercept.Mode
	// virtual are the virtual servers whose "interceptors" name a policy
	// or interceptor server, by that name: its entries' members run only
	// for their sessions (intercept.Member.Virtual).
	virtual map[string][]string

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// server is one interceptor server and what is known of it.
type server struct {
	cfg    config.Server
	relist chan struct{} // a list is wanted now (after a reconnect)

	conn    *conn // nil until reached
	ics     []intercept.Interceptor
	skipped []error
	err     error // why it was never reached, or why the last list failed
	listed  time.Time
}

// NewSet provisions the chain of cfg: no I/O. Until Start, and for a
// server until it is reached, its entries are stand-ins that fail every
// call.
func NewSet(cfg *config.Config, opts Options) (*Set, error) {
	s := &Set{entries: cfg.InterceptorChain(), byName: map[string]*server{}, opts: opts, log: opts.Logger, modules: map[string][]intercept.Interceptor{}, modes: map[string]intercept.Mode{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.virtual = map[string][]string{}
	for _, vc := range cfg.VirtualServers {
		for _, name := range vc.Interceptors {
			s.virtual[name] = append(s.virtual[name], vc.Name)
		}
	}
	if s.opts.Chain.Logger == nil {
		s.opts.Chain.Logger = s.log
	}
	if s.opts.Relist <= 0 {
		s.opts.Relist = DefaultRelist
	}
	for _, sc := range cfg.InterceptorServers {
		sv := &server{cfg: sc, relist: make(chan struct{}, 1), err: errors.New("not dialed yet")}
		s.servers = append(s.servers, sv)
		s.byName[sc.Name] = sv
	}
	for _, e := range s.entries {
		if e.Module != "" && opts.Modules == nil {
			return nil, fmt.Errorf("interceptor entry of policy %q: no module source (Options.Modules)", e.Module)
		}
		if e.Server != "" && s.byName[e.Server] == nil {
			return nil, fmt.Errorf("interceptor entry of server %q: no such interceptor server", e.Server)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if opts.Previous != nil {
		s.adopt(opts.Previous)
	}
	if _, err := s.build(); err != nil {
		s.closeLocked()
		return nil, err
	}
	return s, nil
}

// Start reads the modules' interceptors (an error ends Start: the
// operator's modules are part of the config), dials every server once
// (but those whose connection it kept from Options.Previous),
// concurrently (one that does not answer is logged and dialed again in
// the background with the server's retry_initial/retry_max backoff),
// builds the chain and starts listing on a timer. The servers live until
// Close, not ctx.
func (s *Set) Start(ctx context.Context) error {
	for _, e := range s.entries {
		if _, done := s.modules[e.Module]; e.Module == "" || done {
			continue
		}
		ics, err := s.opts.Modules(ctx, e.Module)
		if err != nil {
			return fmt.Errorf("interceptors of policy %q: %w", e.Module, err)
		}
		s.mu.Lock()
		s.modules[e.Module] = ics // even none: read once
		s.mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, sv := range s.servers {
		if s.reached(sv) { // kept from the previous Set
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.connect(ctx, sv)
		}()
	}
	wg.Wait()
	if err := s.rebuild(); err != nil {
		return err
	}
	life, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.cancel = cancel
	s.mu.Unlock()
	for _, sv := range s.servers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.watch(life, sv)
		}()
	}
	return nil
}

// Chain returns the current chain: never nil after NewSet; nil for a nil
// Set (no chain).
func (s *Set) Chain() *intercept.Chain {
	if s == nil {
		return nil
	}
	return s.chain.Load()
}

// Close stops the background work and closes the connections.
func (s *Set) Close() error {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeLocked()
}

// closeLocked lets go of the connections (s.mu held).
func (s *Set) closeLocked() error {
	var errs []error
	for _, sv := range s.servers {
		if sv.conn != nil {
			errs = append(errs, sv.conn.release())
			sv.conn = nil
		}
	}
	return errors.Join(errs...)
}

// Refresh lists every reached server again and dials the others once,
// then rebuilds the chain: what the timer does, now.
func (s *Set) Refresh(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, sv := range s.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.reached(sv) {
				s.list(ctx, sv)
			} else {
				s.connect(ctx, sv)
			}
		}()
	}
	wg.Wait()
	return s.rebuild()
}

func (s *Set) reached(sv *server) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sv.conn != nil
}

// watch keeps one server current until ctx ends: dialing with backoff
// while it was never reached, then listing every Relist and after each
// reconnect.
func (s *Set) watch(ctx context.Context, sv *server) {
	delay := cmp.Or(sv.cfg.RetryInitial, time.Second)
	max := cmp.Or(sv.cfg.RetryMax, 300*time.Second)
	for !s.reached(sv) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		if s.connect(ctx, sv) {
			s.rebuildLogged()
			break
		}
		delay = min(2*delay, max)
	}
	t := time.NewTicker(s.opts.Relist)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-sv.relist:
		}
		s.list(ctx, sv)
		s.rebuildLogged()
	}
}

// timeout bounds one dial or list of sv.
func timeout(sv *server) time.Duration { return cmp.Or(sv.cfg.Timeout, 60*time.Second) }

// connect dials sv and lists its interceptors; it reports whether sv is
// reached now.
func (s *Set) connect(ctx context.Context, sv *server) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout(sv))
	defer cancel()
	opts, err := s.serverOptions(sv)
	if err == nil {
		cn := &conn{refs: 1, relist: sv.relist}
		opts.OnReconnect = cn.reconnected
		if cn.client, err = interceptors.Dial(ctx, sv.cfg.Name, opts); err == nil {
			s.mu.Lock()
			if sv.conn == nil {
				sv.conn = cn
			} else { // Refresh and the watch both dialed
				_ = cn.release()
			}
			s.mu.Unlock()
			s.list(ctx, sv)
			return true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sv.err == nil || sv.err.Error() != err.Error() {
		s.log.Warn("interceptor server not reached", "server", sv.cfg.Name, "error", err)
	}
	sv.err = err
	return false
}

// list reads sv's interceptors. On failure the last list stays: its
// interceptors fail one by one and their failOpen decides.
func (s *Set) list(ctx context.Context, sv *server) {
	ctx, cancel := context.WithTimeout(ctx, timeout(sv))
	defer cancel()
	s.mu.Lock()
	c := sv.conn.client
	s.mu.Unlock()
	ics, skipped, err := c.Interceptors(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.log.Warn("listing interceptors", "server", sv.cfg.Name, "error", err)
		sv.err = err
		return
	}
	for _, e := range skipped {
		s.log.Warn("interceptor skipped", "server", sv.cfg.Name, "error", e)
	}
	sv.ics, sv.skipped, sv.err, sv.listed = ics, skipped, nil, time.Now()
}

func (s *Set) rebuildLogged() {
	if err := s.rebuild(); err != nil {
		s.log.Error("building the interceptor chain; the previous one stays", "error", err)
	}
}

// rebuild builds the chain again when what it is made of changed.
func (s *Set) rebuild() error {
	s.mu.Lock()
	changed, err := s.build()
	started := s.cancel != nil
	s.mu.Unlock()
	if err == nil && changed && started && s.opts.OnChange != nil {
		s.opts.OnChange(s.chain.Load()) // unlocked: it may ask the Set anything
	}
	return err
}

// ModuleInterceptors returns a policy module's interceptors: those it
// declares (ABI 1.1), else its ABI 1.0 hooks as interceptors.
func ModuleInterceptors(ctx context.Context, m *policy.Module) ([]intercept.Interceptor, error) {
	ics, err := m.Interceptors(ctx)
	if err != nil || len(ics) > 0 {
		return ics, err
	}
	return m.LegacyInterceptors(), nil
}

// ServerStatus is what a Set knows of one interceptor server.
type ServerStatus struct {
	Name string
	Type string
	// Reached reports whether the server was ever reached; Interceptors
	// are those of its last list.
	Reached      bool
	Interceptors []intercept.Descriptor
	// Skipped are the invalid descriptors of its last list.
	Skipped []string
	// Err is why it was never reached or why the last list failed.
	Err    string
	Listed time.Time
}

// Servers returns the state of every interceptor server, in config order.
func (s *Set) Servers() []ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ServerStatus, 0, len(s.servers))
	for _, sv := range s.servers {
		st := ServerStatus{Name: sv.cfg.Name, Type: sv.cfg.Type, Reached: sv.conn != nil, Listed: sv.listed}
		for _, ic := range sv.ics {
			st.Interceptors = append(st.Interceptors, ic.Describe())
		}
		for _, e := range sv.skipped {
			st.Skipped = append(st.Skipped, e.Error())
		}
		if sv.err != nil {
			st.Err = sv.err.Error()
		}
		out = append(out, st)
	}
	return out
}

// Lookup finds an interceptor by name among the modules' and the reached
// servers' (selected or not), and names its source ("module NAME",
// "server NAME").
func (s *Set) Lookup(name string) (intercept.Interceptor, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.entries {
		for _, ic := range s.modules[e.Module] {
			if ic.Describe().Name == name {
				return ic, e.Source(), true
			}
		}
	}
	for _, sv := range s.servers {
		for _, ic := range sv.ics {
			if ic.Describe().Name == name {
				return ic, "server " + sv.cfg.Name, true
			}
		}
	}
	return nil, "", false
}
