package fleet

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edge-mcp/edge-mcp/internal/auth"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/transports"
)

// This file lets any replica of a fleet serve any request of a session
// (issue 17). The downstream Mcp-Session-Id is a sealed token
// (cluster.Sealer): a replica that does not know the id opens it and
// adopts the session. What changes during a session lives elsewhere:
//
//   - DELETE and logging/setLevel: the session's record in the
//     "sessions" KV bucket (TTL: the token's lifetime), read before
//     adoption and watched by every replica, which closes its copy of a
//     deleted session and sets the level of its copy. A replica tells
//     its upstream links a session's level before forwarding that
//     session's next request (ReadLevel).
//   - the GET stream: the replica holding it subscribes to
//     <fleet>.sess.<route>.out (route: a keyed hash of the id,
//     cluster.Keys.Route); the others publish there what they would
//     have written on it.
//   - answers to the gateway's requests to the client (sampling,
//     elicitation, roots): their JSON-RPC id names the replica waiting
//     (OutID); a replica receiving the answer sends it there with
//     request/reply on <fleet>.replica.<replica>.answer.
//
// Every message and record is sealed with the fleet's keys (cluster.Keys):
// one read from NATS that no replica of the fleet wrote is refused before
// it is decoded, then validated before use.
//
// A DELETE's revocation outlives its record: a replica that saw a session
// revoked (by the watch, or reading its record) remembers it until the
// token expires, so deleting or purging the record in NATS does not bring
// the session back there; a record that does not open counts as revoked.

// Session is a downstream session served on this replica, as the fleet
// drives it. Implementations are comparable (the index of the sessions
// served here removes only the one it holds); every method may be called
// from any goroutine, also after the session ended.
type Session interface {
	// ID is the session's Mcp-Session-Id ("" for none).
	ID() string
	// Shared reports whether the fleet shares the session (streamable
	// HTTP).
	Shared() bool
	// Identity names who opened it, for logs.
	Identity() string
	// Context ends when the session does.
	Context() context.Context
	// State is the fleet's state of the session.
	State() *SessionState
	// Serve handles req as if the client had sent it here; the response
	// goes to Write (or to a capture, session_calls.go).
	Serve(req *jsonrpc.Request)
	// Write sends r to the client.
	Write(r *jsonrpc.Response)
	// Answer hands the client's answer r to the session's request number n.
	Answer(n int64, r *jsonrpc.Response)
	// Cancel cancels the client's call that params (of a
	// notifications/cancelled) names, when it is in flight here; false
	// when params name none.
	Cancel(params json.RawMessage) bool
	// SetLevel sets the log level the client set through another replica.
	SetLevel(level string)
	// Close ends the session (deleted through another replica).
	Close()
	// PerClient names the per_client upstream req goes to and its
	// timeout; ok is false when req goes to none.
	PerClient(req *jsonrpc.Request) (server string, timeout time.Duration, ok bool)
}

// Peers is how the fleet's session tokens name who opened a session: the
// gateway's transport peers (transports.Peer) and request identities.
// It is called from the streamable server's HTTP handlers, concurrently.
type Peers interface {
	// Identity is the identity of transport peer p; false when p is
	// none of the gateway's.
	Identity(p any) (auth.Identity, bool)
	// RequestIdentity is the identity r authenticated as.
	RequestIdentity(r *http.Request) auth.Identity
	// Adopted is the transport peer of a session of id that another
	// replica opened, from its token's claims c, for request r.
	Adopted(r *http.Request, id auth.Identity, c *cluster.SessionClaims) any
	// Version is the protocol version negotiated for a client's requested one.
	Version(requested string) string
}

// SessionState is the fleet's state of one downstream session, owned by
// the gateway's session (the zero value is ready).
type SessionState struct {
	// owner is the replica holding the session's per-client upstream
	// sessions, when another one (session_calls.go).
	owner     atomic.Pointer[string]
	capturing atomic.Int32 // responses to catch for other replicas (caught)
	levelRead atomic.Bool  // the log level was read from the session's record (ReadLevel)
	caught    captures
}

