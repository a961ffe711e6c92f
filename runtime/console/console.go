// Package console is the operator console: server-rendered HTML pages
// under /ui/ on the admin listener (overview, catalogue and tool pins,
// policies, upstream OAuth, fleet). The pages carry no script and load
// nothing from another origin; every change is a form posted with a CSRF
// token and carried out through the admin API's operations.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
)

//go:embed templates/*.html static/console.css static/console.js
var files embed.FS

// Auth is the admin API's token check (an *admin.Server).
type Auth interface {
	// TokenIdentity returns the admin identity whose token tok is.
	TokenIdentity(tok string) (string, bool)
	// Identities lists the identities with a token now; none means the
	// console is open (the admin listener is loopback-only then).
	Identities() []string
}

// Source is what the console reads of the gateway beyond admin
// operations.
type Source interface {
	Upstreams() []Upstream
	// Tools lists every upstream's tools, in config order.
	Tools() []Tool
	// Offers lists every upstream's offers of one kind ("tools",
	// "prompts", "resources" or "resourceTemplates"), in config order.
	Offers(kind string) []Tool
	Sessions() int
	// Fleet is nil outside a fleet.
	Fleet(ctx context.Context) *fleet.Status
	// ClientIdentities lists the client identities the gateway admits
	// (the API keys' names; "anonymous" without authentication); any says
	// that any name may be used (JWT: the identity is a token's claim).
	ClientIdentities() (names []string, any bool)
	// ServeAs runs a session of the gateway over conn until conn is
	// closed, for identity, as if that client had connected: access
	// lists, rate limits, validation, policies, approval, metrics and the
	// audit log apply.
	ServeAs(identity string, conn mcp.Connection)
	// Interceptors lists the interceptor chain's members in chain order;
	// none without a chain.
	Interceptors() []Interceptor
	// VirtualServers lists the virtual servers, in config order.
	VirtualServers() []VirtualServer
	// VirtualOffers lists what the sessions of the virtual server named
	// name see of one kind, as they see it (its names, descriptions and
	// schemas); ok is false when there is no such virtual server.
	VirtualOffers(name, kind string) (offers []Tool, ok bool)
}

// VirtualServer is one virtual server (config virtual_servers).
type VirtualServer struct {
	Name, Path, Title string
}

// Upstream is one upstream server's line on the overview.
type Upstream struct {
	Name, Transport, State, Protocol string
	Tools, Prompts, Resources        int
	Retries                          int
	LastHealthCheck, NextRetry       time.Time
	LastError                        string
}

// Tool is one tool, prompt, resource or resource template in the
// catalogue; Name is what clients see (a resource's URI).
type Tool struct {
	Server, Name, Description string
	// Def is the definition as the upstream sent it (shared, not copied),
	// or as a virtual server rewrote it.
	Def json.RawMessage
	// Catalogue is, in a virtual server's view, the catalogue's name of
	// an item the server renamed ("": the same name); Overridden says an
	// override changed its definition.
	Catalogue  string
	Overridden bool
}

// NewTool is the entry of server's item name defined by def, with the
// definition's description.
func NewTool(server, name string, def json.RawMessage) Tool {
	var d struct {
		Description string `json:"description"`
	}
	json.Unmarshal(def, &d)
	return Tool{Server: server, Name: name, Description: d.Description, Def: def}
}

// Options configure a Console.
type Options struct {
	Ops    admin.Operations
	Source Source
	Auth   Auth
	// Audit receives the record of every change made from the console.
	Audit func(admin.Record)
	// Tail is what the gateway publishes as it runs (NewTail); the
	// console starts it on its first page.
	Tail *Tail
	Log  *slog.Logger
	// KeyFile keeps the key that signs session cookies (in the state
	// folder), so that a restart does not log everyone out; "": a key
	// for this process only.
	KeyFile string
}

// KeyFileIn is the KeyFile of a gateway whose state folder is stateDir:
// console.key there, none ("") without one.
func KeyFileIn(stateDir string) string {
	if stateDir == "" {
		return ""
	}
	return filepath.Join(stateDir, "console.key")
}

// Console is the operator console's HTTP handler, mounted at /ui/.
type Console struct {
	ops   admin.Operations
	src   Source
	auth  Auth
	audit func(admin.Record)
	log   *slog.Logger
	keys  keys
	now   func() time.Time
	mux   *http.ServeMux
	tail  *Tail
	// logins counts failed logins per client address.
	logins loginLimiter
}

