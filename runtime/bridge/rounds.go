package bridge

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

// The other way from parked.go: a 2026-07-28 upstream answers a 2025
// client's tools/call, prompts/get or resources/read with an
// input_required result (inputRequests keyed by the server, and an opaque
// requestState). A 2025 client cannot read that result, but it can be
// asked: each input request becomes a sampling/createMessage,
// elicitation/create or roots/list request to the client over its session
// (related to the client's call, so it reaches the call's stream); the
// answers, keyed exactly as the server keyed its requests, go back
// upstream in a retry of the call with the server's requestState
// unchanged. That repeats until the server gives a final result, within
// limits.input_rounds rounds. The client's cancellation of its call ends
// the rounds (CancelRound).

// defaultInputRounds is limits.input_rounds' default.
const defaultInputRounds = 8

// Again is what a call needs to be sent again with inputResponses: set by
// the gateway for the calls of 2025 clients on 2026-07-28 links. Rounds is
// touched by one round at a time (each follows the previous one's answer).
type Again struct {
	Req     *jsonrpc.Request // the client's request (method, Mcp-Param-* headers)
	Params  json.RawMessage  // params as sent upstream, before the link's _meta stamp
	Schema  json.RawMessage  // the tool's inputSchema, for derived Mcp-Param-* headers
	Timeout time.Duration    // each attempt's deadline
	Rounds  int
}

// RoundCall is a 2025 client's call whose 2026-07-28 upstream answered
// input_required, as a round sees it; the gateway gives one per round.
type RoundCall interface {
	Call
	// Again is what the call needs to be sent again.
	Again() *Again
	// Fail answers the call's client with rerr, unless the client
	// cancelled the call or went away meanwhile, and ends the call.
	Fail(rerr *jsonrpc.Error)
	// SendAgain sends the call upstream again, on its link, with params
	// and under a new upstream id.
	SendAgain(params json.RawMessage)
}

// ErrCallCancelled is the cause of a round's end when the client cancelled
// its call.
var ErrCallCancelled = errors.New("the client cancelled the call")

// roundKey names a client call whose input rounds are being asked.
type roundKey struct {
	s  Session
	id jsonrpc.ID
}

// rounds are the calls whose input requests are out to their client, so
// that a notifications/cancelled for the call ends the asking.
type rounds struct {
	mu     sync.Mutex
	asking map[roundKey]context.CancelCauseFunc
}

// CancelRound ends the input round of the client's call id of s, if one is
// out.
func (b *Bridge) CancelRound(s Session, id jsonrpc.ID) {
	b.rounds.mu.Lock()
	cancel := b.rounds.asking[roundKey{s, id}]
	b.rounds.mu.Unlock()
	if cancel != nil {
		cancel(ErrCallCancelled)
	}
}

