package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/internal/pinning"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/runtime/admission"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
	"github.com/edge-mcp/edge-mcp/runtime/oauth"
	"github.com/edge-mcp/edge-mcp/runtime/probe"
	"github.com/edge-mcp/edge-mcp/runtime/relay"
	"github.com/edge-mcp/edge-mcp/runtime/virtual"
)

// This file is the gateway's side of its fleet (runtime/fleet does the
// work): the parts of the gateway the fleet drives (fleet.Host) and a
// session as the fleet sees it (fleet.Session). Without a cluster section
// g.fleet is nil and its methods answer as a single replica.

// fleetHost is g as its fleet sees it.
func fleetHost(g *Gateway) fleet.Host {
	return fleet.Host{
		Config: g.config, Version: Version, Streams: g.http, Peers: fleetPeers{},
		Policies: &g.pol, Pins: fleetPins{g}, Audit: g.audit,
		CheckSignature: func(wasm []byte, sig string) error {
			_, err := checkSignature(g.config(), wasm, sig)
			return err
		},
		Joined: func(node *cluster.Node) (func(), error) {
			fs := &fleetSessions{g: g, node: node, log: g.log}
			if err := g.bridge.ServeRetries(g.ctx, node); err != nil { // runtime/bridge
				g.log.Error("cluster: bridged calls stay on the replica that parked them", "err", err)
			} else {
				g.fleetSess.Store(fs)
			}
			cfg := g.config()
			key, _, err := oauth.ConfigKey(cfg, cfg.StateDirUnder(g.opts.StateDir))
			if err != nil {
				return nil, err
			}
			return g.oauth.JoinFleet(node, key)
		},
	}
}

// fleetSessions is the fleet as bridged calls' retries use it
// (bridge_fleet.go); nil until the fleet is joined.
type fleetSessions struct {
	g    *Gateway
	node *cluster.Node
	log  *slog.Logger
}

// ownerMargin is added to the upstream's timeout when waiting for another
// replica's answer.
const ownerMargin = 5 * time.Second

// shareLimits makes gd's rate limits the fleet's, whose names are the
// same on every replica of a fleet that runs the same config (nil f:
// none).
func shareLimits(f *fleet.Fleet, gd *guard, cfg *config.Config) {
	if f == nil {
		return
	}
	gd.ShareRates(cfg, func(name string, r *config.Rate) admission.RateLimiter { return f.Rate(name, r) })
}

// fleetPeers are the gateway's transport peers, for session tokens.
type fleetPeers struct{}

func (fleetPeers) Identity(p any) (auth.Identity, bool) {
	pr, ok := p.(*peer)
	if !ok {
		return auth.Identity{}, false
	}
	return pr.id, true
}

func (fleetPeers) RequestIdentity(r *http.Request) auth.Identity { return identityOf(r) }

func (fleetPeers) Adopted(r *http.Request, id auth.Identity, c *cluster.SessionClaims) any {
	// A virtual server's session continues on its path (runtime/virtual).
	return &peer{id: id, transport: transportStreamable, adopted: c, vs: virtual.NameOf(r)}
}

func (fleetPeers) Version(requested string) string { return probe.Negotiate(requested) }

// fleetPins are the gateway's tool pins as the fleet's decisions change
// them.
type fleetPins struct{ g *Gateway }

func (p fleetPins) Pending() []pinning.Change        { return p.g.pinGate.FleetPending() }
func (p fleetPins) Approve(server, tool string) bool { return p.g.pinGate.FleetApprove(server, tool) }
func (p fleetPins) Reject(server, tool, fp string) bool {
	return p.g.pinGate.FleetReject(server, tool, fp)
}
func (p fleetPins) Changed() { p.g.route.publish(nil) }

// fleetSession is a session as the fleet drives it.
type fleetSession struct{ s *session }

