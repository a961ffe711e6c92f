package gateway

import (
	"encoding/json"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/internal/wire"
	"github.com/edge-mcp/edge-mcp/policy"
	"github.com/edge-mcp/edge-mcp/runtime/virtual"
	"github.com/edge-mcp/edge-mcp/runtime/whynot"
)

// This file answers a tools/call or prompts/get whose name the session's
// view does not hold, with what the caller may know of why (the answers
// are runtime/whynot's): its server is down or needs authorization, it is
// withheld pending approval, or it is hidden from this caller — then
// "unknown", as for a name nobody offers, and the real reason goes to the
// operator's log (INFO, once per session and name) and, for tools, to the
// audit log (outcome "denied").

// Reasons in the data of the errors above.
const (
	reasonServerUnavailable = whynot.ReasonServerUnavailable
	reasonPendingApproval   = whynot.ReasonPendingApproval
)

// notFound explains to a session why a name its view does not hold cannot
// be called; it holds no state of its own.
type notFound struct{ *session }

// answer answers a call of name, which the session's view does not hold.
// mayWait: a name whose server is disconnected waits for it (heal.go).
func (s notFound) answer(req *jsonrpc.Request, k listKind, name string, mayWait bool) {
	full := s.g.route.catalogue()
	gd := s.g.guard.Load()
	key, renamed := name, false // the catalogue's name of what the client calls name
	if vs := s.g.virt.Load().ByName(s.vs); vs != nil && k == kindTools {
		if tool, ok := vs.Renamed(name); ok {
			key, renamed = tool, true // its server's state is the catalogue name's
		}
	}
	if it := full.Index[k][key]; it != nil && it.Up != nil {
		reason := s.hiddenFrom(gd, k, it)
		if reason == "" && s.vs != "" {
			reason = virtualSide{s.session}.hidden(k, key)
		}
		if reason == "" {
			reason = "not in this client's view of the catalogue"
		}
		s.explainHidden(req, k, it, reason)
		s.replyUnknown(req, k, name)
		return
	}
	if vs := s.g.virt.Load().ByName(s.vs); s.vs != "" && (vs == nil || !vs.Selects(virtual.Kind(k), key) || !renamed && vs.RenamedAway(key)) {
		s.replyUnknown(req, k, name) // nothing of what its virtual server leaves out, not even its state
		return
	}
	if it := full.Withheld[key]; it != nil && k == kindTools {
		if reason := s.hiddenFrom(gd, k, it); reason != "" {
			s.explainHidden(req, k, it, reason)
			s.replyUnknown(req, k, name)
			return
		}
		s.pendingApproval(req, it)
		return
	}
	if it := full.Gone[k][key]; it != nil {
		if reason := s.hiddenFrom(gd, k, it); reason != "" {
			s.explainHidden(req, k, it, reason)
			s.replyUnknown(req, k, name)
			return
		}
		if mayWait && it.Up.keep.State() != StateNeedsAuthorization {
			go s.retryNamed(req, k, it)
			return
		}
		s.serverUnavailable(req, k, it, nil)
		return
	}
	s.replyUnknown(req, k, name)
}

func (s notFound) replyUnknown(req *jsonrpc.Request, k listKind, name string) {
	s.replyError(req.ID, jsonrpc.CodeInvalidParams, "%s", whynot.Unknown(kindWhat(k), name))
}

// hiddenFrom says why the session may not see it ("" when it may): an
// access list, or a tools_list policy that hides or renames it.
func (s notFound) hiddenFrom(gd *guard, k listKind, it *item) string {
	who := s.id.Name
	if k != kindTools {
		if !gd.ServerAllowed(who, it.Up.name) {
			return "hidden by the access list"
		}
		return ""
	}
	if !gd.ToolAllowed(who, it.Up.name, it.Exposed) {
		return "hidden by the access list"
	}
	if !s.g.pol.Hooks().Has(policy.HookToolsList) {
		return ""
	}
	pg := s.g.pol.Acquire()
	if pg == nil {
		return ""
	}
	defer s.g.pol.Release(pg)
	out, failed, err := viewOf(s.session, gd).RunToolsList(pg, []*item{it})
	switch {
	case err != nil || failed:
		return "a tools_list policy failed (the tool stays hidden)"
	case len(out) != 1 || out[0].Exposed != it.Exposed:
		return "hidden or renamed by a tools_list policy"
	}
	return ""
}

