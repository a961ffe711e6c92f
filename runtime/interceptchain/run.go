package interceptchain

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// Wanted reports whether cfg describes an interceptor chain.
func Wanted(cfg *config.Config) bool {
	return len(cfg.Interceptors) > 0 || len(cfg.InterceptorServers) > 0
}

// Open builds and starts the Set of cfg; nil when cfg describes no chain.
// A bad entry or a Start that fails is a *config.Error on the key
// "interceptors". The caller owns the Set and closes it when its config
// generation ends.
func Open(ctx context.Context, cfg *config.Config, opts Options) (*Set, error) {
	if !Wanted(cfg) {
		return nil, nil
	}
	set, err := NewSet(cfg, opts)
	if err != nil {
		return nil, &config.Error{File: cfg.Path, Key: "interceptors", Reason: err.Error()}
	}
	if err := set.Start(ctx); err != nil {
		set.Close()
		return nil, &config.Error{File: cfg.Path, Key: "interceptors", Reason: err.Error()}
	}
	return set, nil
}

// Run runs ev through ch for an event about subject on server. When the
// event goes on, it logs what audit and fail-open members did and returns
// the outcome; else it logs refusedMsg with the reason and returns the
// client's message and whether a member refused the event (else the chain
// ended: its ctx done). log is the caller's; Run keeps nothing.
func Run(ctx context.Context, log *slog.Logger, ch *intercept.Chain, ev intercept.Event, server, subject, refusedMsg string) (out *intercept.Outcome, msg string, refused bool) {
	out, err := ch.Run(ctx, ev)
	if err != nil {
		var ref *intercept.Refusal
		if refused = errors.As(err, &ref); refused {
			msg = "edge-mcp: " + ref.Error()
		} else {
			msg = "edge-mcp: interceptor chain ended: " + err.Error()
		}
		log.Info(refusedMsg, "event", ev.Event, "server", server, "subject", subject, "reason", msg)
		return nil, msg, refused
	}
	for _, r := range out.Audits {
		log.Info("audit interceptor would have refused", "interceptor", r.Interceptor, "event", ev.Event, "server", server, "subject", subject, "reason", r.Reason())
	}
	for _, sh := range out.Shadows {
		log.Info("audit interceptor would have changed the payload", "interceptor", sh.Interceptor, "event", ev.Event, "server", server, "subject", subject)
	}
	for _, r := range out.Withheld {
		log.Info("interceptor withheld the entries of its scope", "interceptor", r.Interceptor, "event", ev.Event, "server", server, "reason", r.Reason())
	}
	for _, f := range out.Failures {
		log.Warn("interceptor failed (fail-open)", "interceptor", f.Interceptor, "event", ev.Event, "server", server, "subject", subject, "err", f.Error())
	}
	return out, "", false
}

// Failure is why an event Around ran did not get its answer: the client's
// JSON-RPC error code and message; Refused when an interceptor refused
// it (else the chain ended, or answer failed).
type Failure struct {
	Code    int64
	Message string
	Refused bool
}

// Around runs an event the gateway answers itself (a list) or forwards
// and waits for through ch: the request phase on params, answer on the
// params the mutators leave, the response phase on its result (with the
// server of each entry answer names for a list's page: scoped members
// see only theirs, intercept.Event.EntryServers). A refused request is
// -32602, a refused result -32603, both naming the interceptor; answer's
// own failure is returned as it is.
func Around(ctx context.Context, log *slog.Logger, ch *intercept.Chain, event string, ictx *intercept.Context, params json.RawMessage,
	answer func(params json.RawMessage) (result json.RawMessage, entryServers []string, f *Failure)) (json.RawMessage, *Failure) {
	subject := ictx.Subject
	out, msg, refused := Run(ctx, log, ch, intercept.Event{Event: event, Phase: intercept.Request, Payload: params, Context: ictx}, ictx.Server, subject, "interceptor refused a request")
	if out == nil {
		code := int64(intercept.CodeInternalError)
		if refused {
			code = intercept.CodeInvalidParams
		}
		return nil, &Failure{Code: code, Message: msg, Refused: refused}
	}
	res, servers, f := answer(out.Payload)
	if f != nil {
		return nil, f
	}
	out, msg, refused = Run(ctx, log, ch, intercept.Event{Event: event, Phase: intercept.Response, Payload: res, Context: ictx, EntryServers: servers},
		ictx.Server, subject, "interceptor withheld a result")
	if out == nil {
		return nil, &Failure{Code: intercept.CodeInternalError, Message: msg, Refused: refused}
	}
	return out.Payload, nil
}
