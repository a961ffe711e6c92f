package interceptchain

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/interceptors"
	"github.com/edge-mcp/edge-mcp/transports"
)

// StandIn is the name of the stand-in for an entry whose server was
// never reached: "interceptorServers.NAME" (with "#N" from the second
// entry of the same server on).
func StandIn(server string, n int) string {
	if n <= 1 {
		return "interceptorServers." + server
	}
	return fmt.Sprintf("interceptorServers.%s#%d", server, n)
}

// build makes the chain from the entries and what is known of the
// servers, when that changed since the last build (s.mu held).
func (s *Set) build() (changed bool, err error) {
	var members []intercept.Member
	inChain := map[string]string{} // interceptor name -> the entry's source
	standIns := map[string]int{}
	var key strings.Builder
	for i, e := range s.entries {
		base, err := member(e)
		if err != nil {
			return false, fmt.Errorf("interceptors[%d]: %w", i, err)
		}
		base.Virtual = s.virtual[e.Server+e.Module] // one of them is set
		var ics []intercept.Interceptor
		if e.Server != "" {
			sv := s.byName[e.Server]
			if sv.conn == nil {
				standIns[e.Server]++
				m := base
				m.Interceptor = intercept.Unavailable(StandIn(e.Server, standIns[e.Server]), fmt.Errorf("interceptor server %q not reached: %v", e.Server, sv.err))
				members = append(members, m)
				fmt.Fprintf(&key, "%d:unreached;", i)
				continue
			}
			ics = sv.ics
		} else {
			ics = s.modules[e.Module]
		}
		if len(e.Names) > 0 {
			ics = intercept.Select(ics, e.Names)
		}
		for _, ic := range ics {
			d := ic.Describe()
			if prev, dup := inChain[d.Name]; dup {
				s.log.Warn("interceptor selected twice; the first entry keeps it", "interceptor", d.Name, "first", prev, "again", e.Source())
				continue
			}
			inChain[d.Name] = e.Source()
			m := base
			m.Interceptor = ic
			if mode, ok := s.modes[d.Name]; ok {
				m.Mode = mode
			}
			members = append(members, m)
			b, _ := json.Marshal(d)
			fmt.Fprintf(&key, "%d:%s:%s;", i, b, m.Mode)
		}
	}
	if k := key.String(); k == s.lastKey && s.chain.Load() != nil {
		return false, nil
	}
	c, err := intercept.NewChain(s.opts.Chain, members...)
	if err != nil {
		return false, err
	}
	s.chain.Store(c)
	s.lastKey = key.String()
	return true, nil
}

// member is an entry's overrides and scope as a chain member.
func member(e config.InterceptorEntry) (intercept.Member, error) {
	m := intercept.Member{Tools: e.Tools, Servers: e.Servers, FailOpen: e.FailOpen, Timeout: time.Duration(e.TimeoutMS) * time.Millisecond, Config: e.Config}
	if e.Mode != "" {
		mode, err := intercept.ParseMode(e.Mode)
		if err != nil {
			return m, err
		}
		m.Mode = mode
	}
	if e.Priority != nil {
		p := int32(*e.Priority)
		m.Priority = &intercept.Priority{Request: p, Response: p}
	}
	return m, nil
}

// serverOptions are the client options of sv's transport: streamable
// HTTP, legacy SSE or WebSocket with its headers and bearer token, or a
// stdio program.
func (s *Set) serverOptions(sv *server) (interceptors.ServerOptions, error) {
	sc := sv.cfg
	opts := interceptors.ServerOptions{URL: sc.URL, Logger: s.log}
	if sc.Type == "stdio" {
		env := os.Environ()
		for k, v := range sc.Env {
			env = append(env, k+"="+v)
		}
		opts.Transport = &transports.CommandTransport{Command: sc.Command, Args: sc.Args, Env: env, Dir: sc.Cwd, Logger: s.log, Name: sc.Name}
		return opts, nil
	}
	header := http.Header{}
	for k, v := range sc.Headers {
		header.Set(k, v)
	}
	if sc.BearerToken != "" {
		header.Set("Authorization", "Bearer "+sc.BearerToken)
	}
	hc := transports.SharedHTTPClient() // many idle connections: concurrent invocations do not dial
	switch {
	case s.opts.HTTPClient != nil:
		c, err := s.opts.HTTPClient(sc)
		if err != nil {
			return opts, fmt.Errorf("interceptor server %q: %w", sc.Name, err)
		}
		hc = c
	case sc.OAuth != nil:
		return opts, fmt.Errorf("interceptor server %q wants OAuth, and this process has no OAuth client for interceptor servers", sc.Name)
	}
	switch sc.Type {
	case "sse":
		opts.Transport = &mcp.SSEClientTransport{Endpoint: sc.URL, HTTPClient: interceptors.HeaderClient(hc, header)}
	case "websocket":
		opts.Transport = &transports.WebSocketClientTransport{URL: sc.URL, Header: header, HTTPClient: hc, Logger: s.log}
	default:
		opts.Transport = &transports.StreamableClientTransport{URL: sc.URL, Header: header, HTTPClient: hc, Logger: s.log, NoStandalone: true}
		opts.SessionGone = transports.SessionExpired // a restarted server: dial again and ask once more
	}
	return opts, nil
}
