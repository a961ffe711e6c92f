package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/budget"
	"github.com/edge-mcp/edge-mcp/runtime/dial"
	"github.com/edge-mcp/edge-mcp/runtime/perclient"
)

// This file is the per-client upstream sessions of a server configured with
// "session": "per_client": each downstream session that calls the server
// gets a link of its own (over stdio, a process of its own), opened on its
// first request and closed when the session ends, when the link fails, when
// it has been idle for clientIdle, or when the upstream stops. Everything
// the server sends on such a link belongs to that one session, so its
// server→client requests never need to be attributed. The catalogue still
// comes from the upstream's shared link.

// clientIdle is how long a per-client link may go without a call before it
// is closed; clientIdleCheck is how often that is checked.
var (
	clientIdle      = 10 * time.Minute
	clientIdleCheck = time.Minute
)

// defaultMaxClientSessions bounds the per-client links of one upstream when
// max_client_sessions is not set.
const defaultMaxClientSessions = 16

// perClientSessionCost is what one per-client upstream session is charged
// to its identity's client-memory account: the gateway's side of it (the
// link and its goroutines, the transport's buffers, the copies of the
// server's catalogue and capabilities): the release binary's RSS grew by
// about 116 KiB per per_client session over streamable HTTP (60 of them,
// go-sdk server; README, "What the client-memory budget counts").
const perClientSessionCost = 128 << 10

// clientLinks are the per-client links of one upstream (runtime/perclient).
type clientLinks = perclient.Set[*session, *link]

// perClient reports whether u gives each downstream session its own link.
func (u *upstream) perClient() bool { return u.cfg.Session == "per_client" || u.perIdentity() }

// linkFor returns the link that carries s's requests to u: the shared one,
// or s's own when u is per_client (opened now if needed).
func (u *upstream) linkFor(s *session) (*link, error) {
	if !u.perClient() {
		if l := u.current(); l != nil {
			return l, nil
		}
		return nil, errNotConnected
	}
	e, opener, err := u.clients.Add(s, clientOwner{s}, u.maxClients(), u.maxClientsPerIdentity())
	if errors.Is(err, perclient.ErrStopped) {
		err = errNotConnected
	}
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", u.name, err)
	}
	if opener != nil {
		u.openClient(opener, s, e)
	}
	select {
	case <-e.Ready():
	case <-s.ctx.Done():
		return nil, fmt.Errorf("server %q: opening a session for this client: %w", u.name, s.ctx.Err())
	}
	l, err := e.Link()
	if err != nil {
		return nil, fmt.Errorf("server %q: opening a session for this client: %w", u.name, err)
	}
	l.used.Store(time.Now().UnixNano())
	return l, nil
}

// clientLink returns s's own open link to u when u is per_client and one
// is open; nil otherwise (none is opened).
func (u *upstream) clientLink(s *session) *link {
	if !u.perClient() {
		return nil
	}
	l, ok := u.clients.Open(s)
	if !ok {
		return nil // none, or still opening: it is told when it opens (tellOpened)
	}
	return l
}

// sessionLinks returns the links that carry what s says to every upstream
// at once (logging/setLevel, roots/list_changed): each upstream's shared
// link, and s's own per-client link where one is open.
func (s *session) sessionLinks() []*link {
	var out []*link
	for _, u := range s.g.route.upstreams().list {
		if l := u.current(); l != nil {
			out = append(out, l)
		}
		if l := u.clientLink(s); l != nil {
			out = append(out, l)
		}
	}
	return out
}

// tellOpened tells s's new per-client link l what s said before it was
// open: the log level s set, unless it is still told (already sent). It
// returns the level it found. (Roots need no telling: the server asks for
// them with roots/list, which reaches s.)
func (s *session) tellOpened(ctx context.Context, l *link, told int32) int32 {
	i := s.logLevel.Load()
	if i < 0 || int(i) >= len(logLevels) || i == told || s.modern.Load() {
		return i
	}
	if _, ok := l.caps["logging"]; !ok {
		return i
	}
	ctx, cancel := context.WithTimeout(ctx, l.u.cfg.Timeout)
	defer cancel()
	params := `{"level":"` + logLevels[i] + `"}`
	if _, err := l.call(ctx, "logging/setLevel", json.RawMessage(params)); err != nil {
		l.u.log.Warn("passing the client's logging/setLevel to its per-client upstream session", "err", err)
	}
	return i
}

