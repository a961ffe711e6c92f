// Package bridge is the gateway's bridging between MCP revisions 2025 and
// 2026-07-28, both ways, and the downstream side of 2026-07-28.
//
//   - modern.go, subscriptions.go, cachehints.go: a 2026-07-28 client —
//     per-request _meta, server/discover, the removed methods,
//     subscriptions/listen, ttlMs/cacheScope.
//   - parked.go, retry.go, fleet.go: a 2025 upstream's sampling,
//     elicitation or roots request during a 2026-07-28 client's tools/call,
//     prompts/get or resources/read becomes an input_required result with a
//     sealed requestState; the retry answers the waiting upstream request
//     and gets the final result, on whichever replica of a fleet it lands.
//   - approval.go: a 2026-07-28 client asked for a call's approval by
//     input_required.
//   - rounds.go: a 2026-07-28 upstream's input_required answer to a 2025
//     client's call becomes requests to that client, and a retry upstream.
//   - paramheaders.go, listens.go: Mcp-Param-* headers and
//     subscriptions/listen toward a 2026-07-28 upstream for a 2025 client.
//
// The package never sees the gateway's types: it reaches a session
// through [Session], the upstream side of a call through [Call] and
// [Link], the gateway through [Gateway] and the fleet through [Fleet];
// the gateway implements them all.
package bridge

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/internal/budget"
	"github.com/edge-mcp/edge-mcp/transports"
)

// Session is a downstream session as bridging sees it. The gateway gives
// one comparable value per session, valid for the session's life (the
// bridge's tables key their maps by it). Its methods may be called from
// any goroutine; what is written after the session closed is dropped.
type Session interface {
	// Identity is who the client authenticated as.
	Identity() auth.Identity
	// Context ends when the session does.
	Context() context.Context
	// State is the session's bridging state.
	State() *State
	// Modern reports whether the session's requests follow 2026-07-28.
	Modern() bool
	// Adopt takes what a 2026-07-28 request says of its client: the
	// session follows that revision from now on, sends log messages at
	// level ("" or unknown: none) and, when name is not "", calls its
	// client that.
	Adopt(level, name string)
	// Write sends msg to the client; ctx may relate it to one of the
	// client's requests (transports.WithRelated).
	Write(ctx context.Context, msg jsonrpc.Message)
	// Request asks a 2025 client method, related to its request rel, and
	// waits for the answer, the session's end or ctx.
	Request(ctx context.Context, rel jsonrpc.ID, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error)
	// Has reports whether a 2025 client declared capability ("sampling",
	// "elicitation", "roots") at initialize.
	Has(capability string) bool
	// Detach removes the client's request id from the calls in flight
	// (its answer is an input_required result; the upstream call goes on)
	// and returns where the call is upstream.
	Detach(id jsonrpc.ID) (l Link, upID int64, ok bool)
	// Attach records that the client's request id waits for the call
	// upID on l, unless the session has closed (false).
	Attach(id jsonrpc.ID, l Link, upID int64) bool
	// Account acquires the client-memory account of the session's
	// identity; the caller releases it.
	Account() *budget.Account
	// SubscribeAll subscribes the session to the updates of the resources
	// it may follow among uris and returns those it subscribed to.
	SubscribeAll(uris []string) []string
}

// Call is a client's call forwarded upstream, as bridging sees it. The
// gateway gives one comparable value per call, valid until the call ends.
// Its methods may be called from any goroutine.
type Call interface {
	// Session is the client's session and ClientID its request's id.
	Session() Session
	ClientID() jsonrpc.ID
	// Server is the upstream's name, Method the forwarded method and Name
	// what a retry must name to continue it: the exposed tool of a
	// tools/call, else the upstream's prompt name or resource URI.
	Server() string
	Method() string
	Name() string
	// Size is the bytes of the client's params.
	Size() int
	// MarkBridged records that the call went through an input_required
	// round, and Bridged reports it: its answer goes to [Bridge.Redirect].
	MarkBridged()
	Bridged() bool
	// End ends the call without an answer, for reason.
	End(reason string)
	// Finish answers the client request id of s with resp, as the call's
	// result (recorded and filtered as any answer).
	Finish(s Session, id jsonrpc.ID, resp *jsonrpc.Response)
}

