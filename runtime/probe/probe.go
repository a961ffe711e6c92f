// Package probe chooses the protocol revision spoken to an upstream MCP
// server: the server/discover probe (2026-07-28), the fallback to
// initialize (2025-11-25), and the per-request _meta keys of a 2026-07-28
// request.
//
// The gateway owns the connection: it hands Handshake a Link (its
// connection as this package sees it) and learns the outcome through
// Link.Established. Nothing here holds state between calls; Handshake
// runs on the caller's goroutine, uses the Link only until it returns,
// and every function is safe for concurrent use on distinct Links.
package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/transports"
)

// Revisions and modes.
const (
	// Version2025 is the revision asked for with initialize.
	Version2025 = "2025-11-25"
	// Version2026 is the first revision without initialize.
	Version2026 = transports.ProtocolVersion2026
	// Auto is the mode that probes server/discover and falls back to
	// initialize when the server refuses it.
	Auto = "auto"
)

// Known are the revisions initialize accepts, oldest first.
var Known = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

// Negotiate is the revision a client's initialize is answered with: the
// one it asked for when it is Known, else the newest of Known.
func Negotiate(requested string) string {
	if slices.Contains(Known, requested) {
		return requested
	}
	return Known[len(Known)-1]
}

// MetaProtocolVersion is the per-request _meta key of a 2026-07-28
// request's protocol version (the others are in runtime/bridge).
const MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// codeUnsupportedVersion is UnsupportedProtocolVersion (2026-07-28).
const codeUnsupportedVersion = -32022

// ErrKilled marks a server that closed the connection (or, over stdio,
// did not answer in time) on the server/discover probe.
var ErrKilled = errors.New("server closed the connection or did not answer on the server/discover probe")

// ErrKeep2025 marks a server offering both revisions over a transport
// where auto mode keeps 2025-11-25 (Options.Keeps2025).
var ErrKeep2025 = errors.New("server offers " + Version2026 + " and " + Version2025 +
	"; keeping " + Version2025 + " over this transport in auto mode (set protocol_version to " + Version2026 + " to use it)")

// errNo2026 marks a server/discover answer without 2026-07-28 among the
// supported versions (a stateful go-sdk server, for one).
var errNo2026 = errors.New("server does not offer protocol version " + Version2026)

// Link is a new connection to an upstream, as the handshake uses it. The
// handshake calls it from one goroutine.
type Link interface {
	// Call sends a request and waits for its result; an error response
	// is returned as a *jsonrpc.Error.
	Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// Notify sends a notification; failures are the link's to note.
	Notify(method string, params json.RawMessage)
	// SetVersion makes the link's requests speak v ("" until initialize
	// answers).
	SetVersion(v string)
	// Ended reports whether the connection has ended.
	Ended() bool
	// Established records what the server said of itself, before the
	// handshake's last message (notifications/initialized) is sent.
	Established(Server)
}

// Server is what a handshake learns of the server.
type Server struct {
	Version      string
	Capabilities map[string]json.RawMessage
	Instructions string
}

// Options are what Handshake needs to know of the upstream.
type Options struct {
	// Mode: Version2025 (initialize), Version2026 (server/discover) or
	// Auto (server/discover, falling back to initialize).
	Mode string
	// Stdio: the server is a subprocess, which an unanswered probe may
	// have killed.
	Stdio bool
	// Keeps2025: auto mode keeps 2025-11-25 with a server offering both.
	Keeps2025 bool
	// Unreachable wraps the errors of a call the server did not answer
	// itself (the connection, or the transport, failed).
	Unreachable error
	// Capabilities and ClientInfo are the JSON of what initialize
	// declares.
	Capabilities, ClientInfo string
	Log                      *slog.Logger
}

// Handshake sets up l in the revision mode o.Mode names. It wraps
// ErrKilled when the server went away on the probe, and returns
// ErrKeep2025 when a new connection must speak 2025-11-25.
func Handshake(ctx context.Context, l Link, o Options) error {
	switch o.Mode {
	case Version2025:
		return initialize(ctx, l, o)
	case Version2026:
		_, err := discover(ctx, l, o.Log)
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, budget(ctx))
	offered, err := discover(pctx, l, o.Log)
	cancel()
	if err == nil {
		if o.Keeps2025 && slices.Contains(offered, Version2025) {
			// The probe set up the server's side of the connection:
			// initialize needs a new one.
			return ErrKeep2025
		}
		return nil
	}
	if killed(l, o, err) {
		return fmt.Errorf("%w: %w", ErrKilled, err)
	}
	var rpcErr *jsonrpc.Error
	unanswered := ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded)
	if !errors.Is(err, errNo2026) && !errors.As(err, &rpcErr) && !unanswered {
		return fmt.Errorf("initialize: probing server/discover: %w", err) // a broken connection
	}
	o.Log.Debug("server/discover refused or unanswered; falling back to initialize", "err", err)
	l.SetVersion("")
	return initialize(ctx, l, o)
}

