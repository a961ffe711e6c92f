package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// This file bridges the other way from bridge.go: a 2026-07-28 upstream
// answers a 2025 client's tools/call, prompts/get or resources/read with
// an input_required result (inputRequests keyed by the server, and an
// opaque requestState). A 2025 client cannot read that result, but it can
// be asked: each input request becomes a sampling/createMessage,
// elicitation/create or roots/list request to the client over its session
// (related to the client's call, so it reaches the call's stream); the
// answers, keyed exactly as the server keyed its requests, go back
// upstream in a retry of the call with the server's requestState
// unchanged. That repeats until the server gives a final result, within
// limits.input_rounds rounds. The client's cancellation of its call ends
// the rounds (bridges.cancelRound).

// defaultInputRounds is limits.input_rounds' default.
const defaultInputRounds = 8

// multiRound are the forwarded methods whose result may be input_required
// (and during which a 2025 server may ask the client).
var multiRound = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// again is what a call needs to be sent again with inputResponses: set by
// forward for the calls of 2025 clients on 2026-07-28 links. rounds is
// touched by one round at a time (each follows the previous one's answer).
type again struct {
	req     *jsonrpc.Request // the client's request (method, Mcp-Param-* headers)
	params  json.RawMessage  // params as sent upstream, before the link's _meta stamp
	schema  json.RawMessage  // the tool's inputSchema, for derived Mcp-Param-* headers
	timeout time.Duration    // each attempt's deadline
	rounds  int
}

// roundKey names a client call whose input rounds are being asked.
type roundKey struct {
	s  *session
	id jsonrpc.ID
}

// rounds are the calls whose input requests are out to their client, so
// that a notifications/cancelled for the call ends the asking.
type rounds struct {
	mu     sync.Mutex
	asking map[roundKey]context.CancelCauseFunc
}

// cancelRound ends the input round of the client's call id, if one is out.
func (b *bridges) cancelRound(s *session, id jsonrpc.ID) {
	b.rounds.mu.Lock()
	cancel := b.rounds.asking[roundKey{s, id}]
	b.rounds.mu.Unlock()
	if cancel != nil {
		cancel(errCallCancelled)
	}
}

// watchRound records the cancel function of the round of s's call id.
func (b *bridges) watchRound(s *session, id jsonrpc.ID, cancel context.CancelCauseFunc) func() {
	k := roundKey{s, id}
	b.rounds.mu.Lock()
	if b.rounds.asking == nil {
		b.rounds.asking = map[roundKey]context.CancelCauseFunc{}
	}
	b.rounds.asking[k] = cancel
	b.rounds.mu.Unlock()
	return func() {
		b.rounds.mu.Lock()
		delete(b.rounds.asking, k)
		b.rounds.mu.Unlock()
	}
}

// inputRounds is limits.input_rounds of the running configuration.
func (g *Gateway) inputRounds() int {
	if n := g.cfgp.Load().Limits.InputRounds; n > 0 {
		return n
	}
	return defaultInputRounds
}

// inputRequired takes over resp when it is an input_required result for a
// 2025 client's call c (the link speaks 2026-07-28), and reports whether
// it did: the client is asked, off the read loop, and the call is sent
// again. Every other answer takes the ordinary way.
func (l *link) inputRequired(c *call, resp *jsonrpc.Response) bool {
	if c.again == nil || resp.Error != nil || len(resp.Result) == 0 {
		return false
	}
	if rt, ok := wire.String(resp.Result, "resultType"); !ok || rt != "input_required" {
		return false
	}
	go c.sess.inputRound(l, c, resp.Result)
	return true
}

// markInputRequired makes a 2025 upstream's result that carries
// inputRequests but no resultType an input_required result for the
// 2026-07-28 client of call c, and reports whether it did. A go-sdk server
// on a 2025 session asks the client directly in a call's first round, but
// returns the inputRequests (with its own keys and requestState) of a
// second round as they are: a 2026-07-28 client that got them marked
// complete would stop there. Its retry, with the server's own
// requestState, goes upstream as a new call, which the server continues.
func (l *link) markInputRequired(c *call, resp *jsonrpc.Response) bool {
	if c.sess == nil || l.v2026.Load() || resp.Error != nil || !multiRound[c.method] || !c.sess.modern.Load() {
		return false
	}
	if !bytes.Contains(resp.Result, []byte(`"inputRequests"`)) {
		return false // the common case, found without decoding
	}
	if _, ok, _ := wire.Field(resp.Result, "resultType"); ok {
		return false
	}
	if reqs, ok, _ := wire.Field(resp.Result, "inputRequests"); !ok || len(reqs) == 0 || reqs[0] != '{' {
		return false
	}
	res, err := wire.SetField(resp.Result, "resultType", json.RawMessage(`"input_required"`))
	if err != nil {
		return false
	}
	resp.Result = res
	return true
}