// Remote reports whether another replica holds the session's per-client
// upstream sessions (ToOwner).
func (st *SessionState) Remote() bool { return st.owner.Load() != nil }

// Sessions is this replica's part of the fleet's sessions.
type Sessions struct {
	ctx    context.Context // the fleet's: ends when the replica leaves
	node   *cluster.Node
	sealer *cluster.Sealer
	log    *slog.Logger
	peers  Peers
	srv    *transports.StreamableServer

	records atomic.Pointer[jetstream.KeyValue] // the "sessions" bucket, once made
	local   sync.Map                           // session id → Session served here
	marks   cluster.Watermarks                 // newest record read, per session
	revoked revocations                        // sessions seen deleted

	mu      sync.Mutex
	streams map[string]*streamSub // GET streams held here, by session id
	answers *nats.Subscription
	calls   *nats.Subscription
	cancels *nats.Subscription
	seq     atomic.Int64 // ids of forwarded requests

	forwarded atomic.Int64 // client answers sent to the replica waiting for them
}

// streamSub is the subscriptions of a GET stream held here (one per
// secret during a rotation).
type streamSub struct {
	subs []*nats.Subscription
	refs int
}

// startSessions sets up session sharing once the fleet is joined.
func (f *Fleet) startSessions(ctx context.Context, node *cluster.Node, h Host) error {
	sealer, err := cluster.NewSealer(node.Name(), node.Secrets())
	if err != nil {
		return fmt.Errorf("session tokens: %w", err)
	}
	fs := &Sessions{ctx: ctx, node: node, sealer: sealer.WithTTL(node.SessionTTL()), log: f.log, peers: h.Peers, srv: h.Streams,
		streams: map[string]*streamSub{}}
	subj := node.Subject("replica", cluster.Token(node.Replica()), "answer")
	if fs.answers, err = node.Subscribe(subj, "a client's answer", fs.onAnswer); err != nil {
		return fmt.Errorf("subscribing to %s: %w", subj, err)
	}
	if err := fs.startCalls(); err != nil {
		return err
	}
	if err := fs.startCancels(); err != nil {
		return err
	}
	if err := fs.startResumes(); err != nil { // session_resume.go
		return err
	}
	if _, err := node.Subscribe(node.Subject("getopen"), "a GET stream announcement", fs.onGetOpen); err != nil {
		return fmt.Errorf("subscribing to %s: %w", node.Subject("getopen"), err)
	}
	f.sess.Store(fs)
	f.wg.Go(func() { fs.watchRecords(ctx) })
	return nil
}

// Hooks is the streamable server's transports.StreamableFleet; nil
// outside a fleet. It serves as a single replica until the fleet is
// joined.
func (f *Fleet) Hooks() transports.StreamableFleet {
	if f == nil {
		return nil
	}
	return hooks{f}
}

type hooks struct{ f *Fleet }

func (h hooks) SessionID(p any, init *jsonrpc.Request) string {
	fs := h.f.Sessions()
	if fs == nil {
		return ""
	}
	id, ok := fs.peers.Identity(p)
	if !ok {
		return ""
	}
	var params struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ClientInfo      json.RawMessage `json:"clientInfo"`
	}
	if json.Unmarshal(init.Params, &params) != nil {
		return "" // initialize answers the error; the session is closed
	}
	tok, err := fs.sealer.Seal(cluster.SessionClaims{Identity: id.Name, Method: id.Method,
		Version: fs.peers.Version(params.ProtocolVersion), Caps: params.Capabilities, Info: params.ClientInfo,
		Owner: fs.node.Replica()})
	if err != nil {
		fs.log.Error("cluster: sealing a session token; the session is this replica's only", "err", err)
		return ""
	}
	return tok
}

