package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// This file asks a 2026-07-28 client for a call's approval. Such a client
// cannot be sent a request, so the call is answered with input_required:
// one elicitation (the approval form of approval.go) and a requestState
// the gateway sealed, naming the call, the identity and a digest of the
// arguments. The client's retry carries the person's answer; it goes
// through the whole chain again and the approval stage decides by that
// answer (audited as for a 2025 client). Nothing waits on the gateway
// meanwhile, so the retry may reach any replica of a fleet.

// approvalKey is the key of the approval in inputRequests and
// inputResponses.
const approvalKey = "edge-mcp-approval"

// roundFields are the members of a 2026-07-28 retry that belong to its
// input_required round.
var roundFields = []string{"requestState", "inputResponses"}

// askApproval answers tc with input_required asking for its approval.
func (s *session) askApproval(tc *toolCall) {
	inner, err := innerRound(tc.params)
	if err != nil {
		s.replyError(tc.req.ID, jsonrpc.CodeInvalidParams, "edge-mcp: %v", err)
		return
	}
	st := sealedState{Server: tc.it.up.name, Method: tc.req.Method, Name: tc.it.exposed, Identity: s.id.Name,
		Expires: time.Now().Add(approvalTimeout).UnixMilli(), Approve: argsDigest(tc.args), Inner: inner}
	state, err := s.g.bridge.seal(st)
	if err != nil {
		s.replyError(tc.req.ID, jsonrpc.CodeInternalError, "edge-mcp: %v", err)
		return
	}
	type inputRequest struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	res, _ := json.Marshal(struct {
		ResultType    string                  `json:"resultType"`
		InputRequests map[string]inputRequest `json:"inputRequests"`
		RequestState  string                  `json:"requestState"`
	}{"input_required", map[string]inputRequest{approvalKey: {"elicitation/create", approvalParams(tc)}}, state})
	s.reply(tc.req.ID, res)
}

// resumeApproval continues a tools/call of it whose requestState asked for
// its approval, and reports whether state was such a state (else the
// retry belongs to bridge.go).
func (s *session) resumeApproval(req *jsonrpc.Request, it *item, state string) bool {
	st, err := s.g.bridge.open(state)
	if err != nil || st.Approve == "" {
		return false
	}
	args, _, _ := wire.Field(req.Params, "arguments")
	switch {
	case st.Method != req.Method || st.Name != it.exposed || st.Server != it.up.name || st.Identity != s.id.Name:
		err = errors.New("requestState belongs to another call")
	case argsDigest(args) != st.Approve:
		err = errors.New("requestState belongs to another call: the arguments differ from those approved")
	}
	var answer json.RawMessage
	if err == nil {
		responses, _, _ := wire.Field(req.Params, "inputResponses")
		if answer, _, _ = wire.Field(responses, approvalKey); len(answer) == 0 {
			err = errors.New(`inputResponses has no answer for "` + approvalKey + `"`)
		}
	}
	var params json.RawMessage
	if err == nil {
		params, err = restoreRound(req.Params, st.Inner)
	}
	if err != nil {
		s.replyError(req.ID, jsonrpc.CodeInvalidParams, "edge-mcp: %v", err)
		return true
	}
	s.toolCallAnswered(&jsonrpc.Request{ID: req.ID, Method: req.Method, Params: params}, it, answer)
	return true
}

// innerRound keeps the round members of params (an upstream's
// requestState and the answers to its inputRequests) while the call is
// held for approval; nil when it has none.
func innerRound(params json.RawMessage) (json.RawMessage, error) {
	var members []wire.Member
	for _, k := range roundFields {
		if v, ok, _ := wire.Field(params, k); ok {
			members = append(members, wire.Member{Key: k, Value: v})
		}
	}
	if len(members) == 0 {
		return nil, nil
	}
	return wire.EditFields(nil, nil, members)
}

// restoreRound returns params with the round members of the approval
// round replaced by those kept in inner.
func restoreRound(params, inner json.RawMessage) (json.RawMessage, error) {
	var set []wire.Member
	for _, k := range roundFields {
		if v, ok, _ := wire.Field(inner, k); ok {
			set = append(set, wire.Member{Key: k, Value: v})
		}
	}
	return wire.EditFields(params, roundFields, set)
}

// argsDigest is the SHA-256 of a call's arguments in a canonical form
// (keys sorted, no whitespace, numbers as written), so that a retry that
// sends the same arguments matches whatever its key order.
func argsDigest(args json.RawMessage) string {
	canon := []byte("{}")
	if len(args) > 0 {
		d := json.NewDecoder(bytes.NewReader(args))
		d.UseNumber()
		var v any
		if d.Decode(&v) == nil {
			if b, err := json.Marshal(v); err == nil {
				canon = b
			}
		} else {
			canon = args
		}
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:16])
}
