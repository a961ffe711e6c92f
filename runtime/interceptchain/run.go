package interceptchain

import (
	"context"
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
	for _, f := range out.Failures {
		log.Warn("interceptor failed (fail-open)", "interceptor", f.Interceptor, "event", ev.Event, "server", server, "subject", subject, "err", f.Error())
	}
	return out, "", false
}