func (u *upstream) maxClients() int {
	if u.cfg.MaxClientSessions > 0 {
		return u.cfg.MaxClientSessions
	}
	return defaultMaxClientSessions
}

// maxClientsPerIdentity is how many of u's per-client links one
// authenticated identity may hold: max_client_sessions_per_identity, else
// half of max_client_sessions (at least 1).
func (u *upstream) maxClientsPerIdentity() int {
	n := u.cfg.MaxClientSessionsPerIdentity
	if n <= 0 {
		n = max(u.maxClients()/2, 1)
	}
	return min(n, u.maxClients())
}

// clientOwner is a session as the owner of a per-client link
// (runtime/perclient), charged to its identity's client memory.
type clientOwner struct{ *session }

func (s clientOwner) Identity() (string, bool) { return s.id.Name, budgetShared(s.id) }

func (s clientOwner) Hold() (func(), error) {
	acct := s.g.clientMem.Acquire(s.id.Name, budgetShared(s.id))
	release := acct.Hold(budget.PerClientSessions, perClientSessionCost)
	if release == nil {
		return nil, fmt.Errorf("%w: over the client memory budget: identity %q holds %d of its %d bytes and a session takes %d "+
			"(limits.client_memory_per_identity, limits.client_memory); try again when one ends",
			perclient.ErrTooMany, s.id.Name, acct.Used(), acct.Limit(), perClientSessionCost)
	}
	return release, nil
}

// openClient connects and initializes s's link in ctx, and serves it in the
// background until it ends.
func (u *upstream) openClient(ctx context.Context, s *session, e *perclient.Entry[*link]) {
	l, err := u.dial(ctx, s)
	told := int32(-1)
	if err == nil {
		told = s.tellOpened(ctx, l, -1) // before the first call goes on it
	}
	e.Opened(l, err)
	if err != nil {
		u.clients.Forget(s, e)
		u.clients.Done(e)
		u.log.Warn("opening a per-client upstream session", "identity", s.id.Name, "err", err)
		return
	}
	l.used.Store(time.Now().UnixNano()) // before serveClient can check it
	u.log.Info("per-client upstream session opened", "identity", s.id.Name, "session_id", s.conn.SessionID(),
		"client_sessions", u.clients.Count())
	go u.keep.Watch(l.ctx, u.health, pinger{l}, l.probeNow)
	go u.serveClient(s, e)
	if s.logLevel.Load() != told {
		// Set meanwhile, while l was not ready to be told by setLevel.
		go s.tellOpened(l.ctx, l, told)
	}
}

// dial connects over u's transport and sets up a link owned by s.
func (u *upstream) dial(ctx context.Context, s *session) (*link, error) {
	u.mu.Lock()
	t := u.transport
	u.mu.Unlock()
	if u.perIdentity() {
		t = dial.ForIdentity(u.g.oauth, u.cfg, t, s.id.Name)
	}
	return u.connect(ctx, t, s, u.versionMode(s))
}

// serveClient waits until s's link should end, then closes it and waits for
// its read loop (and, over stdio, its process) to be gone.
func (u *upstream) serveClient(s *session, e *perclient.Entry[*link]) {
	defer u.clients.Done(e)
	l, _ := e.Link()
	reason := l.waitEnd(s)
	u.clients.Forget(s, e)
	l.close(reason)
	<-l.done
	u.log.Info("per-client upstream session closed", "identity", s.id.Name, "session_id", s.conn.SessionID(),
		"reason", reason.Error())
}

// waitEnd returns when the per-client link l should be closed, and why.
func (l *link) waitEnd(s *session) error {
	tick := time.NewTicker(clientIdleCheck)
	defer tick.Stop()
	for {
		select {
		case <-l.done:
			return l.failure()
		case <-l.ctx.Done():
			return errors.New("upstream stopped")
		case <-s.ctx.Done():
			return errors.New("client session ended")
		case <-tick.C:
			if l.forwarded() == 0 && time.Since(time.Unix(0, l.used.Load())) >= clientIdle {
				return fmt.Errorf("idle for %s", clientIdle)
			}
		}
	}
}

// forwarded counts the client calls waiting on u: on its shared link and
// on its per-client links (for a graceful stop and a reload's drain).
func (u *upstream) forwarded() int {
	n := 0
	if l := u.current(); l != nil {
		n += l.forwarded()
	}
	for _, l := range u.clients.OpenLinks() { // none still opening: nothing forwarded on it yet
		n += l.forwarded()
	}
	return n
}
