package gateway

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/budget"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// This file bridges a 2025 upstream's server→client requests to a
// 2026-07-28 client, which cannot be asked: sampling, elicitation and
// roots requests that arrive during its tools/call, prompts/get or
// resources/read become an input_required result. The upstream's request
// is parked (the upstream's call stays in flight); the client's retry
// carries inputResponses and the requestState the gateway sealed, is
// matched to the parked request, which is answered upstream, and then
// waits for the call's final result (or the next input_required round). A retry that never comes is answered
// upstream with an error and the call cancelled after limits.input_timeout.

// statePrefix marks the requestState values the gateway sealed, so that
// those of a 2026-07-28 upstream pass through untouched.
const statePrefix = "edge-mcp1."

// defaultInputTimeout is limits.input_timeout's default.
const defaultInputTimeout = 60 * time.Second

// gatherWindow is how long a round waits for more requests of the same
// call (a server may ask for several things at once) before it is sent.
const gatherWindow = 20 * time.Millisecond

// bridgeable are the server→client requests a 2026-07-28 client is asked
// by input_required, with the client capability each needs.
var bridgeable = map[string]string{
	"sampling/createMessage": "sampling",
	"elicitation/create":     "elicitation",
	"roots/list":             "roots",
}

// bridges is the gateway's table of parked upstream requests and of the
// upstream calls that went through an input_required round.
type bridges struct {
	aeads []cipher.AEAD // the first seals, every one opens
	ad    []byte        // additional data: the fleet's name

	mu     sync.Mutex
	parked map[string]*parked // token → a parked upstream request
	calls  map[*call]*bridged // calls with a round out or a retry waiting

	rounds rounds // 2025 clients' calls being asked for a 2026 upstream (bridge_rounds.go)
}

// parked is an upstream's request waiting for a client's retry.
type parked struct {
	token  string
	key    string // its key in inputRequests
	l      *link
	reqID  jsonrpc.ID // the upstream's request id
	method string
	params json.RawMessage
	c      *call
	timer  *time.Timer // limits.input_timeout
	// acct is charged cost while the request is parked (clientmem.go).
	acct *budget.Account
	cost int64
}

// parkedCost is what the client-memory budget charges for a parked
// request of params during a call whose client params were size bytes:
// four times those (the call forwarded upstream stays in flight, its
// request and the copies made on the way) and a fixed part (the parked
// and bridged records, timers, the upstream stream kept open).
// Calibrated on the release binary without a memory limit: 1000 calls
// parked grew its RSS by about 30 KiB each with empty arguments and 145
// KiB with 30 KB arguments, garbage not yet collected included.
func parkedCost(params json.RawMessage, size int) int64 {
	return 4*int64(len(params)+size) + 24<<10
}

// unpark credits what p was charged; it is called once, by whoever took
// p from the parked table.
func (p *parked) unpark() {
	p.acct.Credit(budget.InputRounds, p.cost)
	p.acct.Release()
}

// round is an input_required result being gathered: the client request
// it answers and the parked requests it asks for.
type round struct {
	sess   *session
	id     jsonrpc.ID
	parked []*parked
}

// bridged is an upstream call that went through an input_required round:
// the client request waiting for its next step (sess nil: none, a round
// is out), and where it is upstream.
type bridged struct {
	sess  *session
	id    jsonrpc.ID
	l     *link
	upID  int64
	timer *time.Timer // the waiting retry's deadline
	round *round      // the round being gathered, if any
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
	// (bridge_fleet.go).
	Replica string `json:"r,omitempty"`
	// Approve is set when the state asks a person to approve a tools/call
	// (approval_modern.go): the digest of the call's arguments.
	Approve string `json:"a,omitempty"`
	// Inner is the requestState and inputResponses of another round that
	// the call carried when it was held for approval (an upstream's),
	// given back to the call on the retry.
	Inner json.RawMessage `json:"u,omitempty"`
}

