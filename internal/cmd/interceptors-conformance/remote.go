package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/edge-mcp/edge-mcp/policy/intercept"
	"github.com/edge-mcp/edge-mcp/policy/intercept/conformance"
	"github.com/edge-mcp/edge-mcp/runtime/interceptors"
)

// remoteHost hosts each session's interceptors behind an interceptor
// server (a go-sdk server over streamable HTTP on 127.0.0.1) and reaches
// them through runtime/interceptors: list and invoke go over the wire,
// and the chain runs over the discovered remote interceptors.
type remoteHost struct {
	mods *modules
	log  *slog.Logger
}

func newRemote(_ context.Context, mods *modules, log *slog.Logger) (*remoteHost, error) {
	return &remoteHost{mods: mods, log: log}, nil
}

func (r *remoteHost) close() {}

type remoteSession struct {
	client  *interceptors.Client
	chain   *intercept.Chain
	closers []func()
}

// serve starts an interceptor server for reg on 127.0.0.1 and returns its
// URL and a function that stops it.
func serve(reg *intercept.Registry) (string, func(), error) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "conformance-interceptors", Version: "1"}, nil)
	if err := interceptors.Register(srv, reg); err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)}
	go func() { _ = hs.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/mcp", func() { _ = hs.Close() }, nil
}

func (r *remoteHost) NewSession(ctx context.Context, fis []conformance.Interceptor) (conformance.Session, error) {
	reg, closers, err := r.mods.registry(ctx, fis)
	if err != nil {
		return nil, err
	}
	s := &remoteSession{closers: closers}
	url, stop, err := serve(reg)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.closers = append(s.closers, stop)
	s.client, err = interceptors.Dial(ctx, "conformance", interceptors.ServerOptions{URL: url})
	if err != nil {
		s.Close()
		return nil, err
	}
	ics, skipped, err := s.client.Interceptors(ctx)
	if err == nil && len(skipped) > 0 {
		err = fmt.Errorf("descriptors skipped: %v", errors.Join(skipped...))
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	var members []intercept.Member
	for _, ic := range ics {
		members = append(members, intercept.Member{Interceptor: ic})
	}
	if s.chain, err = intercept.NewChain(intercept.Options{Logger: r.log}, members...); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *remoteSession) Close() {
	if s.client != nil {
		_ = s.client.Close()
	}
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

func (s *remoteSession) List(ctx context.Context, event string) (json.RawMessage, error) {
	return s.client.List(ctx, event)
}

func (s *remoteSession) Invoke(ctx context.Context, params json.RawMessage) (json.RawMessage, int64, error) {
	res, err := s.client.Invoke(ctx, params)
	var rpc *intercept.RPCError
	if errors.As(err, &rpc) {
		return nil, rpc.Code, nil
	}
	return res, 0, err
}

func (s *remoteSession) Apply(ctx context.Context, event, phase string, payload json.RawMessage, sid string) (bool, json.RawMessage, error) {
	return conformance.ApplyChain(ctx, s.chain, event, phase, payload, sid)
}
