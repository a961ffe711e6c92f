package main

import (
	"context"
	"errors"
	"log/slog"
)

type remoteHost struct{}

func newRemote(ctx context.Context, mods *modules, log *slog.Logger) (*remoteHost, error) {
	return nil, errors.New("remote: not yet")
}

func (r *remoteHost) close() {}

func (r *remoteHost) newSession(ctx context.Context, fis []fixtureInterceptor) (session, error) {
	return nil, errors.New("remote: not yet")
}
