package reconnect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ErrUnreachable marks failures where the server could not be reached at
// all (refused connection, broken stream), as opposed to a slow answer.
var ErrUnreachable = errors.New("unreachable")

// Answered is ErrUnreachable for the code (errors.Is) with the text of
// the server's answer: a server that answered wanting authorization was
// not reached for a call, but the word "unreachable" would send an
// operator looking at the network.
type Answered struct{ Err error }

func (e Answered) Error() string        { return e.Err.Error() }
func (e Answered) Unwrap() error        { return e.Err }
func (e Answered) Is(target error) bool { return target == ErrUnreachable }

// Health is how a live connection is checked: a ping every Interval,
// answered within Timeout; Misses consecutive unanswered pings fail it.
type Health struct {
	Interval time.Duration // between pings; default 30 s
	Timeout  time.Duration // for one ping; default 10 s
	Misses   int           // consecutive unanswered pings that fail a server; default 3
}

// Pinger is one live connection, as Watch checks it.
type Pinger interface {
	// Ping pings the server and returns its error (a *jsonrpc.Error when
	// it answered with one).
	Ping(ctx context.Context) error
	// Fail ends the connection with err as the reason.
	Fail(err error)
}

// Watch pings p every h.Interval, and at once when now fires (a call
// failed suspiciously), until ctx ends. An unreachable server fails p at
// once; a server that does not answer in time fails it after h.Misses
// consecutive pings, so a slow but answering server stays healthy.
func (k *Keeper) Watch(ctx context.Context, h Health, p Pinger, now <-chan struct{}) {
	t := time.NewTicker(h.Interval)
	defer t.Stop()
	misses := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-now:
		}
		pctx, cancel := context.WithTimeout(ctx, h.Timeout)
		err := p.Ping(pctx)
		cancel()
		k.checked()
		var rpcErr *jsonrpc.Error
		switch {
		case err == nil, errors.As(err, &rpcErr) && !errors.Is(err, ErrUnreachable):
			misses = 0 // it answered, even if with an error
			continue
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrUnreachable):
			p.Fail(fmt.Errorf("health check: %w", err))
			return
		}
		misses++
		k.log.Warn("health check missed", "misses", misses, "of", h.Misses, "err", err)
		if misses >= h.Misses {
			p.Fail(fmt.Errorf("health check: %d pings in a row unanswered: %w", misses, err))
			return
		}
	}
}