func (h hooks) Adopt(r *http.Request, id string) (any, bool) {
	fs := h.f.Sessions()
	if fs == nil {
		return nil, false
	}
	c, err := fs.sealer.Open(id)
	who := fs.peers.RequestIdentity(r)
	switch {
	case err != nil:
		fs.log.Warn("cluster: refused a session id", "err", err, "remote", r.RemoteAddr)
		return nil, false
	case c.Identity != who.Name || c.Method != who.Method:
		fs.log.Warn("cluster: refused another identity's session", "identity", who.Name, "remote", r.RemoteAddr)
		return nil, false
	}
	rec := fs.Record(r.Context(), id)
	if rec.Revoked || fs.revoked.has(RecordKey(id)) {
		fs.log.Info("cluster: refused a deleted session", "identity", who.Name, "remote", r.RemoteAddr)
		return nil, false
	}
	if rec.Level != "" {
		c.LogLevel = rec.Level
	}
	c.Owner = cmp.Or(rec.Owner, c.Owner)
	fs.log.Debug("cluster: adopting a session", "identity", who.Name, "owner", c.Owner)
	return fs.peers.Adopted(r, who, &c), true
}

func (h hooks) Elsewhere(id string, msg []byte) bool {
	fs := h.f.Sessions()
	if fs == nil || !fs.node.Connected() {
		return false
	}
	if m, _ := wire.String(msg, "method"); isCatalogueNotice(m) {
		// Every replica's catalogue changes alike: the one holding the
		// GET stream tells the client, the others would repeat it.
		return true
	}
	subj := fs.node.Subject("sess", fs.node.Route(id), "out")
	ctx, cancel := context.WithTimeout(fs.ctx, streamHandOver)
	defer cancel()
	_, err := fs.node.Request(ctx, subj, msg)
	switch {
	case err == nil:
		return true
	case errors.Is(err, nats.ErrNoResponders):
		// No replica holds a GET stream: keep it here until one opens
		// (then Rehome hands it over).
		return false
	case cluster.IsRefused(err):
		return false // a reply no replica sealed (logged): keep it here
	default:
		fs.log.Warn("cluster: handing a message to a session's stream", "subject", subj, "err", err)
		// Timed out: it may have arrived, do not repeat it.
		return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
	}
}

// streamHandOver bounds the hand-over of one message to the replica
// holding a session's GET stream.
const streamHandOver = 2 * time.Second

// isCatalogueNotice reports the notifications every replica produces
// for every session of its own.
func isCatalogueNotice(method string) bool {
	switch method {
	case "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed":
		return true
	}
	return false
}

func (h hooks) Standalone(id string, open bool) {
	if fs := h.f.Sessions(); fs != nil {
		fs.stream(id, open)
	}
}

func (h hooks) Deleted(id string) {
	if fs := h.f.Sessions(); fs != nil {
		fs.Put(SessionRecord{ID: id, Revoked: true})
	}
}

// stream subscribes to (open) or leaves (!open) the subject of session
// id's GET stream.
func (fs *Sessions) stream(id string, open bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	ss := fs.streams[id]
	if !open {
		if ss != nil {
			if ss.refs--; ss.refs <= 0 {
				delete(fs.streams, id)
				for _, sub := range ss.subs {
					_ = sub.Unsubscribe()
				}
			}
		}
		return
	}
	if ss != nil {
		ss.refs++
		return
	}
	ss = &streamSub{refs: 1}
	for _, route := range fs.node.Keys().Routes(id) {
		subj := fs.node.Subject("sess", route, "out")
		sub, err := fs.node.Subscribe(subj, "a message for a session's GET stream", func(m *cluster.Msg) { fs.onStreamMsg(id, m) })
		if err != nil {
			fs.log.Warn("cluster: subscribing to a session's stream; other replicas' notifications will not reach it", "err", err)
			continue
		}
		ss.subs = append(ss.subs, sub)
	}
	fs.streams[id] = ss
	// Replicas that kept messages while no GET stream was open hand them
	// over now.
	if err := fs.node.Publish(fs.node.Subject("getopen"), []byte(id)); err != nil {
		fs.log.Warn("cluster: announcing a GET stream", "err", err)
	}
}