// New returns the console. It parses no template until the first page is
// asked for.
func New(opts Options) *Console {
	key, err := loadKey(opts.KeyFile)
	if err != nil {
		if opts.Log != nil {
			opts.Log.Warn("console: sessions will not survive a restart", "err", err)
		}
		key, _ = loadKey("")
	}
	c := &Console{ops: opts.Ops, src: opts.Source, auth: opts.Auth, audit: opts.Audit, log: opts.Log,
		keys: keys{key}, now: time.Now, mux: http.NewServeMux(), tail: opts.Tail}
	if c.tail == nil {
		c.tail = NewTail()
	}
	if c.audit == nil {
		c.audit = func(admin.Record) {}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.routes()
	return c
}

// csp allows this origin's stylesheet, images, script file and event
// stream, and nothing else: no inline script, no frames, forms posted
// only here.
const csp = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP serves the console. The admin server has checked Origin and
// Host already.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer browsers post forms
	// with "Origin: null", which the guard refuses.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	c.tail.Start() // the console is open: the tail records from now on
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes() {
	c.mux.HandleFunc("GET /ui/static/console.css", c.serveCSS)
	c.mux.HandleFunc("GET /ui/static/console.js", c.serveJS)
	c.mux.HandleFunc("GET /ui/tail/stream", c.stream)
	c.mux.HandleFunc("GET /ui/chart.svg", c.chart)
	c.mux.HandleFunc("GET /ui/login", c.loginForm)
	c.mux.HandleFunc("POST /ui/login", c.login)
	c.mux.HandleFunc("POST /ui/logout", c.logout)
	pages := map[string]func(*http.Request) (string, any, error){
		"GET /ui/{$}":            c.overview,
		"GET /ui/catalogue":      c.catalogue,
		"GET /ui/catalogue/item": c.catalogueItem,
		"GET /ui/policies":       c.policies,
		"GET /ui/oauth":          c.oauthPage,
		"GET /ui/fleet":          c.fleetPage,
		"GET /ui/playground":     c.playground,
		"GET /ui/tail":           c.tailPage,
		"POST /ui/playground":    c.playgroundCall,
		"POST /ui/pins":          c.pinAction,
		"POST /ui/policies":      c.policyAction,
		"POST /ui/interceptors":  c.interceptorAction,
		"POST /ui/modules":       c.uploadModule,
		"POST /ui/modules/pull":  c.pullModule,
		"POST /ui/oauth":         c.oauthAction,
	}
	for pattern, f := range pages {
		c.mux.Handle(pattern, c.page(f))
	}
	c.mux.HandleFunc("/ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusSeeOther) })
	c.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no console page here", http.StatusNotFound)
	})
}

// staleAfter is how long after its last heartbeat the fleet page marks
// a member stale.
const staleAfter = 5 * time.Second

// parses counts template parsings (one at most, on the first page).
var parses atomic.Int32

var parsed = sync.OnceValues(func() (*template.Template, error) {
	parses.Add(1)
	return template.New("console").Funcs(template.FuncMap{
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return time.Since(t).Round(time.Second).String() + " ago"
		},
		"add": func(a, b int) int { return a + b },
		// stale says a fleet member has missed several heartbeats (a
		// replica beats every second; its record is dropped 15 s after
		// its last).
		"stale": func(t time.Time) bool { return time.Since(t) > staleAfter },
		"list":  func(v ...string) []string { return v },
		"itemURL": func(kind, server, name, vs string) template.URL {
			v := url.Values{"kind": {kind}, "server": {server}, "name": {name}}
			if vs != "" {
				v.Set("vs", vs)
			}
			return template.URL("/ui/catalogue/item?" + v.Encode())
		},
	}).ParseFS(files, "templates/*.html")
})

// view is what every template gets.
type view struct {
	Title, Nav string
	Identity   string
	CSRF       string
	Open       bool // no admin tokens: no login, no logout
	Error      string
	Data       any
}

