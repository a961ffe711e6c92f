package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/transports"
)

// This file is the choice of the protocol revision spoken to an upstream:
// the server/discover probe (2026-07-28), the fallback to initialize
// (2025-11-25), and the per-request _meta keys of a 2026-07-28 link.
//
// What is remembered: the shared link probes on every (re)connect, since
// the server may have been upgraded meanwhile; per-client links use what
// the shared link found. A server that closed the connection on the probe
// (some stdio servers exit on an unknown method) is restarted and pinned to
// 2025-11-25 for the life of the upstream, i.e. until a configuration
// change replaces it, so that each reconnect does not kill a process.

// protocolVersion2026 is the first revision without initialize.
const protocolVersion2026 = transports.ProtocolVersion2026

// Values of the "protocol_version" key of a server.
const versionAuto = "auto"

// upstreamCapabilities are the client capabilities edge-mcp declares
// upstream: what it relays to its own clients.
const upstreamCapabilities = `{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{},"url":{}}}`

// metaProtocolVersion is the per-request _meta key of a 2026-07-28
// request's protocol version (the others are in runtime/bridge).
const metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// errProbeKilled marks a server that closed the connection (or, over
// stdio, did not answer in time) on the server/discover probe.
var errProbeKilled = errors.New("server closed the connection or did not answer on the server/discover probe")

// errKeep2025 marks a server offering both revisions over a transport
// where auto mode keeps 2025-11-25 (see keeps2025).
var errKeep2025 = errors.New("server offers " + protocolVersion2026 + " and " + upstreamProtocolVersion +
	"; keeping " + upstreamProtocolVersion + " over this transport in auto mode (set protocol_version to " + protocolVersion2026 + " to use it)")

// errNo2026 marks a server/discover answer without 2026-07-28 among the
// supported versions (a stateful go-sdk server, for one).
var errNo2026 = errors.New("server does not offer protocol version " + protocolVersion2026)

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
	switch mode {
	case upstreamProtocolVersion:
		return l.initialize(ctx)
	case protocolVersion2026:
		_, err := l.discoverServer(ctx)
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, probeBudget(ctx))
	offered, err := l.discoverServer(pctx)
	cancel()
	if err == nil {
		if l.u.keeps2025() && slices.Contains(offered, upstreamProtocolVersion) {
			// The probe set up the server's side of the connection:
			// initialize needs a new one.
			return errKeep2025
		}
		return nil
	}
	if l.probeKilled(err) {
		return fmt.Errorf("%w: %w", errProbeKilled, err)
	}
	var rpcErr *jsonrpc.Error
	unanswered := ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded)
	if !errors.Is(err, errNo2026) && !errors.As(err, &rpcErr) && !unanswered {
		return fmt.Errorf("initialize: probing server/discover: %w", err) // a broken connection
	}
	l.u.log.Debug("server/discover refused or unanswered; falling back to initialize", "err", err)
	l.setVersion("")
	return l.initialize(ctx)
}

// probeBudget is how long the server/discover probe may take of the
// handshake's time: half of it, at most 10 s, so that a server ignoring
// the unknown method leaves initialize the other half.
func probeBudget(ctx context.Context) time.Duration {
	d := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)/2)
	}
	return d
}

// probeKilled reports whether the probe's failure err means the server
// went away because of it: the connection ended, or a stdio server did not
// answer with an error of its own.
func (l *link) probeKilled(err error) bool {
	select {
	case <-l.done:
		return true
	default:
	}
	if l.u.cfg.Type != "stdio" || errors.Is(err, errNo2026) {
		return false
	}
	var rpcErr *jsonrpc.Error
	return !errors.As(err, &rpcErr) || errors.Is(err, errUnreachable)
}