// onGetOpen hands what this replica kept for a session to the replica
// that now holds its GET stream.
func (fs *Sessions) onGetOpen(m *cluster.Msg) {
	if len(m.Data) == 0 || len(m.Data) > 8<<10 {
		fs.log.Warn("cluster: refused a GET stream announcement from NATS", "bytes", len(m.Data))
		return
	}
	id := string(m.Data)
	if _, ok := fs.local.Load(id); ok {
		go fs.srv.Rehome(id)
	}
}

// onStreamMsg writes a message another replica published for the GET
// stream held here, once it decodes as a request or notification.
func (fs *Sessions) onStreamMsg(id string, m *cluster.Msg) {
	msg, err := wire.Decode(m.Data)
	if _, ok := msg.(*jsonrpc.Request); err != nil || !ok {
		fs.log.Warn("cluster: refused a message for a session's stream", "subject", m.Subject, "err", err)
		return
	}
	fs.srv.WriteStandalone(id, m.Data)
	_ = m.Respond(nil)
}

// SessionRecord is what the fleet keeps of a session that its token
// cannot say: deleted, its log level, the replica that took its
// per-client upstream sessions over.
type SessionRecord struct {
	ID      string `json:"id"`
	Revoked bool   `json:"revoked,omitempty"`
	Level   string `json:"level,omitempty"`
	Owner   string `json:"owner,omitempty"`
}

// RecordKey is the KV key of a session's record: a hash of its id.
func RecordKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
}

// Bucket returns the sessions bucket, making it when NATS is reachable.
func (fs *Sessions) Bucket(ctx context.Context) (jetstream.KeyValue, error) {
	if kv := fs.records.Load(); kv != nil {
		return *kv, nil
	}
	if !fs.node.Connected() {
		return nil, cluster.ErrUnavailable
	}
	kv, err := fs.node.JetStream().CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: fs.node.Bucket(sessionsBucket), TTL: fs.node.SessionTTL(), Description: "deleted sessions, log levels"})
	if err != nil {
		return nil, fmt.Errorf("opening bucket %q: %w", fs.node.Bucket(sessionsBucket), err)
	}
	fs.records.Store(&kv)
	return kv, nil
}

// Put records what the fleet must know of a session: rec's fields that
// are set replace those of the stored record. The write is a compare and
// set on the record's revision, read again on a conflict, so that two
// replicas changing one session at once (a DELETE on one, a log level on
// another) cannot lose either change.
func (fs *Sessions) Put(rec SessionRecord) {
	ctx, cancel := context.WithTimeout(fs.ctx, 5*time.Second)
	defer cancel()
	err := fs.putCAS(ctx, rec)
	if err != nil {
		fs.log.Warn("cluster: recording a session change; other replicas will not know it",
			"revoked", rec.Revoked, "level", rec.Level, "err", err)
	}
}

// maxRecordRetries bounds the rereads of a session record changed meanwhile.
const maxRecordRetries = 8