// newBridges makes the table of parked requests and the requestState
// keys: in a fleet (c not nil) they are derived from the fleet's secrets
// (the first seals, every one opens) with the fleet's name as additional
// data, so that a retry reaching another replica opens there; else a
// random key of this process.
func newBridges(c *config.Cluster) (*bridges, error) {
	b := &bridges{parked: map[string]*parked{}, calls: map[*call]*bridged{}}
	var keys [][]byte
	if c != nil && len(c.Secrets) > 0 {
		b.ad = []byte(c.Name)
		for i, secret := range c.Secrets {
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
func (b *bridges) seal(st sealedState) (string, error) {
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
func (b *bridges) open(state string) (sealedState, error) {
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
func (g *Gateway) inputTimeout() time.Duration {
	if d := g.cfgp.Load().Limits.InputTimeout; d > 0 {
		return d
	}
	return defaultInputTimeout
}

// bridgeRequest turns a server→client request that belongs to a
// 2026-07-28 client's tools/call, prompts/get or resources/read into an
// input_required result, and reports whether it did. Other requests take
// the ordinary path.
func (l *link) bridgeRequest(req *jsonrpc.Request) bool {
	capability, ok := bridgeable[req.Method]
	if !ok {
		return false
	}
	c, _ := l.relatedCall(req)
	if c == nil || c.sess == nil || !multiRound[c.method] || !c.sess.modern.Load() {
		return false
	}
	if !c.sess.declares(capability) {
		return false
	}
	return l.u.g.bridge.park(l, c, req)
}

// declares reports whether a 2026-07-28 request declared capability.
func (s *session) declares(capability string) bool {
	s.mu.Lock()
	declared := s.declared
	s.mu.Unlock()
	_, ok, _ := wire.Field(declared, capability)
	return ok
}

// detach removes the client's request id from the calls in flight (its
// answer is an input_required result; the upstream call goes on) and
// returns where the call is upstream.
func (s *session) detach(id jsonrpc.ID) (inflight, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.inflight[id]
	delete(s.inflight, id)
	return f, ok
}

// park asks the client request waiting for call c for req in an
// input_required result (gathered for gatherWindow with the call's other
// requests), and keeps req until the client's retry or
// limits.input_timeout.
func (b *bridges) park(l *link, c *call, req *jsonrpc.Request) bool {
	timeout := l.u.g.inputTimeout()
	token := newToken()
	p := &parked{token: token, key: "edge-mcp-" + token[:8], l: l, reqID: req.ID, method: req.Method, params: req.Params, c: c}
	p.acct = l.u.g.clientMem.Acquire(c.sess.id.Name, budgetShared(c.sess.id))
	p.cost = parkedCost(req.Params, c.size)
	var refused func()
	defer func() {
		if refused != nil {
			refused() // after b.mu: it writes to the client and upstream
		}
	}()
	b.mu.Lock()
	defer b.mu.Unlock()
	br := b.calls[c]
	if br == nil {
		br = &bridged{sess: c.sess, id: c.origID, l: l}
	}
	if br.round == nil && br.sess == nil {
		p.acct.Release()
		return false // a round is out already: its answers come first
	}
	if !p.acct.Charge(budget.InputRounds, p.cost) {
		refused = b.refuseLocked(p, br)
		return true
	}
	if br.round == nil {
		f, ok := br.sess.detach(br.id)
		if !ok {
			p.unpark()
			return false // answered or cancelled meanwhile
		}
		if br.timer != nil {
			br.timer.Stop()
		}
		r := &round{sess: br.sess, id: br.id}
		br.sess, br.id, br.upID, br.round = nil, jsonrpc.ID{}, f.id, r
		b.calls[c] = br
		c.bridged.Store(true)
		time.AfterFunc(gatherWindow, func() { b.send(c, br, r, timeout) })
	}
	br.round.parked = append(br.round.parked, p)
	p.timer = time.AfterFunc(timeout, func() { b.expire(token, timeout) })
	b.parked[token] = p
	return true
}

// refuseLocked refuses to park p, over the client-memory budget, and
// returns what to do once b.mu is released: the upstream's request gets
// an error, and so does the client's call, unless a round of it is being
// gathered already (it goes out without p).
func (b *bridges) refuseLocked(p *parked, br *bridged) func() {
	p.acct.Refused(budget.InputRounds)
	msg := fmt.Sprintf("edge-mcp: over the client memory budget: %s of %q cannot be held for an input_required retry "+
		"(identity %q holds %d of its %d bytes; limits.client_memory_per_identity, limits.client_memory)",
		p.method, callName(p.c), p.acct.Identity(), p.acct.Used(), p.acct.Limit())
	p.acct.Release()
	var f inflight
	ok := false
	if br.round == nil {
		f, ok = br.sess.detach(br.id) // not ok: answered or cancelled meanwhile
	}
	return func() {
		p.l.respond(p.reqID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg})
		if ok {
			br.sess.replyError(br.id, jsonrpc.CodeInternalError, "%s", msg)
			(&bridged{l: p.l, upID: f.id}).cancelUpstream("the client's input_required round was refused over the memory budget")
		}
	}
}

// send answers the client request of round r with its input_required
// result.
func (b *bridges) send(c *call, br *bridged, r *round, timeout time.Duration) {
	b.mu.Lock()
	if br.round == r {
		br.round = nil
	}
	b.mu.Unlock()
	st := sealedState{Server: c.server, Method: c.method, Name: callName(c), Identity: r.sess.id.Name, Expires: time.Now().Add(timeout).UnixMilli(),
		Replica: r.sess.g.replicaName()}
	for _, p := range r.parked {
		st.Tokens = append(st.Tokens, p.token)
	}
	res, err := b.inputRequired(r.parked, st)
	if err != nil {
		r.sess.replyError(r.id, jsonrpc.CodeInternalError, "edge-mcp: %v", err)
		for _, p := range r.parked {
			b.expire(p.token, 0)
		}
		return
	}
	r.sess.reply(r.id, res)
}

// inputRequired builds the input_required result asking for parked.
func (b *bridges) inputRequired(parked []*parked, st sealedState) (json.RawMessage, error) {
	state, err := b.seal(st)
	if err != nil {
		return nil, err
	}
	type inputRequest struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	reqs := make(map[string]inputRequest, len(parked))
	for _, p := range parked {
		params := p.params
		if len(params) == 0 {
			params = json.RawMessage(`{}`)
		}
		reqs[p.key] = inputRequest{p.method, params}
	}
	return json.Marshal(struct {
		ResultType    string                  `json:"resultType"`
		InputRequests map[string]inputRequest `json:"inputRequests"`
		RequestState  string                  `json:"requestState"`
	}{"input_required", reqs, state})
}

// callName is what a retry must name to continue call c: the exposed
// tool of a tools/call, else the upstream's prompt name or resource URI.
func callName(c *call) string {
	if c.tool != "" {
		return c.tool
	}
	return c.upName
}

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail
	return hex.EncodeToString(b)
}

// expire answers a parked request nobody answered with an error and
// cancels its call upstream.
func (b *bridges) expire(token string, after time.Duration) {
	b.mu.Lock()
	p := b.parked[token]
	delete(b.parked, token)
	var br *bridged
	if p != nil {
		br = b.calls[p.c]
		delete(b.calls, p.c)
	}
	b.mu.Unlock()
	if p == nil {
		return
	}
	p.unpark()
	p.l.respond(p.reqID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
		Message: fmt.Sprintf("edge-mcp: the client did not answer %s", inWithin(after))})
	if br != nil {
		br.cancelUpstream("the client did not answer the input request")
	}
}

func inWithin(d time.Duration) string {
	if d <= 0 {
		return "(the gateway could not ask it)"
	}
	return "within " + d.String()
}

// cancelUpstream ends the bridged call upstream, if it is still in flight.
func (br *bridged) cancelUpstream(reason string) {
	c := br.l.take(br.upID)
	if c == nil {
		return
	}
	if t := c.timer.Load(); t != nil {
		t.Stop()
	}
	c.end(reason)
	br.l.notify("notifications/cancelled", cancelParams(br.upID, reason))
}