// budget is how long the server/discover probe may take of the
// handshake's time: half of it, at most 10 s, so that a server ignoring
// the unknown method leaves initialize the other half.
func budget(ctx context.Context) time.Duration {
	d := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)/2)
	}
	return d
}

// killed reports whether the probe's failure err means the server went
// away because of it: the connection ended, or a stdio server did not
// answer with an error of its own.
func killed(l Link, o Options, err error) bool {
	if l.Ended() {
		return true
	}
	if !o.Stdio || errors.Is(err, errNo2026) {
		return false
	}
	var rpcErr *jsonrpc.Error
	return !errors.As(err, &rpcErr) || errors.Is(err, o.Unreachable)
}

// discover probes server/discover in 2026-07-28 and, when the server
// offers that revision, takes its capabilities and instructions. It
// returns the revisions the server offers.
func discover(ctx context.Context, l Link, log *slog.Logger) ([]string, error) {
	l.SetVersion(Version2026)
	res, err := l.Call(ctx, "server/discover", json.RawMessage(`{}`))
	if retryDiscover(err) {
		// UnsupportedProtocolVersion naming 2026-07-28 among the
		// supported versions: the revision says to retry with one of
		// them, and that is the one asked for.
		log.Debug("server/discover refused with " + Version2026 + " among the supported versions; retrying once")
		res, err = l.Call(ctx, "server/discover", json.RawMessage(`{}`))
	}
	if err != nil {
		return nil, err // named by Call
	}
	var r struct {
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      map[string]json.RawMessage `json:"capabilities"`
		Instructions      string                     `json:"instructions"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return nil, fmt.Errorf("server/discover: decoding result: %w", err)
	}
	if !slices.Contains(r.SupportedVersions, Version2026) {
		return r.SupportedVersions, fmt.Errorf("server/discover: %w (it offers %q)", errNo2026, r.SupportedVersions)
	}
	l.Established(Server{Version: Version2026, Capabilities: r.Capabilities, Instructions: r.Instructions})
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
	return json.Unmarshal(rpcErr.Data, &data) == nil && slices.Contains(data.Supported, Version2026)
}

// initialize performs the 2025-11-25 handshake.
func initialize(ctx context.Context, l Link, o Options) error {
	params := `{"protocolVersion":"` + Version2025 + `","capabilities":` + o.Capabilities + `,"clientInfo":` + o.ClientInfo + `}`
	res, err := l.Call(ctx, "initialize", json.RawMessage(params))
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var r struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
		Instructions    string                     `json:"instructions"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return fmt.Errorf("initialize: decoding result: %w", err)
	}
	if !slices.Contains(Known, r.ProtocolVersion) {
		return fmt.Errorf("initialize: server chose unsupported protocol version %q", r.ProtocolVersion)
	}
	l.Established(Server{Version: r.ProtocolVersion, Capabilities: r.Capabilities, Instructions: r.Instructions})
	l.Notify("notifications/initialized", nil)
	return nil
}

// ListenParams are the params of a subscriptions/listen request for the
// list_changed notifications caps (a server's capabilities) announce;
// false when they announce none.
func ListenParams(caps map[string]json.RawMessage) (json.RawMessage, bool) {
	var kinds []string
	for _, k := range []struct{ capability, param string }{
		{"tools", "toolsListChanged"}, {"prompts", "promptsListChanged"}, {"resources", "resourcesListChanged"},
	} {
		if v, ok, _ := wire.Field(caps[k.capability], "listChanged"); ok && string(v) == "true" {
			kinds = append(kinds, `"`+k.param+`":true`)
		}
	}
	if len(kinds) == 0 {
		return nil, false
	}
	return json.RawMessage(`{"notifications":{` + strings.Join(kinds, ",") + `}}`), true
}

// Meta is one _meta member StampMeta sets.
type Meta struct {
	Name  string
	Value json.RawMessage
}

// StampMeta returns params with keys set in its _meta object, in the
// order given; every other member of params and of _meta keeps its bytes
// and its place (nothing is decoded beyond _meta's members). At most 8
// keys; keys does not escape.
func StampMeta(params json.RawMessage, keys []Meta) (json.RawMessage, error) {
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
		set[i] = wire.Member{Key: k.Name, Value: k.Value}
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
