package bridge

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/budget"
)

// A 2025 upstream's server→client requests to a 2026-07-28 client, which
// cannot be asked: sampling, elicitation and roots requests that arrive
// during its tools/call, prompts/get or resources/read become an
// input_required result. The upstream's request is parked (the upstream's
// call stays in flight); the client's retry carries inputResponses and the
// requestState the gateway sealed, is matched to the parked request, which
// is answered upstream, and then waits for the call's final result (or the
// next input_required round) (retry.go). A retry that never comes is
// answered upstream with an error and the call cancelled after
// limits.input_timeout.

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

// multiRound are the forwarded methods whose result may be input_required
// (and during which a 2025 server may ask the client).
var multiRound = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// MultiRound reports whether method's result may be input_required (and
// whether a 2025 server may ask the client during it).
func MultiRound(method string) bool { return multiRound[method] }

// parked is an upstream's request waiting for a client's retry.
type parked struct {
	token  string
	key    string // its key in inputRequests
	l      Link
	reqID  jsonrpc.ID // the upstream's request id
	method string
	params json.RawMessage
	c      Call
	timer  *time.Timer // limits.input_timeout
	// acct is charged cost while the request is parked.
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
	sess   Session
	id     jsonrpc.ID
	parked []*parked
}

// bridged is an upstream call that went through an input_required round:
// the client request waiting for its next step (sess nil: none, a round
// is out), and where it is upstream.
type bridged struct {
	sess  Session
	id    jsonrpc.ID
	l     Link
	upID  int64
	timer *time.Timer // the waiting retry's deadline
	round *round      // the round being gathered, if any
}

// Park turns a server→client request req that arrived on l during call c
// into an input_required result for c's 2026-07-28 client, and reports
// whether it did; other requests (c nil or not a multi-round call of a
// 2026-07-28 client that declared what req needs) take the ordinary path.
// The client request waiting for c is answered with the input_required
// result (gathered for gatherWindow with the call's other requests), and
// req is kept until the client's retry or limits.input_timeout.
func (b *Bridge) Park(l Link, c Call, req *jsonrpc.Request) bool {
	capability, ok := bridgeable[req.Method]
	if !ok || c == nil || !multiRound[c.Method()] {
		return false
	}
	s := c.Session()
	if s == nil || !s.Modern() || !s.State().Declares(capability) {
		return false
	}
	timeout := b.inputTimeout()
	token := newToken()
	p := &parked{token: token, key: "edge-mcp-" + token[:8], l: l, reqID: req.ID, method: req.Method, params: req.Params, c: c}
	p.acct = s.Account()
	p.cost = parkedCost(req.Params, c.Size())
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
		br = &bridged{sess: s, id: c.ClientID(), l: l}
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
		_, upID, ok := br.sess.Detach(br.id)
		if !ok {
			p.unpark()
			return false // answered or cancelled meanwhile
		}
		if br.timer != nil {
			br.timer.Stop()
		}
		r := &round{sess: br.sess, id: br.id}
		br.sess, br.id, br.upID, br.round = nil, jsonrpc.ID{}, upID, r
		b.calls[c] = br
		c.MarkBridged()
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
func (b *Bridge) refuseLocked(p *parked, br *bridged) func() {
	p.acct.Refused(budget.InputRounds)
	msg := fmt.Sprintf("edge-mcp: over the client memory budget: %s of %q cannot be held for an input_required retry "+
		"(identity %q holds %d of its %d bytes; limits.client_memory_per_identity, limits.client_memory)",
		p.method, p.c.Name(), p.acct.Identity(), p.acct.Used(), p.acct.Limit())
	p.acct.Release()
	var upID int64
	ok := false
	if br.round == nil {
		_, upID, ok = br.sess.Detach(br.id) // not ok: answered or cancelled meanwhile
	}
	return func() {
		p.l.Respond(p.reqID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg})
		if ok {
			replyError(br.sess, br.id, jsonrpc.CodeInternalError, "%s", msg)
			p.l.Cancel(upID, "the client's input_required round was refused over the memory budget")
		}
	}
}

// send answers the client request of round r with its input_required
// result.
func (b *Bridge) send(c Call, br *bridged, r *round, timeout time.Duration) {
	b.mu.Lock()
	if br.round == r {
		br.round = nil
	}
	b.mu.Unlock()
	st := sealedState{Server: c.Server(), Method: c.Method(), Name: c.Name(), Identity: r.sess.Identity().Name, Expires: time.Now().Add(timeout).UnixMilli(),
		Replica: b.replica()}
	for _, p := range r.parked {
		st.Tokens = append(st.Tokens, p.token)
	}
	res, err := b.inputRequired(r.parked, st)
	if err != nil {
		replyError(r.sess, r.id, jsonrpc.CodeInternalError, "edge-mcp: %v", err)
		for _, p := range r.parked {
			b.expire(p.token, 0)
		}
		return
	}
	reply(r.sess, r.id, res)
}

// inputRequest is one member of an input_required result's inputRequests.
type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// inputRequired builds the input_required result asking for parked.
func (b *Bridge) inputRequired(parked []*parked, st sealedState) (json.RawMessage, error) {
	state, err := b.seal(st)
	if err != nil {
		return nil, err
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

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail
	return hex.EncodeToString(b)
}

// expire answers a parked request nobody answered with an error and
// cancels its call upstream.
func (b *Bridge) expire(token string, after time.Duration) {
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
	p.l.Respond(p.reqID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
		Message: fmt.Sprintf("edge-mcp: the client did not answer %s", inWithin(after))})
	if br != nil {
		br.l.Cancel(br.upID, "the client did not answer the input request")
	}
}

func inWithin(d time.Duration) string {
	if d <= 0 {
		return "(the gateway could not ask it)"
	}
	return "within " + d.String()
}

// Bridgeable reports whether a server→client request of method may be
// asked of a 2026-07-28 client by input_required ([Bridge.Park]).
func Bridgeable(method string) bool {
	_, ok := bridgeable[method]
	return ok
}