// discoverServer probes server/discover in 2026-07-28 and, when the server
// offers that revision, takes its capabilities and instructions. It
// returns the revisions the server offers.
func (l *link) discoverServer(ctx context.Context) ([]string, error) {
	l.setVersion(protocolVersion2026)
	res, err := l.call(ctx, "server/discover", json.RawMessage(`{}`))
	if retryDiscover(err) {
		// UnsupportedProtocolVersion naming 2026-07-28 among the
		// supported versions: the revision says to retry with one of
		// them, and that is the one asked for.
		l.u.log.Debug("server/discover refused with " + protocolVersion2026 + " among the supported versions; retrying once")
		res, err = l.call(ctx, "server/discover", json.RawMessage(`{}`))
	}
	if err != nil {
		return nil, err // named by call
	}
	var r struct {
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      map[string]json.RawMessage `json:"capabilities"`
		Instructions      string                     `json:"instructions"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, fmt.Errorf("server/discover: decoding result: %w", err)
	}
	if !slices.Contains(r.SupportedVersions, protocolVersion2026) {
		return r.SupportedVersions, fmt.Errorf("server/discover: %w (it offers %q)", errNo2026, r.SupportedVersions)
	}
	l.protocolVersion, l.caps, l.instructions = protocolVersion2026, r.Capabilities, r.Instructions
	return r.SupportedVersions, nil
}

// retryDiscover reports whether err is an UnsupportedProtocolVersion error
// (-32022) whose data.supported names 2026-07-28.
func retryDiscover(err error) bool {
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != codeUnsupportedVersion {
		return false
	}
	var data struct {
		Supported []string `json:"supported"`
	}
	return json.Unmarshal(rpcErr.Data, &data) == nil && slices.Contains(data.Supported, protocolVersion2026)
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
	var kept [4]metaKey // on the stack
	keys := append(kept[:0],
		metaKey{name: metaProtocolVersion, value: json.RawMessage(`"` + protocolVersion2026 + `"`)},
		metaKey{name: metaClientCapabilities, value: caps},
		metaKey{name: metaClientInfo, value: json.RawMessage(clientInfo())})
	if cm.logLevel != "" {
		keys = append(keys, metaKey{name: metaLogLevel, value: json.RawMessage(`"` + cm.logLevel + `"`)})
	}
	out, err := stampMeta(params, keys)
	if err != nil {
		l.u.log.Debug("params not stamped with _meta", "err", err)
		return params
	}
	return out
}

// stampMeta returns params with keys set in its _meta object, in the
// order given; every other member of params and of _meta keeps its bytes
// and its place (nothing is decoded beyond _meta's members).
func stampMeta(params json.RawMessage, keys []metaKey) (json.RawMessage, error) {
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	meta, ok, err := wire.Field(params, "_meta")
	if err != nil {
		return nil, fmt.Errorf("decoding params: %w", err)
	}
	if !ok || string(meta) == "null" {
		meta = json.RawMessage(`{}`)
	}
	var set [8]wire.Member // one copy of _meta for all the keys; on the stack
	if len(keys) > len(set) {
		return nil, fmt.Errorf("params._meta: %d keys to stamp, at most %d", len(keys), len(set))
	}
	for i, k := range keys {
		set[i] = wire.Member{Key: k.name, Value: k.value}
	}
	if meta, err = wire.EditFields(meta, nil, set[:len(keys)]); err != nil {
		return nil, fmt.Errorf("params._meta: %w", err)
	}
	out, err := wire.SetField(params, "_meta", meta)
	if err != nil {
		return nil, fmt.Errorf("encoding params: %w", err)
	}
	return out, nil
}

// metaKey is one _meta member stampMeta sets.
type metaKey struct {
	name  string
	value json.RawMessage
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
// (owner != nil) use what the shared link found.
func (u *upstream) versionMode(owner *session) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.cfg.Type == "sse":
		return upstreamProtocolVersion
	case u.pinned != "":
		return u.pinned
	case u.cfg.ProtocolVersion != "" && u.cfg.ProtocolVersion != versionAuto:
		return u.cfg.ProtocolVersion
	case owner != nil && u.probed != "":
		return u.probed
	}
	return versionAuto
}

// connect dials t and sets up a link owned by owner (nil: the shared link)
// in revision mode. A server that went away on the probe is restarted
// (a new connection, over stdio a new process) and pinned to 2025-11-25.
func (u *upstream) connect(ctx context.Context, t mcp.Transport, owner *session, mode string) (*link, error) {
	l, err := u.connectOnce(ctx, t, owner, mode)
	if mode == versionAuto && ctx.Err() == nil && (errors.Is(err, errProbeKilled) || errors.Is(err, errKeep2025)) {
		u.mu.Lock()
		u.pinned = upstreamProtocolVersion
		u.mu.Unlock()
		if errors.Is(err, errProbeKilled) {
			u.log.Warn("server/discover probe failed: the server exited, closed the connection or did not answer; reconnecting pinned to protocol "+upstreamProtocolVersion, "reason", err)
		} else {
			u.log.Info("reconnecting pinned to protocol "+upstreamProtocolVersion, "reason", err)
		}
		l, err = u.connectOnce(ctx, t, owner, upstreamProtocolVersion)
	}
	if err != nil {
		return nil, err
	}
	if owner == nil {
		if l.v2026.Load() {
			go l.listen()
		}
		u.mu.Lock()
		u.probed = l.protocolVersion
		if !l.v2026.Load() {
			u.probed = upstreamProtocolVersion
		}
		u.mu.Unlock()
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
	var kinds []string
	for _, k := range []struct{ capability, param string }{
		{"tools", "toolsListChanged"}, {"prompts", "promptsListChanged"}, {"resources", "resourcesListChanged"},
	} {
		if v, ok, _ := wire.Field(l.caps[k.capability], "listChanged"); ok && string(v) == "true" {
			kinds = append(kinds, `"`+k.param+`":true`)
		}
	}
	if len(kinds) == 0 {
		return
	}
	params := json.RawMessage(`{"notifications":{` + strings.Join(kinds, ",") + `}}`)
	if _, err := l.call(l.ctx, "subscriptions/listen", params); err != nil && l.ctx.Err() == nil {
		l.u.log.Warn("subscriptions/listen ended: list changes are not followed until the server reconnects", "err", err)
	}
}