// watchRound records the cancel function of the round of s's call id.
func (b *Bridge) watchRound(s Session, id jsonrpc.ID, cancel context.CancelCauseFunc) func() {
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
func (b *Bridge) inputRounds() int {
	if n := b.g.InputRounds(); n > 0 {
		return n
	}
	return defaultInputRounds
}

// IsInputRequired reports whether resp, the answer of a 2026-07-28 link to
// a call that can be sent again (again not nil), is an input_required
// result: the client is to be asked ([Bridge.Round]).
func IsInputRequired(again *Again, resp *jsonrpc.Response) bool {
	if again == nil || resp.Error != nil || len(resp.Result) == 0 {
		return false
	}
	rt, ok := wire.String(resp.Result, "resultType")
	return ok && rt == "input_required"
}

// MarkInputRequired makes a 2025 upstream's result that carries
// inputRequests but no resultType an input_required result for the
// 2026-07-28 client of a call of method, and reports whether it did. A
// go-sdk server on a 2025 session asks the client directly in a call's
// first round, but returns the inputRequests (with its own keys and
// requestState) of a second round as they are: a 2026-07-28 client that
// got them marked complete would stop there. Its retry, with the server's
// own requestState, goes upstream as a new call, which the server
// continues.
func MarkInputRequired(method string, resp *jsonrpc.Response) bool {
	if resp.Error != nil || !multiRound[method] {
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

// Round runs one input_required round of call c for its 2025 client:
// asks the client, then sends the call again with the answers.
func (b *Bridge) Round(c RoundCall, result json.RawMessage) {
	s, a := c.Session(), c.Again()
	a.Rounds++
	if limit := b.inputRounds(); a.Rounds > limit {
		b.g.Log().Warn("a 2026-07-28 server asked for client input too many times; call ended",
			"server", c.Server(), "method", c.Method(), "rounds", limit, "key", "limits.input_rounds")
		c.Fail(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
			"edge-mcp: server %q asked for client input (input_required) more than %d times in one %s; limits.input_rounds stops it",
			c.Server(), limit, c.Method())})
		return
	}
	ir, err := parseInputRequired(result)
	if err != nil {
		c.Fail(&jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("edge-mcp: server %q sent an input_required result the gateway cannot read: %v", c.Server(), err)})
		return
	}
	if rerr := canAnswer(s, c, ir.InputRequests); rerr != nil {
		c.Fail(rerr)
		return
	}
	tctx, cancel := context.WithTimeout(s.Context(), b.inputTimeout())
	defer cancel()
	ctx, cancelCause := context.WithCancelCause(tctx)
	defer cancelCause(nil)
	unwatch := b.watchRound(s, c.ClientID(), cancelCause)
	answers, rerr := b.askAll(ctx, s, c, ir.InputRequests)
	unwatch()
	if rerr != nil {
		c.Fail(rerr)
		return
	}
	params, err := retryParams(a.Params, answers, ir.RequestState)
	if err != nil {
		c.Fail(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "edge-mcp: " + err.Error()})
		return
	}
	c.SendAgain(params)
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
func canAnswer(s Session, c Call, reqs map[string]inputRequest) *jsonrpc.Error {
	for _, key := range sortedKeys(reqs) {
		method := reqs[key].Method
		capability, ok := bridgeable[method]
		if !ok {
			return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
				"edge-mcp: server %q asked for client input %q with method %q, which the gateway cannot ask a client for", c.Server(), key, method)}
		}
		if !s.Has(capability) {
			data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{capability: map[string]any{}}})
			return &jsonrpc.Error{Code: CodeMissingCapability, Data: data, Message: fmt.Sprintf(
				"edge-mcp: server %q needs the client capability %q for this %s (it asks %s), which this client did not declare at initialize",
				c.Server(), capability, c.Method(), method)}
		}
	}
	return nil
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
func (b *Bridge) askAll(ctx context.Context, s Session, c Call, reqs map[string]inputRequest) (map[string]json.RawMessage, *jsonrpc.Error) {
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
			res, rerr := s.Request(ctx, c.ClientID(), r.Method, r.Params)
			mu.Lock()
			defer mu.Unlock()
			if rerr == nil {
				answers[key] = res
				return
			}
			if first == nil && ctx.Err() == nil {
				first = &jsonrpc.Error{Code: rerr.Code, Data: rerr.Data, Message: fmt.Sprintf(
					"edge-mcp: the client answered server %q's %s (input %q) with an error: %s", c.Server(), r.Method, key, rerr.Message)}
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
			"edge-mcp: the client did not answer server %q's input requests within limits.input_timeout (%s)", c.Server(), b.inputTimeout())}
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

// SetProgressToken points params._meta.progressToken at upstream id.
func SetProgressToken(params json.RawMessage, id int64) (json.RawMessage, error) {
	meta, ok, err := wire.Field(params, "_meta")
	if err != nil || !ok {
		return params, err
	}
	if meta, err = wire.SetField(meta, "progressToken", strconv.AppendInt(nil, id, 10)); err != nil {
		return nil, fmt.Errorf("setting the progress token: %w", err)
	}
	return wire.SetField(params, "_meta", meta)
}
