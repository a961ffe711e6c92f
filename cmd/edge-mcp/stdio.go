package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/transports"
)

// drainingConn is the stdio client's connection: when its input ends, Read
// holds the end back until every request read so far has been answered
// (or cancelled by the client), or until the deadline, so that
// `printf '…' | edge-mcp stdio` gets one answer per request.
type drainingConn struct {
	transports.Connection
	wait time.Duration // how long the end of input waits for answers

	mu   sync.Mutex
	owed map[string]bool // ids of the requests not yet answered
	idle chan struct{}   // closed when owed empties; nil while it is empty
}

func newDrainingConn(c transports.Connection, wait time.Duration) *drainingConn {
	return &drainingConn{Connection: c, wait: wait, owed: map[string]bool{}}
}

func (c *drainingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if errors.Is(err, io.EOF) {
		c.drain(ctx)
		return nil, err
	}
	if req, ok := msg.(*jsonrpc.Request); ok {
		switch {
		case req.IsCall():
			c.track(idKey(req.ID), true)
		case req.Method == "notifications/cancelled":
			var p struct {
				RequestID any `json:"requestId"`
			}
			if json.Unmarshal(req.Params, &p) == nil && p.RequestID != nil {
				if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
					c.track(idKey(id), false)
				}
			}
		}
	}
	return msg, err
}

func (c *drainingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.track(idKey(resp.ID), false)
	}
	return err
}

// track marks the request id as owed an answer, or as answered.
func (c *drainingConn) track(id string, owed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if owed {
		c.owed[id] = true
		if c.idle == nil {
			c.idle = make(chan struct{})
		}
		return
	}
	delete(c.owed, id)
	if len(c.owed) == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
}

// drain waits until no answer is owed, the deadline passes or ctx ends.
func (c *drainingConn) drain(ctx context.Context) {
	c.mu.Lock()
	idle := c.idle
	c.mu.Unlock()
	if idle == nil {
		return
	}
	t := time.NewTimer(c.wait)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
}

func idKey(id jsonrpc.ID) string {
	b, _ := json.Marshal(id.Raw())
	return string(b)
}

// stdioDrainWait bounds how long the end of stdin waits for answers: the
// longest per-call timeout of the config's servers, and a little more for
// the error answer of a call that times out.
func stdioDrainWait(cfg *config.Config) time.Duration {
	longest := 60 * time.Second
	for _, s := range cfg.Servers {
		longest = max(longest, s.Timeout)
	}
	return longest + 5*time.Second
}