func (fs *Sessions) putCAS(ctx context.Context, rec SessionRecord) error {
	kv, err := fs.Bucket(ctx)
	if err != nil {
		return err
	}
	key := RecordKey(rec.ID)
	if rec.Revoked {
		fs.revoked.add(key, fs.node.SessionTTL())
	}
	for range maxRecordRetries {
		old, rev, prev, err := fs.recordRev(ctx, kv, rec.ID)
		if err != nil {
			return err
		}
		merged := rec
		merged.Revoked = rec.Revoked || old.Revoked || fs.revoked.has(key)
		merged.Level = cmp.Or(rec.Level, old.Level)
		merged.Owner = cmp.Or(rec.Owner, old.Owner)
		b, _ := json.Marshal(merged)
		b = fs.node.SealRecord(sessionsBucket, key, b, prev)
		if rev == 0 {
			_, err = kv.Create(ctx, key, b)
		} else {
			_, err = kv.Update(ctx, key, b, rev)
		}
		if !cluster.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("session record changed %d times while being written", maxRecordRetries)
}

// sessionsBucket is the name of the sessions bucket under the fleet's prefix.
const sessionsBucket = "sessions"

// recordRev reads session id's record, its revision (0: none) and its
// sealed value. A record that was not sealed by the fleet, or replays an
// older one (logged once), or that does not decode, or belongs to another
// id, counts as none but keeps its revision, so that a write replaces it;
// a revocation this replica saw stays (revocations).
func (fs *Sessions) recordRev(ctx context.Context, kv jetstream.KeyValue, id string) (SessionRecord, uint64, []byte, error) {
	key := RecordKey(id)
	e, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return SessionRecord{}, 0, nil, nil
	case err != nil:
		return SessionRecord{}, 0, nil, err
	}
	body, err := fs.node.OpenRecord(sessionsBucket, key, e.Value(), &fs.marks)
	if err != nil {
		return SessionRecord{}, e.Revision(), nil, nil
	}
	rec, derr := decodeRecord(body)
	if derr != nil || rec.ID != id {
		fs.log.Warn("cluster: ignoring an invalid session record", "err", derr)
		return SessionRecord{}, e.Revision(), e.Value(), nil
	}
	if rec.Revoked {
		fs.revoked.add(key, fs.node.SessionTTL())
	}
	return rec, e.Revision(), e.Value(), nil
}

// Record reads session id's record; while NATS is down it cannot and
// returns none (the replica keeps serving; logged).
func (fs *Sessions) Record(ctx context.Context, id string) SessionRecord {
	kv, err := fs.Bucket(ctx)
	if err == nil {
		var rec SessionRecord
		if rec, _, _, err = fs.recordRev(ctx, kv, id); err == nil {
			return rec
		}
	}
	fs.log.Warn("cluster: cannot read a session's record; adopting without it", "err", err)
	return SessionRecord{}
}

// decodeRecord validates a record read from NATS.
func decodeRecord(b []byte) (SessionRecord, error) {
	var rec SessionRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("undecodable session record: %w", err)
	}
	if rec.ID == "" || (rec.Level != "" && !slices.Contains(logLevels, rec.Level)) {
		return SessionRecord{}, errors.New("invalid session record")
	}
	return rec, nil
}

// watchRecords applies other replicas' session changes to this
// replica's copies, until ctx ends.
func (fs *Sessions) watchRecords(ctx context.Context) {
	for ctx.Err() == nil {
		kv, err := fs.Bucket(ctx)
		if err == nil {
			var w jetstream.KeyWatcher
			if w, err = kv.WatchAll(ctx, jetstream.UpdatesOnly()); err == nil {
				for e := range w.Updates() {
					switch {
					case e == nil:
					case e.Operation() == jetstream.KeyValuePut:
						fs.apply(e.Key(), e.Value())
					case fs.revoked.has(e.Key()):
						fs.log.Warn("cluster: the record of a deleted session was removed from NATS; this replica keeps refusing the session",
							"key", e.Key(), "operation", e.Operation().String())
					}
				}
				_ = w.Stop()
			}
		}
		if err != nil {
			fs.log.Debug("cluster: watching session records", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// apply applies one session record, the value of key, to this replica's
// copy of the session.
func (fs *Sessions) apply(key string, b []byte) {
	body, err := fs.node.OpenRecord(sessionsBucket, key, b, &fs.marks)
	if err != nil {
		return // logged
	}
	rec, err := decodeRecord(body)
	if err == nil && RecordKey(rec.ID) != key {
		err = errors.New("a session record under another session's key")
	}
	if err != nil {
		fs.log.Warn("cluster: refused a session record from NATS", "err", err)
		return
	}
	if rec.Revoked {
		fs.revoked.add(key, fs.node.SessionTTL())
	}
	v, ok := fs.local.Load(rec.ID)
	if !ok {
		return
	}
	s := v.(Session)
	if rec.Revoked {
		fs.log.Info("cluster: closing a session deleted on another replica")
		s.Close()
		return
	}
	if rec.Level != "" {
		s.SetLevel(rec.Level)
	}
	fs.setOwner(s.State(), rec.Owner)
}

// logLevels are MCP's log levels.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// revocations are the session records this replica saw revoked, by key,
// until their tokens expire: deleting or purging a record in NATS does
// not undo a DELETE here. At most maxRevocations are kept; past it the
// ones expiring first go.
type revocations struct {
	mu sync.Mutex
	m  map[string]time.Time
}

const maxRevocations = 1 << 17

func (r *revocations) add(key string, ttl time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]time.Time{}
	}
	if _, ok := r.m[key]; ok {
		return
	}
	now := time.Now()
	if len(r.m) >= maxRevocations {
		for k, until := range r.m {
			if until.Before(now.Add(ttl/2)) || len(r.m) >= maxRevocations {
				delete(r.m, k)
			}
		}
	}
	r.m[key] = now.Add(ttl)
}

func (r *revocations) has(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.m[key]
	return ok && time.Now().Before(until)
}

// Revoked reports whether this replica saw session id deleted.
func (fs *Sessions) Revoked(id string) bool { return fs.revoked.has(RecordKey(id)) }

// Forwarded counts the client answers sent to the replica waiting for them.
func (fs *Sessions) Forwarded() int64 { return fs.forwarded.Load() }

// Streams counts the GET streams held here.
func (fs *Sessions) Streams() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.streams)
}

