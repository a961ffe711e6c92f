package interceptchain

import (
	"reflect"
	"sync"

	"github.com/edge-mcp/edge-mcp/runtime/interceptors"
)

// conn is a connection to an interceptor server, shared by the Sets of
// consecutive config generations while the server's config does not
// change: a reload keeps it instead of dialing again. The last Set to
// let go of it closes it.
type conn struct {
	client *interceptors.Client

	mu     sync.Mutex
	refs   int
	relist chan struct{} // of the newest server holding it: a reconnect lists there
}

// reconnected asks the newest holder to list again (after a reconnect).
func (c *conn) reconnected() {
	c.mu.Lock()
	ch := c.relist
	c.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
	}
}

// hold takes one more reference for a server whose relist channel is ch.
func (c *conn) hold(ch chan struct{}) *conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs++
	c.relist = ch
	return c
}

// release drops one reference and closes the connection with the last.
func (c *conn) release() error {
	c.mu.Lock()
	c.refs--
	last := c.refs == 0
	c.mu.Unlock()
	if last {
		return c.client.Close()
	}
	return nil
}

// adopt takes over prev's connections to the servers whose config is the
// same in both Sets, with their last list: they are reached at once and
// not dialed again (NewSet; s.mu held).
func (s *Set) adopt(prev *Set) {
	prev.mu.Lock()
	defer prev.mu.Unlock()
	for _, sv := range s.servers {
		old := prev.byName[sv.cfg.Name]
		if old == nil || old.conn == nil || !reflect.DeepEqual(old.cfg, sv.cfg) {
			continue
		}
		sv.conn = old.conn.hold(sv.relist)
		sv.ics, sv.skipped, sv.err, sv.listed = old.ics, old.skipped, old.err, old.listed
	}
}
