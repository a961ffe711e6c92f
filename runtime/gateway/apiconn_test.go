package gateway

import (
	"context"
	"errors"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// apiConn is an in-process connection for tests that drive a session by
// hand: the session reads in and writes out.
type apiConn struct {
	peer *peer
	in   chan jsonrpc.Message // test → session
	out  chan jsonrpc.Message // session → test
	done chan struct{}
	once sync.Once
}

func newAPIConn(p *peer) *apiConn {
	return &apiConn{peer: p, in: make(chan jsonrpc.Message, 4), out: make(chan jsonrpc.Message, 16), done: make(chan struct{})}
}

func (c *apiConn) PeerInfo() any     { return c.peer }
func (c *apiConn) SessionID() string { return "" }

func (c *apiConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.in:
		return m, nil
	case <-c.done:
		return nil, errors.New("closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *apiConn) Write(ctx context.Context, m jsonrpc.Message) error {
	select {
	case c.out <- m:
		return nil
	case <-c.done:
		return errors.New("closed")
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *apiConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return nil
}