// setOwner records which replica holds the session's per-client upstream
// sessions ("": unchanged).
func (fs *Sessions) setOwner(st *SessionState, owner string) {
	switch owner {
	case "":
	case fs.node.Replica():
		st.owner.Store(nil)
	default:
		st.owner.Store(&owner)
	}
}

// Track and Untrack keep the index of the sessions served here.
func (f *Fleet) Track(s Session) {
	if fs := f.Sessions(); fs != nil {
		if sid := s.ID(); sid != "" {
			fs.local.Store(sid, s)
		}
	}
}

func (f *Fleet) Untrack(s Session) {
	if fs := f.Sessions(); fs != nil {
		if sid := s.ID(); sid != "" {
			fs.local.CompareAndDelete(sid, s)
		}
	}
}

// TokenExpiry is the expiry of a fleet session token sid (Unix seconds),
// 0 outside a fleet or when sid is not one (a session opened under an
// expired token is not adopted in the first place). The replica that
// issued the token, or adopted it, holds the session and no longer opens
// the token on its requests: this expiry is what keeps
// cluster.session_ttl there too.
func (f *Fleet) TokenExpiry(sid string) int64 {
	fs := f.Sessions()
	if fs == nil {
		return 0
	}
	c, err := fs.sealer.Open(sid)
	if err != nil {
		return 0
	}
	return c.Expires
}

// Adopt records, for a session another replica opened, which replica
// holds its per-client upstream sessions (from its token's claims c).
func (f *Fleet) Adopt(st *SessionState, c *cluster.SessionClaims) {
	if fs := f.Sessions(); fs != nil {
		fs.setOwner(st, c.Owner)
	}
}

// ShareLevel records a session's log level for the fleet
// (logging/setLevel).
func (f *Fleet) ShareLevel(s Session, level string) {
	if fs := f.Sessions(); fs != nil && s.Shared() {
		fs.Put(SessionRecord{ID: s.ID(), Level: level})
	}
}

// ReadLevel is, once per session and only in a fleet, the log level the
// session's record holds: it may have been set through another replica
// since the session was opened or adopted here, and the watch may not
// have told this replica yet. "" when none (or already read).
func (f *Fleet) ReadLevel(s Session) string {
	fs := f.Sessions()
	if fs == nil || !s.Shared() || s.State().levelRead.Swap(true) {
		return ""
	}
	return fs.Record(s.Context(), s.ID()).Level
}

// EventPrefix starts the SSE event ids of a fleet replica, so that a
// client resuming a stream on another replica is not handed that
// replica's events of the same number.
func EventPrefix(cfg *config.Config) string {
	if cfg.Cluster == nil {
		return ""
	}
	return cluster.Token(cmp.Or(cfg.Cluster.Replica, DefaultReplica(cfg.Listen))) + "/"
}