// page wraps a page or action: it authenticates (redirecting to the login
// form), checks the CSRF token of a POST, and renders the template f
// names. An action returns "redirect:<path>" to answer 303.
func (c *Console) page(f func(*http.Request) (string, any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := c.whoIs(r)
		if who.identity == "" {
			if r.Method != http.MethodGet {
				c.render(w, http.StatusUnauthorized, "error.html", view{Title: "Not logged in", Error: "log in first"})
				return
			}
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost {
			if !sameOrigin(r) {
				c.render(w, http.StatusForbidden, "error.html", view{Title: "Refused", Error: "Forbidden: a form posted from another origin"})
				return
			}
			limit := int64(64 << 10)
			if r.URL.Path == "/ui/modules" {
				limit = maxUpload
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			if !c.keys.checkCSRF(who.session, r.PostFormValue("csrf")) {
				c.render(w, http.StatusForbidden, "error.html", view{Title: "Refused", Error: "the form's CSRF token is missing or not this session's; reload the page"})
				return
			}
		}
		r = r.WithContext(admin.WithIdentity(r.Context(), who.identity))
		name, data, err := f(r)
		v := view{Identity: who.identity, CSRF: c.keys.csrf(who.session), Open: who.session == "local", Data: data}
		if err != nil {
			status := http.StatusInternalServerError
			var ae *admin.Error
			if errors.As(err, &ae) {
				status = ae.Status
			} else {
				c.log.Error("console: operation failed", "err", err)
			}
			v.Title, v.Error = "Failed", err.Error()
			c.render(w, status, "error.html", v)
			return
		}
		if path, ok := cutPrefix(name, "redirect:"); ok {
			http.Redirect(w, r, path, http.StatusSeeOther)
			return
		}
		v.Title, v.Nav = titles[name], name
		c.render(w, http.StatusOK, name, v)
	})
}

var titles = map[string]string{"overview.html": "Overview", "catalogue.html": "Catalogue", "policies.html": "Policies", "oauth.html": "OAuth", "fleet.html": "Fleet", "playground.html": "Playground", "tail.html": "Live tail", "item.html": "Catalogue"}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return s, false
}

func (c *Console) render(w http.ResponseWriter, status int, name string, v view) {
	t, err := parsed()
	if err != nil {
		c.log.Error("console: parsing templates", "err", err)
		http.Error(w, "console templates are broken", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := t.ExecuteTemplate(w, name, v); err != nil {
		c.log.Error("console: rendering", "page", name, "err", err)
	}
}

func (c *Console) serveCSS(w http.ResponseWriter, r *http.Request) {
	b, _ := files.ReadFile("static/console.css")
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Write(b)
}

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	if c.whoIs(r).identity != "" {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	c.render(w, http.StatusOK, "login.html", view{Title: "Log in", CSRF: c.keys.csrf("login")})
}

// login exchanges an admin token for a session cookie.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if !sameOrigin(r) || !c.keys.checkCSRF("login", r.PostFormValue("csrf")) {
		c.render(w, http.StatusForbidden, "login.html", view{Title: "Log in", CSRF: c.keys.csrf("login"), Error: "the form's CSRF token is missing or wrong; reload the page"})
		return
	}
	addr := clientAddr(r)
	if d := c.logins.wait(addr, c.now()); d > 0 {
		c.audit(admin.Record{Time: c.now().UTC(), Action: "console.login.limited", Target: addr, Detail: "too many failed logins"})
		w.Header().Set("Retry-After", strconv.Itoa(int(d.Seconds())+1))
		c.render(w, http.StatusTooManyRequests, "login.html", view{Title: "Log in", CSRF: c.keys.csrf("login"),
			Error: fmt.Sprintf("too many failed logins from %s: try again in %d s", addr, int(d.Seconds())+1)})
		return
	}
	id, ok := c.auth.TokenIdentity(r.PostFormValue("token"))
	if !ok {
		c.logins.failed(addr, c.now())
		c.audit(admin.Record{Time: c.now().UTC(), Action: "console.login.rejected", Target: addr, Detail: "not a valid admin token"})
		c.render(w, http.StatusUnauthorized, "login.html", view{Title: "Log in", CSRF: c.keys.csrf("login"), Error: "that is not a valid admin token"})
		return
	}
	c.audit(admin.Record{Time: c.now().UTC(), Identity: id, Action: "console.login"})
	c.setSession(w, r, id)
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	who := c.whoIs(r)
	if !sameOrigin(r) || !c.keys.checkCSRF(who.session, r.PostFormValue("csrf")) {
		c.render(w, http.StatusForbidden, "error.html", view{Title: "Refused", Error: "the form's origin or CSRF token is not this session's"})
		return
	}
	c.clearSession(w, r)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// sameOrigin says whether a form post came from the console's own origin:
// Origin absent (not a browser) or naming exactly this Host. The admin
// guard lets any loopback origin through to a loopback listener (another
// port is another origin, yet same-site for cookies); the console does
// not.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host == r.Host && u.Path == ""
}

// record audits a change made from the console.
func (c *Console) record(r *http.Request, action, target string, err error) {
	rec := admin.Record{Time: c.now().UTC(), Identity: admin.Identity(r.Context()), Action: action, Target: target, Detail: "from the console"}
	if err != nil {
		rec.Action += ".rejected"
		rec.Detail = err.Error()
	}
	c.audit(rec)
}