// Link is the connection to an upstream a call went on. Its methods may be
// called from any goroutine; on a closed link they do nothing.
type Link interface {
	// Respond answers the server's request id.
	Respond(id jsonrpc.ID, result json.RawMessage, err *jsonrpc.Error)
	// Cancel ends the call of upstream id upID, if it is still in flight,
	// and tells the server why.
	Cancel(upID int64, reason string)
	// Timeout is the upstream's call timeout.
	Timeout() time.Duration
}

// Gateway is what bridging asks of the gateway. Its methods may be called
// from any goroutine.
type Gateway interface {
	// InputTimeout and InputRounds are limits.input_timeout and
	// limits.input_rounds of the running configuration (0: the default).
	InputTimeout() time.Duration
	InputRounds() int
	// Capabilities is what the gateway offers at version; ServerInfo is
	// its Implementation; Instructions joins its upstreams'.
	Capabilities(version string) map[string]any
	ServerInfo() any
	Instructions() string
	// Hints are the caching hints of the catalogue now.
	Hints() Hints
	// Fleet is the fleet the gateway is a replica of; nil outside one.
	Fleet() Fleet
	// RetryWait is how long a retry handed to another replica may take
	// for a call of server.
	RetryWait(server string) time.Duration
	// ServeOne serves the one request of conn as the gateway serves a
	// 2026-07-28 POST, and PeerOf is what such a connection of a client
	// authenticated as id reports as its peer.
	ServeOne(conn transports.OneRequest)
	PeerOf(id auth.Identity) any
	Log() *slog.Logger
}

// Fleet is the fleet as bridging needs it, to hand a retry to the replica
// whose upstream call waits (fleet.go). Its methods may be called from any
// goroutine.
type Fleet interface {
	// Replica is this replica's name.
	Replica() string
	// HandOver sends a retry to replica and returns its reply;
	// [ErrReplicaGone] when no replica of that name answers.
	HandOver(ctx context.Context, replica string, retry []byte) ([]byte, error)
}

// ErrReplicaGone is [Fleet.HandOver]'s error when the replica is gone.
var ErrReplicaGone = errors.New("it is gone, and the call with it")

// statePrefix marks the requestState values the gateway sealed, so that
// those of a 2026-07-28 upstream pass through untouched.
const statePrefix = "edge-mcp1."

// defaultInputTimeout is limits.input_timeout's default.
const defaultInputTimeout = 60 * time.Second

// Bridge is the gateway's table of parked upstream requests, of the
// upstream calls that went through an input_required round, and of the
// 2025 clients' calls being asked for a 2026-07-28 upstream. Made by
// [New], it lives as long as the gateway; its methods may be called from
// any goroutine.
type Bridge struct {
	g     Gateway
	aeads []cipher.AEAD // the first seals, every one opens
	ad    []byte        // additional data: the fleet's name

	mu     sync.Mutex
	parked map[string]*parked // token → a parked upstream request
	calls  map[Call]*bridged  // calls with a round out or a retry waiting

	rounds rounds // 2025 clients' calls being asked for a 2026 upstream (rounds.go)
}

// sealedState is what a requestState carries, sealed.
type sealedState struct {
	Tokens   []string `json:"t"`
	Server   string   `json:"s"`
	Method   string   `json:"m"`
	Name     string   `json:"n"` // the exposed tool, the upstream prompt or the resource URI
	Identity string   `json:"i"`
	Expires  int64    `json:"e"` // Unix milliseconds
	// Replica is the fleet replica the parked requests wait on ("": not
	// in a fleet); a retry that reaches another one is handed there
	// (fleet.go).
	Replica string `json:"r,omitempty"`
	// Approve is set when the state asks a person to approve a tools/call
	// (approval.go): the digest of the call's arguments.
	Approve string `json:"a,omitempty"`
	// Inner is the requestState and inputResponses of another round that
	// the call carried when it was held for approval (an upstream's),
	// given back to the call on the retry.
	Inner json.RawMessage `json:"u,omitempty"`
}