// explainHidden logs, once per session and name, why a call of a name
// hidden from the session was answered "unknown", and audits tool calls.
func (s notFound) explainHidden(req *jsonrpc.Request, k listKind, it *item, reason string) {
	if k == kindTools {
		args, _, _ := wire.Field(req.Params, "arguments")
		s.recordToolCall(it.Up.name, it.Exposed, metrics.OutcomeDenied, time.Now(), args, "unknown tool to the caller: "+reason)
	}
	if s.g.route.explainOnce(s.session, listKinds[k].Member+"\x00"+it.Exposed) {
		s.g.log.Info("call refused as unknown: the name is hidden from this client",
			"kind", listKinds[k].Member, "name", it.Exposed, "server", it.Up.name, "identity", s.id.Name, "reason", reason)
	}
}

// explainOnce reports whether name's refusal has not been logged for s yet,
// and records that it is now.
func (r *router) explainOnce(s *session, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, live := r.sessions[s]; !live {
		return true // not registered (or gone): nothing to remember it by
	}
	set := r.explained[s]
	if set == nil {
		set = make(map[string]struct{})
		r.explained[s] = set
	}
	if _, done := set[name]; done {
		return false
	}
	set[name] = struct{}{}
	return true
}

// pendingApproval answers a call of a tool withheld by tool pinning.
func (s notFound) pendingApproval(req *jsonrpc.Request, it *item) {
	server, tool := it.Up.name, it.Name
	msg, data := whynot.PendingApproval(it.Exposed, server, tool)
	args, _, _ := wire.Field(req.Params, "arguments")
	s.recordToolCall(server, it.Exposed, metrics.OutcomeUnavailable, time.Now(), args, msg)
	s.replyData(req.ID, whynot.Code, msg, data)
}

// serverUnavailable answers a call of a tool or prompt whose server is
// down, naming the server, its state, why it is down (waited: why the call
// waiting for it gave up) and its next reconnection attempt.
func (s notFound) serverUnavailable(req *jsonrpc.Request, k listKind, it *item, waited error) {
	state, next, lastErr := it.Up.retryState()
	what := kindWhat(k)
	d := whynot.Down{Server: it.Up.name, State: string(state), NeedsAuthorization: state == StateNeedsAuthorization, Next: next, LastErr: lastErr}
	msg, data := d.Unavailable(what, it.Exposed, waited)
	if k == kindTools {
		args, _, _ := wire.Field(req.Params, "arguments")
		s.recordToolCall(it.Up.name, it.Exposed, metrics.OutcomeUnavailable, time.Now(), args, msg)
	}
	s.g.log.Debug("call of an unavailable server's "+what, "server", it.Up.name, "name", it.Exposed, "state", state)
	s.replyData(req.ID, whynot.Code, msg, data)
}

// kindWhat is what a call of kind k names: "tool" or "prompt".
func kindWhat(k listKind) string {
	if k == kindPrompts {
		return "prompt"
	}
	return "tool"
}

// replyData answers req with a JSON-RPC error carrying data.
func (s notFound) replyData(id jsonrpc.ID, code int64, msg string, data map[string]any) {
	raw, err := json.Marshal(data)
	if err != nil {
		s.g.log.Log(s.ctx, slog.LevelError, "encoding error data", "err", err)
	}
	s.write(s.ctx, &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: msg, Data: raw}})
}

// retryState is the upstream's connection state and its next reconnection
// attempt (zero when none is scheduled).
func (u *upstream) retryState() (State, time.Time, string) { return u.keep.Retry() }
