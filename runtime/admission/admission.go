// Package admission holds the admission settings of one configuration
// generation of the gateway: who is calling (authentication), what they
// may see and call (access lists, enforced before any policy module), how
// much (rate limits, and the upstream concurrency holders), and the
// per-tool rules (timeouts, visibility, approval, argument checks).
//
// A Guard is built from one configuration by New and swapped whole on
// reload; it is safe for concurrent use (the tool rules are resolved once
// per tool and memoized, the concurrency holders made on first use under a
// lock). Its lifetime is that generation's: Close releases what it holds
// (the JWKS refresher) once the gateway has swapped in its successor.
package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/internal/limits"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// Guard holds the admission settings of one configuration generation.
type Guard struct {
	Auth       *auth.Authenticator // nil: no authentication (mode none)
	Access     []config.AccessRule // nil: everyone may use everything
	rules      []config.ToolRule
	clientRate RateLimiter   // nil: none
	toolRate   RateLimiter   // nil: none
	ruleRates  []RateLimiter // by rule index; nil: none
	// virtualRates are the virtual servers' rate_limit, by name.
	virtualRates map[string]RateLimiter
	concLimit    int
	concQueue    int
	// AnyDeferred is set when a rule defers tools.
	AnyDeferred bool

	concMu sync.Mutex
	conc   map[string]*limits.Concurrency // by upstream name

	resolved sync.Map // toolKey → *ToolSettings
}

// toolKey names a tool of a server by its exposed name.
type toolKey struct{ server, tool string }

// ToolSettings are the tool rules resolved for one tool.
type ToolSettings struct {
	Deferred bool
	Approval bool
	Validate bool
	Timeout  time.Duration
	Rate     RateLimiter
}

// New builds the admission settings of cfg.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Guard, error) {
	gd := &Guard{Access: cfg.Access, rules: cfg.ToolRules, conc: map[string]*limits.Concurrency{}}
	if a := cfg.Auth; a.Mode != "" && a.Mode != "none" {
		ac, err := authConfig(cfg)
		if err != nil {
			return nil, err
		}
		if gd.Auth, err = auth.New(ctx, ac, auth.Options{Logger: log}); err != nil {
			return nil, &config.Error{File: cfg.Path, Key: "auth", Reason: err.Error()}
		}
	} else if !config.LoopbackAddr(cfg.Listen) && !a.AllowUnauthenticated {
		return nil, &config.Error{File: cfg.Path, Key: "auth.mode",
			Reason: fmt.Sprintf(`is "none" but the listener %s is not loopback: anyone who reaches it could call every tool; set "auth" (api_key or jwt), or auth.allow_unauthenticated: true if something in front authenticates`, cfg.Listen)}
	}
	gd.clientRate = localRate(cfg.Limits.ClientRate)
	gd.toolRate = localRate(cfg.Limits.ToolRate)
	gd.ruleRates = make([]RateLimiter, len(cfg.ToolRules))
	gd.virtualRates = map[string]RateLimiter{}
	for _, vc := range cfg.VirtualServers {
		if l := localRate(vc.RateLimit); l != nil {
			gd.virtualRates[vc.Name] = l
		}
	}
	for i, r := range cfg.ToolRules {
		if r.Visibility == "deferred" {
			gd.AnyDeferred = true
		}
		gd.ruleRates[i] = localRate(r.Rate)
		for _, p := range append(append([]string{}, r.Servers...), r.Tools...) {
			if _, err := path.Match(p, ""); err != nil {
				return nil, &config.Error{File: cfg.Path, Key: fmt.Sprintf("tool_rules[%d]", i), Reason: fmt.Sprintf("bad glob %q", p)}
			}
		}
	}
	for i, r := range cfg.Access {
		for _, p := range append(append(append(append([]string{}, r.Identities...), r.Servers...), r.Tools...), r.DenyTools...) {
			if _, err := path.Match(p, ""); err != nil {
				return nil, &config.Error{File: cfg.Path, Key: fmt.Sprintf("access[%d]", i), Reason: fmt.Sprintf("bad glob %q", p)}
			}
		}
	}
	gd.concLimit = cfg.Limits.UpstreamConcurrency
	gd.concQueue = 2 * gd.concLimit
	if q := cfg.Limits.UpstreamQueue; q != nil {
		gd.concQueue = *q
	}
	return gd, nil
}