// inputRequest is one member of an input_required result's inputRequests.
type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// inputRound runs one input_required round of call c for its 2025 client:
// asks the client, then sends the call again with the answers.
func (s *session) inputRound(l *link, c *call, result json.RawMessage) {
	a := c.again
	a.rounds++
	if limit := s.g.inputRounds(); a.rounds > limit {
		s.g.log.Warn("a 2026-07-28 server asked for client input too many times; call ended",
			"server", c.server, "method", c.method, "rounds", limit, "key", "limits.input_rounds")
		s.endRound(c, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
			"edge-mcp: server %q asked for client input (input_required) more than %d times in one %s; limits.input_rounds stops it",
			c.server, limit, c.method)})
		return
	}
	ir, err := parseInputRequired(result)
	if err != nil {
		s.endRound(c, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("edge-mcp: server %q sent an input_required result the gateway cannot read: %v", c.server, err)})
		return
	}
	if rerr := s.canAnswer(c, ir.InputRequests); rerr != nil {
		s.endRound(c, rerr)
		return
	}
	tctx, cancel := context.WithTimeout(s.ctx, s.g.inputTimeout())
	defer cancel()
	ctx, cancelCause := context.WithCancelCause(tctx)
	defer cancelCause(nil)
	unwatch := s.g.bridge.watchRound(s, c.origID, cancelCause)
	answers, rerr := s.askAll(ctx, c, ir.InputRequests)
	unwatch()
	if rerr != nil {
		s.endRound(c, rerr)
		return
	}
	params, err := retryParams(a.params, answers, ir.RequestState)
	if err != nil {
		s.endRound(c, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "edge-mcp: " + err.Error()})
		return
	}
	s.sendAgain(l, c, params)
}

// inputRequiredResult is what the gateway reads of an input_required result.
type inputRequiredResult struct {
	InputRequests map[string]inputRequest `json:"inputRequests"`
	RequestState  json.RawMessage         `json:"requestState"` // passed back unchanged
}

// parseInputRequired decodes an upstream's input_required result.
func parseInputRequired(result json.RawMessage) (inputRequiredResult, error) {
	var ir inputRequiredResult
	if err := json.Unmarshal(result, &ir); err != nil {
		return ir, fmt.Errorf("decoding the input_required result: %w", err)
	}
	for key, r := range ir.InputRequests {
		if r.Method == "" {
			return ir, fmt.Errorf("input request %q names no method", key)
		}
	}
	return ir, nil
}

// canAnswer checks that the client declared, at initialize, every
// capability the input requests need; the error says which one is missing.
func (s *session) canAnswer(c *call, reqs map[string]inputRequest) *jsonrpc.Error {
	for _, key := range sortedKeys(reqs) {
		method := reqs[key].Method
		capability, ok := bridgeable[method]
		if !ok {
			return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
				"edge-mcp: server %q asked for client input %q with method %q, which the gateway cannot ask a client for", c.server, key, method)}
		}
		if !s.hasCapability(capability) {
			data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{capability: map[string]any{}}})
			return &jsonrpc.Error{Code: codeMissingCapability, Data: data, Message: fmt.Sprintf(
				"edge-mcp: server %q needs the client capability %q for this %s (it asks %s), which this client did not declare at initialize",
				c.server, capability, c.method, method)}
		}
	}
	return nil
}

// hasCapability reports whether a 2025 client declared capability at
// initialize.
func (s *session) hasCapability(capability string) bool {
	switch capability {
	case "sampling":
		return s.caps.sampling
	case "elicitation":
		return s.caps.elicitation
	case "roots":
		return s.caps.roots
	}
	return false
}

