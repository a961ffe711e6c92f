package oauth

import (
	"context"
	"log/slog"
	"net/http"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// Defaults of Options.
const (
	DefaultPendingTTL = 10 * time.Minute
	// earlyRefresh is how long before its expiry a token is refreshed.
	earlyRefresh = 30 * time.Second
	// maxStepUps is how many step-up authorizations a server may ask for
	// within stepUpWindow before the handler stops trying.
	maxStepUps   = 3
	stepUpWindow = time.Minute
)

// Options configure a Manager.
type Options struct {
	Logger *slog.Logger
	// Store keeps the tokens (sealed); required.
	Store Store
	// PendingWait is how long a request waits for a pending authorization
	// (0: config.DefaultOAuthPendingWait).
	PendingWait time.Duration
	// PendingTTL is how long a pending authorization stays valid (0:
	// DefaultPendingTTL).
	PendingTTL time.Duration
	// RedirectURL is the gateway's own callback (served by
	// CallbackHandler on its listener); a server's redirect URL that is
	// another loopback URL gets a listener of its own.
	RedirectURL string
	// HTTPClient sends metadata, registration and token requests; nil:
	// http.DefaultClient.
	HTTPClient *http.Client
}

// Manager holds the handlers of every server with an "oauth" section and
// the pending authorizations. Its methods may be called concurrently.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	servers  map[string]config.Server // servers with an oauth section
	handlers map[handlerKey]*Handler
	pending  map[string]*flight // by state
	loops    map[string]*http.Server
	// challenged are servers without an oauth section that answered 401
	// with a Bearer challenge (challenge.go).
	challenged map[string]bool
	closed     bool

	// st is the token store: opts.Store, or the fleet's (UseFleet).
	st atomic.Pointer[Store]
	// relay and owned: pending authorizations across replicas (fleet.go).
	relay atomic.Pointer[Relay]
	owned map[string]func() // by state: releases the relay's subscription

	// exchanges: some server has "grant": "token_exchange"; subjects
	// holds each identity's newest downstream JWT for it (exchange.go).
	exchanges atomic.Bool
	subjects  sync.Map
}

type handlerKey struct{ server, identity string }

// New returns a Manager; Configure gives it the servers.
func New(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PendingWait <= 0 {
		opts.PendingWait = config.DefaultOAuthPendingWait
	}
	if opts.PendingTTL <= 0 {
		opts.PendingTTL = DefaultPendingTTL
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	m := &Manager{opts: opts, log: opts.Logger, servers: map[string]config.Server{},
		handlers: map[handlerKey]*Handler{}, pending: map[string]*flight{}, loops: map[string]*http.Server{}, challenged: map[string]bool{},
		owned: map[string]func(){}}
	m.st.Store(&opts.Store)
	return m
}

// SetRedirectURL sets the gateway's callback once its listener is known
// (a port chosen at listen time); handlers not used yet take it.
func (m *Manager) SetRedirectURL(u string) {
	m.mu.Lock()
	m.opts.RedirectURL = u
	m.mu.Unlock()
}

func (m *Manager) redirectURL() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.opts.RedirectURL
}

// Configure sets the servers (a configuration generation). Handlers of
// servers whose configuration is unchanged are kept; the others are
// dropped, their pending authorizations cancelled. Tokens stay stored.
func (m *Manager) Configure(servers []config.Server) {
	next := map[string]config.Server{}
	exchanges := false
	for _, sc := range servers {
		if sc.OAuth != nil {
			next[sc.Name] = sc
			exchanges = exchanges || sc.OAuth.Grant == "token_exchange"
		}
	}
	m.exchanges.Store(exchanges)
	m.mu.Lock()
	var drop []*Handler
	for k, h := range m.handlers {
		if sc, ok := next[k.server]; !ok || !reflect.DeepEqual(sc, h.sc) {
			drop = append(drop, h)
			delete(m.handlers, k)
		}
	}
	m.servers = next
	m.mu.Unlock()
	for _, h := range drop {
		h.cancelFlight()
	}
}

// Handler returns the handler of server for identity ("" for a shared
// server), creating it; nil when the server has no "oauth" section.
func (m *Manager) Handler(server, identity string) *Handler {
	m.mu.Lock()
	defer m.mu.Unlock()
	sc, ok := m.servers[server]
	if !ok || m.closed {
		return nil
	}
	k := handlerKey{server, identity}
	if h := m.handlers[k]; h != nil {
		return h
	}
	h := newHandler(m, sc, identity)
	m.handlers[k] = h
	return h
}

// Login starts (or joins) the authorization of server for identity and
// returns its status: with a pending URL when a person must approve, or
// authorized when no person is needed (client credentials).
func (m *Manager) Login(ctx context.Context, server, identity string) (Status, error) {
	h := m.Handler(server, identity)
	if h == nil {
		return Status{}, ErrUnknownServer
	}
	return h.Begin(ctx)
}

// Logout forgets the tokens of server for identity and cancels a pending
// authorization.
func (m *Manager) Logout(server, identity string) error {
	h := m.Handler(server, identity)
	if h == nil {
		return ErrUnknownServer
	}
	return h.Logout()
}

// Status lists every configured server (shared identity, and each
// per-client identity with a handler), by server and identity.
func (m *Manager) Status() []Status {
	m.mu.Lock()
	names := make([]string, 0, len(m.servers))
	for name := range m.servers {
		names = append(names, name)
	}
	var hs []*Handler
	for _, h := range m.handlers {
		hs = append(hs, h)
	}
	m.mu.Unlock()
	seen := map[handlerKey]bool{}
	var out []Status
	for _, h := range hs {
		seen[handlerKey{h.server, h.identity}] = true
		out = append(out, h.Status())
	}
	for _, name := range names {
		if !seen[handlerKey{name, ""}] {
			if h := m.Handler(name, ""); h != nil {
				out = append(out, h.Status())
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Server != out[j].Server {
			return out[i].Server < out[j].Server
		}
		return out[i].Identity < out[j].Identity
	})
	return out
}

// Close cancels the pending authorizations and closes loopback
// listeners.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	hs := make([]*Handler, 0, len(m.handlers))
	for _, h := range m.handlers {
		hs = append(hs, h)
	}
	loops := m.loops
	m.loops = map[string]*http.Server{}
	m.mu.Unlock()
	for _, h := range hs {
		h.cancelFlight()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, srv := range loops {
		srv.Shutdown(ctx) // a callback page being written still reaches the browser
	}
}

// register binds a pending authorization's state to its flight.
func (m *Manager) register(state string, f *flight) {
	m.mu.Lock()
	m.pending[state] = f
	m.mu.Unlock()
	m.own(state)
}

// take returns the flight of state and forgets it (a state is used once).
func (m *Manager) take(state string) *flight {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.pending[state]
	delete(m.pending, state)
	m.disownLocked(state)
	return f
}

func (m *Manager) forget(state string, f *flight) {
	m.mu.Lock()
	if m.pending[state] == f {
		delete(m.pending, state)
		m.disownLocked(state)
	}
	m.mu.Unlock()
}