// authConfig translates the auth section, reading key files.
func authConfig(cfg *config.Config) (auth.Config, error) {
	a := cfg.Auth
	ac := auth.Config{Mode: a.Mode}
	for _, k := range a.APIKeys {
		ac.APIKeys = append(ac.APIKeys, auth.APIKey{Name: k.Name, Key: k.Key, SHA256: k.SHA256, Revoked: k.Revoked})
	}
	if j := a.JWT; j != nil {
		jc := auth.JWTConfig{Issuer: j.Issuer, Audience: j.Audience, Algorithms: j.Algorithms, JWKSURL: j.JWKSURL,
			JWKSRefresh: seconds(j.JWKSRefresh), Leeway: seconds(j.Leeway), IdentityClaim: j.IdentityClaim}
		if j.HMACSecret != "" {
			jc.HMACSecret = []byte(j.HMACSecret)
		}
		read := func(key, file string) ([]byte, error) {
			b, err := os.ReadFile(file)
			if err != nil {
				return nil, &config.Error{File: cfg.Path, Key: key, Reason: fmt.Sprintf("reading %s: %v", file, errors.Unwrap(err))}
			}
			return b, nil
		}
		var err error
		if j.HMACSecretFile != "" {
			if jc.HMACSecret, err = read("auth.jwt.hmac_secret_file", j.HMACSecretFile); err != nil {
				return ac, err
			}
			jc.HMACSecret = []byte(strings.TrimSpace(string(jc.HMACSecret)))
		}
		if j.PublicKeysFile != "" {
			if jc.PublicKeysPEM, err = read("auth.jwt.public_keys_file", j.PublicKeysFile); err != nil {
				return ac, err
			}
		}
		ac.JWT = jc
	}
	if m := a.ResourceMetadata; m != nil {
		ac.ResourceMetadata = &auth.ResourceMetadata{Resource: m.Resource, AuthorizationServers: m.AuthorizationServers,
			ScopesSupported: m.ScopesSupported, BearerMethodsSupported: m.BearerMethodsSupported, ResourceName: m.ResourceName}
	}
	return ac, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Close releases what the Guard holds (the JWKS refresher).
func (gd *Guard) Close() {
	if gd != nil && gd.Auth != nil {
		gd.Auth.Close()
	}
}

func matchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}

// matchAll is matchAny, where no patterns match everything.
func matchAll(patterns []string, s string) bool { return len(patterns) == 0 || matchAny(patterns, s) }

// ServerAllowed reports whether identity may use anything of server.
func (gd *Guard) ServerAllowed(identity, server string) bool {
	if gd.Access == nil {
		return true
	}
	for _, r := range gd.Access {
		if matchAny(r.Identities, identity) && matchAll(r.Servers, server) {
			return true
		}
	}
	return false
}

// ToolAllowed reports whether identity may see and call a server's tool
// (by its exposed name).
func (gd *Guard) ToolAllowed(identity, server, tool string) bool {
	if gd.Access == nil {
		return true
	}
	for _, r := range gd.Access {
		if matchAny(r.Identities, identity) && matchAll(r.Servers, server) && matchAll(r.Tools, tool) && !matchAny(r.DenyTools, tool) {
			return true
		}
	}
	return false
}

// Settings resolves the tool rules for one tool, memoized.
func (gd *Guard) Settings(server, tool string) *ToolSettings {
	k := toolKey{server, tool}
	if v, ok := gd.resolved.Load(k); ok {
		return v.(*ToolSettings)
	}
	ts := &ToolSettings{Validate: true}
	for i, r := range gd.rules {
		if !matchAll(r.Servers, server) || !matchAll(r.Tools, tool) {
			continue
		}
		switch r.Visibility {
		case "deferred":
			ts.Deferred = true
		case "visible":
			ts.Deferred = false
		}
		if r.RequireApproval != nil {
			ts.Approval = *r.RequireApproval
		}
		if r.ValidateArguments != nil {
			ts.Validate = *r.ValidateArguments
		}
		if r.Timeout > 0 {
			ts.Timeout = seconds(r.Timeout)
		}
		if gd.ruleRates[i] != nil {
			ts.Rate = gd.ruleRates[i]
		}
	}
	v, _ := gd.resolved.LoadOrStore(k, ts)
	return v.(*ToolSettings)
}

