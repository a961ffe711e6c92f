package fleet

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/runtime/cluster"
)

// Answers to the gateway's requests to a client (sampling, elicitation,
// roots) across replicas: the request's id names the replica whose
// upstream call waits, "<n>@<replica token>"; the replica that receives
// the client's answer sends it there with request/reply.

// answerTimeout bounds the hand-over of one answer to its replica.
const answerTimeout = 5 * time.Second

// fleetAnswer is what travels on <fleet>.replica.<replica>.answer.
type fleetAnswer struct {
	Session  string          `json:"session"`
	Response json.RawMessage `json:"response"`
}

// OutID is the id of session s's request number n to its client: in a
// fleet, it names this replica (the client's answer may reach another).
func (f *Fleet) OutID(s Session, n int64) jsonrpc.ID {
	fs := f.Sessions()
	if fs == nil || !s.Shared() {
		id, _ := jsonrpc.MakeID(float64(n))
		return id
	}
	id, _ := jsonrpc.MakeID(strconv.FormatInt(n, 10) + "@" + cluster.Token(fs.node.Replica()))
	return id
}

// splitOutID reads an id made by OutID: number and replica.
func splitOutID(id jsonrpc.ID) (n int64, replica string, ok bool) {
	str, isStr := id.Raw().(string)
	num, tok, found := strings.Cut(str, "@")
	if !isStr || !found {
		return 0, "", false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, "", false
	}
	replica, err = cluster.FromToken(tok)
	return n, replica, err == nil
}

// OutIndex is the number of the request of session s that r answers,
// when it waits here; an answer to another replica's request is sent
// there and ok is false.
func (f *Fleet) OutIndex(s Session, r *jsonrpc.Response) (int64, bool) {
	if n, ok := r.ID.Raw().(int64); ok {
		return n, true
	}
	fs := f.Sessions()
	if fs == nil {
		return 0, false
	}
	n, replica, ok := splitOutID(r.ID)
	if !ok {
		return 0, false
	}
	if replica == fs.node.Replica() {
		return n, true
	}
	fs.forwarded.Add(1)
	go fs.sendAnswer(s.ID(), replica, r)
	return 0, false
}

// sendAnswer hands a client's answer to the replica whose request it
// answers.
func (fs *Sessions) sendAnswer(session, replica string, r *jsonrpc.Response) {
	raw, err := wire.Append(nil, r)
	if err != nil {
		fs.log.Warn("cluster: encoding a client's answer", "err", err)
		return
	}
	b, _ := json.Marshal(fleetAnswer{Session: session, Response: raw})
	subj := fs.node.Subject("replica", cluster.Token(replica), "answer")
	ctx, cancel := context.WithTimeout(fs.ctx, answerTimeout)
	defer cancel()
	reply, err := fs.node.Request(ctx, subj, b)
	switch {
	case cluster.IsRefused(err): // logged
	case err != nil:
		fs.log.Warn("cluster: the replica waiting for a client's answer did not take it (gone?)", "replica", replica, "err", err)
	case string(reply) != "ok":
		fs.log.Warn("cluster: a replica refused a client's answer", "replica", replica, "reason", string(reply))
	}
}

// onAnswer takes an answer another replica received for a request this
// replica sent.
func (fs *Sessions) onAnswer(m *cluster.Msg) {
	if reason := fs.takeAnswer(m.Data); reason != "" {
		fs.log.Warn("cluster: refused an answer from NATS", "reason", reason)
		_ = m.Respond([]byte(reason))
		return
	}
	_ = m.Respond([]byte("ok"))
}

func (fs *Sessions) takeAnswer(data []byte) string {
	var a fleetAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		return "undecodable: " + err.Error()
	}
	msg, err := wire.Decode(a.Response)
	r, ok := msg.(*jsonrpc.Response)
	if err != nil || !ok {
		return "not a JSON-RPC response"
	}
	v, found := fs.local.Load(a.Session)
	if !found {
		return "no such session here"
	}
	n, replica, ok := splitOutID(r.ID)
	if !ok || replica != fs.node.Replica() {
		return "not an answer to this replica"
	}
	v.(Session).Answer(n, r)
	return ""
}
