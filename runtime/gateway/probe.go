package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/runtime/probe"
	"github.com/edge-mcp/edge-mcp/transports"
)

// This file is the choice of the protocol revision spoken to an upstream:
// the server/discover probe (2026-07-28), the fallback to initialize
// (2025-11-25), and the per-request _meta keys of a 2026-07-28 link. The
// handshake itself and the _meta encoding are runtime/probe's; this file
// is what the gateway remembers of them and how its links speak.
//
// What is remembered is the upstream's probe.Memory (u.versions): what
// the shared link found, and the pin to 2025-11-25 of a server that went
// away on the probe (it is restarted).

// protocolVersion2026 is the first revision without initialize.
const protocolVersion2026 = probe.Version2026

// Values of the "protocol_version" key of a server.
const versionAuto = probe.Auto

// upstreamCapabilities are the client capabilities edge-mcp declares
// upstream: what it relays to its own clients.
const upstreamCapabilities = `{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{},"url":{}}}`

// metaProtocolVersion is the per-request _meta key of a 2026-07-28
// request's protocol version (the others are in runtime/bridge).
const metaProtocolVersion = probe.MetaProtocolVersion

// clientInfo is edge-mcp's implementation object.
func clientInfo() string { return clientInfoJSON() }

// clientInfoJSON is made once, on first use (Version is set by then).
var clientInfoJSON = sync.OnceValue(func() string {
	return `{"name":"edge-mcp","version":` + string(mustJSON(Version)) + `}`
})

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// handshake sets up the link in the revision mode names: 2025-11-25
// (initialize), 2026-07-28 (server/discover) or auto (server/discover,
// falling back to initialize when the server refuses it).
func (l *link) handshake(ctx context.Context, mode string) error {
	return probe.Handshake(ctx, probeLink{l}, probe.Options{
		Mode: mode, Stdio: l.u.cfg.Type == "stdio", Keeps2025: l.u.keeps2025(), Unreachable: errUnreachable,
		Capabilities: upstreamCapabilities, ClientInfo: clientInfo(), Log: l.u.log,
	})
}

// probeLink is a link as runtime/probe's handshake uses it, on the
// goroutine connecting it, before anything else uses the link.
type probeLink struct{ *link }

func (p probeLink) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return p.call(ctx, method, params)
}
func (p probeLink) Notify(method string, params json.RawMessage) { p.notify(method, params) }
func (p probeLink) SetVersion(v string)                          { p.setVersion(v) }
func (p probeLink) Established(s probe.Server) {
	p.protocolVersion, p.caps, p.instructions = s.Version, s.Capabilities, s.Instructions
}
func (p probeLink) Ended() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// setVersion makes the link's requests speak v ("" until initialize
// answers): the _meta keys of 2026-07-28, and the transport's headers.
func (l *link) setVersion(v string) {
	l.v2026.Store(v == protocolVersion2026)
	if vs, ok := l.conn.(transports.VersionSetter); ok {
		vs.SetProtocolVersion(v)
	}
}

// stamp adds the per-request _meta keys of 2026-07-28 (protocol version,
// client capabilities and info of edge-mcp's own upstream connection) to
// the params of a request sent on a 2026-07-28 link; other links get
// params unchanged. The downstream client's own per-connection keys were
// dropped before (rewriteMeta), and the gateway's overwrite any left.
func (l *link) stamp(params json.RawMessage) json.RawMessage {
	return l.stampFor(params, clientMeta{})
}

