package bridge

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

// A 2026-07-28 client asked for a call's approval. Such a client cannot be
// sent a request, so the call is answered with input_required: one
// elicitation (the gateway's approval form) and a requestState the gateway
// sealed, naming the call, the identity and a digest of the arguments. The
// client's retry carries the person's answer; it goes through the whole
// chain again and the approval stage decides by that answer (audited as
// for a 2025 client). Nothing waits on the gateway meanwhile, so the retry
// may reach any replica of a fleet.

// approvalKey is the key of the approval in inputRequests and
// inputResponses.
const approvalKey = "edge-mcp-approval"

// roundFields are the members of a 2026-07-28 retry that belong to its
// input_required round.
var roundFields = []string{"requestState", "inputResponses"}

// Approval is a tools/call held for a person's approval.
type Approval struct {
	Server string          // the upstream
	Tool   string          // the exposed tool
	Args   json.RawMessage // the call's arguments
	Params json.RawMessage // the call's params
	Form   json.RawMessage // the elicitation/create params asking the person
	// Within is how long the person has.
	Within time.Duration
}

// AskApproval answers the tools/call req of s with input_required asking
// for its approval.
func (b *Bridge) AskApproval(s Session, req *jsonrpc.Request, a Approval) {
	inner, err := innerRound(a.Params)
	if err != nil {
		replyError(s, req.ID, jsonrpc.CodeInvalidParams, "edge-mcp: %v", err)
		return
	}
	st := sealedState{Server: a.Server, Method: req.Method, Name: a.Tool, Identity: s.Identity().Name,
		Expires: time.Now().Add(a.Within).UnixMilli(), Approve: argsDigest(a.Args), Inner: inner}
	state, err := b.seal(st)
	if err != nil {
		replyError(s, req.ID, jsonrpc.CodeInternalError, "edge-mcp: %v", err)
		return
	}
	res, _ := json.Marshal(struct {
		ResultType    string                  `json:"resultType"`
		InputRequests map[string]inputRequest `json:"inputRequests"`
		RequestState  string                  `json:"requestState"`
	}{"input_required", map[string]inputRequest{approvalKey: {"elicitation/create", a.Form}}, state})
	reply(s, req.ID, res)
}

// resumeApproval continues the tools/call req of t whose requestState st
// asked for its approval.
func (b *Bridge) resumeApproval(s Session, req *jsonrpc.Request, t Target, st sealedState) {
	var err error
	args, _, _ := wire.Field(req.Params, "arguments")
	switch {
	case st.Method != req.Method || st.Name != t.Name || st.Server != t.Server || st.Identity != s.Identity().Name:
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
		replyError(s, req.ID, jsonrpc.CodeInvalidParams, "edge-mcp: %v", err)
		return
	}
	t.Approved(&jsonrpc.Request{ID: req.ID, Method: req.Method, Params: params}, answer)
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