// New makes the bridge of gateway g and its requestState keys: in a fleet
// (fleet, the fleet's name, and its secrets) they are derived from the
// fleet's secrets (the first seals, every one opens) with the fleet's name
// as additional data, so that a retry reaching another replica opens
// there; else (no secrets) a random key of this process.
func New(g Gateway, fleet string, secrets []string) (*Bridge, error) {
	b := &Bridge{g: g, parked: map[string]*parked{}, calls: map[Call]*bridged{}}
	var keys [][]byte
	if len(secrets) > 0 {
		b.ad = []byte(fleet)
		for i, secret := range secrets {
			key, err := hkdf.Key(sha256.New, []byte(secret), nil, "edge-mcp requestState v1", 32)
			if err != nil {
				return nil, fmt.Errorf("bridging: deriving requestState key %d: %w", i, err)
			}
			keys = append(keys, key)
		}
	} else {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("bridging: making the requestState key: %w", err)
		}
		keys = append(keys, key)
	}
	for _, key := range keys {
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("bridging: %w", err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("bridging: %w", err)
		}
		b.aeads = append(b.aeads, aead)
	}
	return b, nil
}

// seal encrypts and authenticates st.
func (b *Bridge) seal(st sealedState) (string, error) {
	plain, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("encoding requestState: %w", err)
	}
	aead := b.aeads[0]
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("requestState nonce: %w", err)
	}
	sealed := aead.Seal(nonce, nonce, plain, b.ad)
	return statePrefix + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// open checks and decrypts a requestState the gateway (or its fleet)
// sealed.
func (b *Bridge) open(state string) (sealedState, error) {
	var st sealedState
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(state, statePrefix))
	n := b.aeads[0].NonceSize()
	if err != nil || len(raw) < n {
		return st, errors.New("requestState is malformed")
	}
	var plain []byte
	for _, aead := range b.aeads {
		if plain, err = aead.Open(nil, raw[:n], raw[n:], b.ad); err == nil {
			break
		}
	}
	if err != nil {
		return st, errors.New("requestState was not issued by this gateway or was altered")
	}
	if err := json.Unmarshal(plain, &st); err != nil {
		return st, fmt.Errorf("decoding requestState: %w", err)
	}
	if time.Now().UnixMilli() > st.Expires {
		return st, errors.New("requestState has expired")
	}
	return st, nil
}

// inputTimeout is limits.input_timeout of the running configuration.
func (b *Bridge) inputTimeout() time.Duration {
	if d := b.g.InputTimeout(); d > 0 {
		return d
	}
	return defaultInputTimeout
}

// replica is this replica's name in its fleet, "" outside one.
func (b *Bridge) replica() string {
	if f := b.g.Fleet(); f != nil {
		return f.Replica()
	}
	return ""
}

// reply and replyError answer the client's request id.
func reply(s Session, id jsonrpc.ID, result json.RawMessage) {
	s.Write(s.Context(), &jsonrpc.Response{ID: id, Result: result})
}

func replyError(s Session, id jsonrpc.ID, code int64, format string, args ...any) {
	s.Write(s.Context(), &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}})
}

// notify sends a notification related to the client's request rel.
func notify(s Session, rel jsonrpc.ID, method string, params json.RawMessage) {
	ctx := s.Context()
	if rel.IsValid() {
		ctx = transports.WithRelated(ctx, rel)
	}
	s.Write(ctx, &jsonrpc.Request{Method: method, Params: params})
}