// stampFor is stamp for a request made on behalf of a client: cm.caps are
// its capabilities (nil: the gateway's own request, stamped with
// upstreamCapabilities; the upstream must not ask, by an input_required
// result, for what the client cannot answer), cm.logLevel the level a 2025
// client set with logging/setLevel ("" : none stamped).
func (l *link) stampFor(params json.RawMessage, cm clientMeta) json.RawMessage {
	if !l.v2026.Load() {
		return params
	}
	caps := cm.caps
	if caps == nil {
		caps = json.RawMessage(upstreamCapabilities)
	}
	var kept [4]probe.Meta // on the stack
	keys := append(kept[:0],
		probe.Meta{Name: metaProtocolVersion, Value: json.RawMessage(`"` + protocolVersion2026 + `"`)},
		probe.Meta{Name: metaClientCapabilities, Value: caps},
		probe.Meta{Name: metaClientInfo, Value: json.RawMessage(clientInfo())})
	if cm.logLevel != "" {
		keys = append(keys, probe.Meta{Name: metaLogLevel, Value: json.RawMessage(`"` + cm.logLevel + `"`)})
	}
	out, err := probe.StampMeta(params, keys)
	if err != nil {
		l.u.log.Debug("params not stamped with _meta", "err", err)
		return params
	}
	return out
}

// pingMethod is the method of health checks: 2026-07-28 has no ping.
func (l *link) pingMethod() string {
	if l.v2026.Load() {
		return "server/discover"
	}
	return "ping"
}

// keeps2025 reports whether auto mode keeps 2025-11-25 with a server that
// offers both revisions: over stdio and WebSocket, one long-lived
// connection whose 2025 session carries server→client requests and
// notifications as such servers' own clients know them. Since
// runtime/bridge a 2026-07-28 link's input_required results reach 2025
// clients too, so protocol_version "2026-07-28" works there; auto mode
// stays conservative. A streamable HTTP server offering 2026-07-28 is
// stateless (go-sdk offers it only then), so it loses nothing.
func (u *upstream) keeps2025() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cfg.Type == "stdio" || u.cfg.Type == "websocket"
}

// versionMode is the revision mode of a new link of u: per-client links
// (owner != nil) use what the shared link found (probe.Memory.Mode).
func (u *upstream) versionMode(owner *session) string {
	u.mu.Lock()
	transport, configured := u.cfg.Type, u.cfg.ProtocolVersion
	u.mu.Unlock()
	return u.versions.Mode(transport, configured, owner != nil)
}

// connect dials t and sets up a link owned by owner (nil: the shared link)
// in revision mode. A server that went away on the probe is restarted
// (a new connection, over stdio a new process) and pinned to 2025-11-25.
func (u *upstream) connect(ctx context.Context, t mcp.Transport, owner *session, mode string) (*link, error) {
	l, err := u.connectOnce(ctx, t, owner, mode)
	if ctx.Err() == nil && u.versions.Retry(mode, err, u.log) {
		l, err = u.connectOnce(ctx, t, owner, upstreamProtocolVersion)
	}
	if err != nil {
		return nil, err
	}
	if owner == nil {
		if l.v2026.Load() {
			go l.listen()
		}
		u.versions.Found(l.v2026.Load())
	}
	return l, nil
}

func (u *upstream) connectOnce(ctx context.Context, t mcp.Transport, owner *session, mode string) (*link, error) {
	conn, err := t.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	l := newLink(ctx, u, conn, owner)
	initCtx, cancel := context.WithTimeout(ctx, u.cfg.Timeout)
	defer cancel()
	if err := l.handshake(initCtx, mode); err != nil {
		l.close(err)
		<-l.done
		return nil, err
	}
	return l, nil
}

// listen keeps a subscriptions/listen request open on a 2026-07-28 shared
// link for the list_changed notifications its server capabilities
// announce: 2026-07-28 has no standalone stream, the notifications arrive
// on this request's stream and the read loop handles them as before. It
// returns when the link ends or the server ends the request.
func (l *link) listen() {
	params, ok := probe.ListenParams(l.caps)
	if !ok {
		return
	}
	if _, err := l.call(l.ctx, "subscriptions/listen", params); err != nil && l.ctx.Err() == nil {
		l.u.log.Warn("subscriptions/listen ended: list changes are not followed until the server reconnects", "err", err)
	}
}
