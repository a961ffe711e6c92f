package oauth

import (
	"context"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"time"
)

// callbackWait bounds how long the callback page waits for the token
// exchange to report the outcome.
const callbackWait = 30 * time.Second

// CallbackHandler completes pending authorizations: the authorization
// server redirects the person's browser to it with code, state and iss.
// An unknown or already used state is refused; the outcome (the token
// exchange, the iss check) is shown on the page.
func (m *Manager) CallbackHandler() http.Handler {
	return http.HandlerFunc(m.serveCallback)
}

func (m *Manager) serveCallback(w http.ResponseWriter, r *http.Request) {
	code, msg := m.complete(r.Context(), r.URL.Query(), true)
	if code != 0 {
		page(w, code, msg)
	}
}

// complete hands a redirect's query to the flight of its state and
// returns the page to show (code 0: the request ended first). A state
// this replica does not own goes, when forward is set, to the replica of
// the fleet that does (Relay).
func (m *Manager) complete(ctx context.Context, q url.Values, forward bool) (int, string) {
	state := q.Get("state")
	f := m.take(state)
	if state == "" || f == nil {
		if r := m.relay.Load(); forward && state != "" && r != nil {
			if code, msg, ok := (*r).Forward(ctx, state, q); ok {
				return code, msg
			}
		}
		m.log.Warn("authorization callback refused: unknown or expired state")
		return http.StatusBadRequest, "edge-mcp: this authorization is unknown or has expired; start it again (edge-mcp auth login SERVER)."
	}
	res := callbackResult{code: q.Get("code"), state: state, iss: q.Get("iss")}
	if e := q.Get("error"); e != "" {
		res.err = fmt.Errorf("the authorization server refused: %s", e)
	} else if res.code == "" {
		res.err = fmt.Errorf("the redirect carried no code")
	}
	select {
	case f.result <- res:
	default:
	}
	t := time.NewTimer(callbackWait)
	defer t.Stop()
	select {
	case <-f.done:
	case <-t.C:
		return http.StatusAccepted, fmt.Sprintf("edge-mcp: the authorization of server %q is being completed.", f.h.server)
	case <-ctx.Done():
		return 0, ""
	}
	if f.err != nil {
		return http.StatusBadRequest, fmt.Sprintf("edge-mcp: the authorization of server %q failed: %s", f.h.server, f.reason())
	}
	return http.StatusOK, fmt.Sprintf("edge-mcp: server %q is authorized. You may close this window.", f.h.server)
}

func page(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	fmt.Fprintf(w, "<!doctype html><title>edge-mcp</title><p>%s</p>\n", html.EscapeString(msg))
}

// listenLoopback serves the callback at redirect when it is a loopback
// http URL other than the gateway's own (callbackPort), until Close.
func (m *Manager) listenLoopback(redirect string) {
	if redirect == "" || redirect == m.redirectURL() {
		return
	}
	u, err := url.Parse(redirect)
	if err != nil || u.Scheme != "http" || u.Port() == "" {
		return
	}
	switch u.Hostname() {
	case "localhost", "127.0.0.1", "::1":
	default:
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.loops[u.Port()] != nil || m.closed {
		return
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", u.Port()))
	if err != nil {
		m.log.Warn("cannot listen for the authorization redirect", "redirect_url", redirect, "err", err)
		return
	}
	mux := http.NewServeMux()
	path := u.Path
	if path == "" {
		path = "/"
	}
	mux.Handle(path, m.CallbackHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	m.loops[u.Port()] = srv
	go srv.Serve(ln)
	m.log.Info("listening for the authorization redirect", "addr", ln.Addr().String())
}