func sortedKeys(m map[string]inputRequest) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// askAll sends every input request to the client at once, related to its
// call, and returns the answers under the server's own keys. The first
// failure (a client error, the client's cancellation, the input timeout)
// stops the others.
func (s *session) askAll(ctx context.Context, c *call, reqs map[string]inputRequest) (map[string]json.RawMessage, *jsonrpc.Error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		answers = make(map[string]json.RawMessage, len(reqs))
		first   *jsonrpc.Error
		wg      sync.WaitGroup
	)
	if len(reqs) == 0 {
		return answers, nil // the server is busy: it asks for nothing, the call is retried
	}
	for key, r := range reqs {
		wg.Go(func() {
			res, rerr := s.request(ctx, c.origID, r.Method, r.Params)
			mu.Lock()
			defer mu.Unlock()
			if rerr == nil {
				answers[key] = res
				return
			}
			if first == nil && ctx.Err() == nil {
				first = &jsonrpc.Error{Code: rerr.Code, Data: rerr.Data, Message: fmt.Sprintf(
					"edge-mcp: the client answered server %q's %s (input %q) with an error: %s", c.server, r.Method, key, rerr.Message)}
			}
			cancel()
		})
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if len(answers) < len(reqs) {
		return nil, &jsonrpc.Error{Code: codeRequestTimeout, Message: fmt.Sprintf(
			"edge-mcp: the client did not answer server %q's input requests within limits.input_timeout (%s)", c.server, s.g.inputTimeout())}
	}
	return answers, nil
}

// retryParams are the params of a call's next attempt: the first
// attempt's, with this round's inputResponses and the server's
// requestState (absent when the server sent none), both replacing any
// earlier round's.
func retryParams(params json.RawMessage, answers map[string]json.RawMessage, state json.RawMessage) (json.RawMessage, error) {
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	responses, err := json.Marshal(answers)
	if err != nil {
		return nil, fmt.Errorf("encoding inputResponses: %w", err)
	}
	if params, err = wire.SetField(params, "inputResponses", responses); err != nil {
		return nil, fmt.Errorf("setting inputResponses: %w", err)
	}
	if len(state) > 0 && string(state) != "null" {
		params, err = wire.SetField(params, "requestState", state)
	} else if _, ok, _ := wire.Field(params, "requestState"); ok {
		params, err = wire.DeleteField(params, "requestState")
	}
	if err != nil {
		return nil, fmt.Errorf("setting requestState: %w", err)
	}
	return params, nil
}

// endRound answers call c's client with rerr, unless the client
// cancelled the call or went away meanwhile, and ends the call.
func (s *session) endRound(c *call, rerr *jsonrpc.Error) {
	s.mu.Lock()
	_, waiting := s.inflight[c.origID]
	waiting = waiting && !s.closed
	s.mu.Unlock()
	if !waiting {
		c.end("cancelled by the client")
		return
	}
	s.finish(c, &jsonrpc.Response{ID: c.origID, Error: rerr}) // records and answers, as for any answer
}

// sendAgain sends call c upstream on l again, with params, under a new
// upstream id: the client's request id now maps to it (cancellation) and
// so does the call's progress token.
func (s *session) sendAgain(l *link, c *call, params json.RawMessage) {
	id, ok := l.register(c)
	if !ok {
		s.endRound(c, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("edge-mcp: server %q is %s", c.server, errNotConnected)})
		return
	}
	if c.progressToken != nil {
		var err error
		if params, err = setProgressToken(params, id); err != nil {
			l.take(id)
			s.endRound(c, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "edge-mcp: " + err.Error()})
			return
		}
	}
	s.mu.Lock()
	_, waiting := s.inflight[c.origID]
	if waiting && !s.closed {
		s.inflight[c.origID] = inflight{l, id}
	}
	s.mu.Unlock()
	if !waiting {
		l.take(id)
		c.end("cancelled by the client") // between the answers and now
		return
	}
	s.armTimer(l, c, id, c.again.timeout)
	up := l.upstreamRequest(c.again.req, id, params, c.again.schema, s.clientMeta())
	s.g.senders.submit(func() {
		if err := l.conn.Write(l.ctx, up); err != nil {
			if c := l.take(id); c != nil {
				l.finish(c, nil, fmt.Errorf("sending %s to server %q: %v", c.method, c.server, err))
			}
			l.sendFailed(c.method, err)
		}
	})
}

// setProgressToken points params._meta.progressToken at upstream id.
func setProgressToken(params json.RawMessage, id int64) (json.RawMessage, error) {
	meta, ok, err := wire.Field(params, "_meta")
	if err != nil || !ok {
		return params, err
	}
	if meta, err = wire.SetField(meta, "progressToken", strconv.AppendInt(nil, id, 10)); err != nil {
		return nil, fmt.Errorf("setting the progress token: %w", err)
	}
	return wire.SetField(params, "_meta", meta)
}

// errCallCancelled is the cause of a round's end when the client cancelled
// its call.
var errCallCancelled = errors.New("the client cancelled the call")