func (f fleetSession) ID() string                          { return f.s.conn.SessionID() }
func (f fleetSession) Shared() bool                        { return f.s.transport == transportStreamable }
func (f fleetSession) Identity() string                    { return f.s.id.Name }
func (f fleetSession) Context() context.Context            { return f.s.ctx }
func (f fleetSession) State() *fleet.SessionState          { return &f.s.fleet }
func (f fleetSession) Serve(req *jsonrpc.Request)          { f.s.handleCall(req) }
func (f fleetSession) Write(r *jsonrpc.Response)           { f.s.write(f.s.ctx, r) }
func (f fleetSession) Answer(n int64, r *jsonrpc.Response) { f.s.answer(n, r) }
func (f fleetSession) Close()                              { f.s.conn.Close() }

func (f fleetSession) Cancel(params json.RawMessage) bool {
	id, ok := relay.CancelledID(params)
	if ok {
		reason, _ := wire.String(params, "reason")
		f.s.cancelCall(id, reason)
	}
	return ok
}

func (f fleetSession) SetLevel(level string) {
	if i := levelIndex(level); i >= 0 {
		f.s.logLevel.Store(int32(i))
	}
}

func (f fleetSession) PerClient(req *jsonrpc.Request) (string, time.Duration, bool) {
	var u *upstream
	switch req.Method {
	case "tools/call", "prompts/get":
		k := kindTools
		if req.Method == "prompts/get" {
			k = kindPrompts
		}
		if name, ok := wire.String(req.Params, "name"); ok {
			if it := f.s.catalogue().Find(k, name); it != nil {
				u = it.Up
			}
		}
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		if uri, ok := wire.String(req.Params, "uri"); ok {
			u = f.s.g.route.catalogue().Resource(uri)
		}
	}
	if u == nil || !u.perClient() {
		return "", 0, false
	}
	return u.name, u.cfg.Timeout, true
}

// adopt sets up a session another replica opened, from its token: it is
// initialized, with the client's capabilities, name and log level.
func adopt(s *session, c *cluster.SessionClaims) {
	var caps struct {
		Sampling    json.RawMessage `json:"sampling"`
		Elicitation json.RawMessage `json:"elicitation"`
		Roots       json.RawMessage `json:"roots"`
	}
	_ = json.Unmarshal(c.Caps, &caps) // sealed by the fleet: valid JSON or absent
	s.caps.sampling = caps.Sampling != nil
	s.caps.elicitation = caps.Elicitation != nil
	s.caps.roots = caps.Roots != nil
	name, _ := wire.String(c.Info, "name")
	s.client.Name = name
	if i := levelIndex(c.LogLevel); i >= 0 {
		s.logLevel.Store(int32(i))
	}
	s.g.fleet.Adopt(&s.fleet, c)
	s.initialized.Store(true)
}

// syncLevel tells l the session's log level before the session's request
// goes there, when the session set one (perhaps through another replica:
// fleet.ReadLevel) and l was told none or a less verbose one. Outside a
// fleet setLevel tells every link itself.
func syncLevel(s *session, u *upstream, l *link) {
	if s.g.fleet.Sessions() == nil || s.modern.Load() || l.v2026.Load() {
		// A 2026-07-28 request carries its level in _meta (clientMeta).
		return
	}
	if s.logLevel.Load() < 0 {
		if level := s.g.fleet.ReadLevel(fleetSession{s}); level != "" && s.logLevel.Load() < 0 {
			s.logLevel.Store(int32(levelIndex(level)))
		}
	}
	lv := s.logLevel.Load()
	if lv < 0 || int(lv) >= len(logLevels) { // not set, or a 2026-07-28 request's "none"
		return
	}
	if _, ok := l.caps["logging"]; !ok {
		return
	}
	if told := l.toldLevel.Load(); told != 0 && told-1 <= lv {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, u.cfg.Timeout)
	defer cancel()
	if _, err := l.call(ctx, "logging/setLevel", levelParams(logLevels[lv])); err != nil {
		u.log.Warn("passing a session's log level upstream", "err", err)
		return
	}
	l.toldLevel.Store(lv + 1)
}

func levelParams(level string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Level string `json:"level"`
	}{level})
	return b
}