// Concurrency returns the limiter of an upstream, or nil when unlimited.
func (gd *Guard) Concurrency(server string) *limits.Concurrency {
	if gd.concLimit <= 0 {
		return nil
	}
	gd.concMu.Lock()
	defer gd.concMu.Unlock()
	c := gd.conc[server]
	if c == nil {
		c = limits.NewConcurrency(gd.concLimit, gd.concQueue)
		gd.conc[server] = c
	}
	return c
}

// RateLimited is the answer to a call over a rate limit.
type RateLimited struct {
	Scope      string // "client", "virtual_server" or "tool"
	RetryAfter time.Duration
}

func (r *RateLimited) Error() string {
	return fmt.Sprintf("edge-mcp: rate limit (%s) exceeded; retry after %d s", r.Scope, RetryAfterSeconds(r.RetryAfter))
}

func RetryAfterSeconds(d time.Duration) int { return int(math.Ceil(max(d, time.Second).Seconds())) }

// AllowCall takes a token from every rate limit that applies to identity
// calling a server's tool through virtual server vs ("" for none); nil
// means go ahead.
func (gd *Guard) AllowCall(vs, identity, server, tool string) *RateLimited {
	if ok, after := allow(gd.clientRate, identity); !ok {
		return &RateLimited{"client", after}
	}
	if ok, after := allow(gd.virtualRates[vs], identity); !ok {
		return &RateLimited{"virtual_server", after}
	}
	return gd.AllowTool(identity, server, tool)
}

// AllowTool takes a token from the per-tool rate limits of identity
// calling a server's tool; nil means go ahead.
func (gd *Guard) AllowTool(identity, server, tool string) *RateLimited {
	key := identity + "\x00" + server + "\x00" + tool
	if ok, after := allow(gd.toolRate, key); !ok {
		return &RateLimited{"tool", after}
	}
	if ts := gd.Settings(server, tool); ts.Rate != nil {
		if ok, after := ts.Rate.Allow(key); !ok {
			return &RateLimited{"tool", after}
		}
	}
	return nil
}

// Limited reports whether any rate limit is configured.
func (gd *Guard) Limited() bool {
	if gd.clientRate != nil || gd.toolRate != nil || len(gd.virtualRates) > 0 {
		return true
	}
	for _, r := range gd.ruleRates {
		if r != nil {
			return true
		}
	}
	return false
}

// RateLimiter is one rate limit of the Guard: this replica's own
// (limits.RateLimiter) or the fleet's (fleet.Limiter).
type RateLimiter interface {
	// Allow takes a token of key's bucket, or says how long until there is one.
	Allow(key string) (ok bool, retryAfter time.Duration)
}

// localRate is r limited by this replica alone; nil when r sets no limit.
func localRate(r *config.Rate) RateLimiter {
	if r == nil {
		return nil
	}
	if l := limits.NewRateLimiter(r.RPS, r.Burst); l != nil {
		return l
	}
	return nil
}

// allow asks l, where nil allows everything.
func allow(l RateLimiter, key string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	return l.Allow(key)
}

// ShareRates makes the guard's rate limits the ones rate returns for each
// limit's name (the fleet's: the names are the same on every replica of a
// fleet that runs the same config). Called before the guard is in use.
func (gd *Guard) ShareRates(cfg *config.Config, rate func(name string, r *config.Rate) RateLimiter) {
	gd.clientRate = rate("client", cfg.Limits.ClientRate)
	gd.toolRate = rate("tool", cfg.Limits.ToolRate)
	for i, r := range cfg.ToolRules {
		gd.ruleRates[i] = rate("rule"+strconv.Itoa(i), r.Rate)
	}
	for _, vc := range cfg.VirtualServers {
		if vc.RateLimit != nil {
			gd.virtualRates[vc.Name] = rate("vs-"+vc.Name, vc.RateLimit)
		}
	}
}

// Rates returns the guard's rate limits: the client's, the tool's, then
// the tool rules' in order (nil where none is set).
func (gd *Guard) Rates() []RateLimiter {
	return append([]RateLimiter{gd.clientRate, gd.toolRate}, gd.ruleRates...)
}
