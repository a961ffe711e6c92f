package transports

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

// WebSocket is in no MCP specification revision. The framing used here is
// the de-facto one of the TypeScript and Python SDKs (and of the SEP-1288
// draft): the subprotocol "mcp", one JSON-RPC message per text frame. A
// binary frame closes the connection with status 1003 (unsupported data).

const (
	wsSubprotocol = "mcp"
	// wsDefaultMaxMessage is the default read limit of one message.
	wsDefaultMaxMessage = 64 << 20
	// wsDefaultPing is the default keepalive interval.
	wsDefaultPing = 30 * time.Second
	// wsWriteTimeout bounds one message write; a peer that does not take a
	// message for this long has its connection closed.
	wsWriteTimeout = 30 * time.Second
	// wsCloseTimeout bounds the close handshake of Close, after which the
	// socket is closed without waiting for the peer.
	wsCloseTimeout = 2 * time.Second
	// wsIncomingQueue is the capacity of the queue between the read loop
	// and Read.
	wsIncomingQueue = 16
	// wsReadBufStart is the initial capacity of a connection's read buffer;
	// wsReadBufKeep is the largest read buffer a connection keeps between
	// messages.
	wsReadBufStart = 4 << 10
	wsReadBufKeep  = 1 << 20
	// wsWriteBufKeep is the largest encode buffer a connection keeps between
	// writes.
	wsWriteBufKeep = 1 << 20
)

// errWSBinary is wrapped by the Read error of a connection whose peer sent
// a binary frame.
var errWSBinary = errors.New("binary WebSocket frames are not supported")

// wsEpoch is the origin of the monotonic times stored in atomics.
var wsEpoch = time.Now()

func wsNow() int64 { return int64(time.Since(wsEpoch)) }

// wsConn is the Connection of both WebSocket transports.
type wsConn struct {
	peer   any // who opened it (server side); see Peer
	ws     *websocket.Conn
	log    *slog.Logger
	client bool
	id     string
	maxMsg int64
	// budget is charged for each incoming message from its first byte
	// until Read returns it (client connections; nil on the server side).
	budget *ByteBudget
	held   heldBytes // the charge of the message Read returned last

	// ctx is passed to every coder/websocket call made on behalf of the
	// connection; cancelling it closes the socket at once (coder/websocket
	// closes the connection when the context of a pending read or write
	// ends).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the client's read loop and the ping loop

	in     chan queued // messages for Read, with their charge of the budget
	ending             // why and when the connection ended

	closeOnce sync.Once

	lastRead   atomic.Int64 // wsNow of the last message start or end
	delivering atomic.Bool  // the read loop waits for Read to take a message
	rbuf       []byte       // read loop only

	wmu       sync.Mutex
	wbuf      []byte
	wdeadline atomic.Int64 // wsNow deadline of the write in progress, 0 if none
	wtimer    *time.Timer

	// The message read watchdog (server connections with a message read
	// timeout): a message must be received whole within rtimeout of its
	// first frame.
	rtimeout  time.Duration
	rdeadline atomic.Int64 // wsNow deadline of the message being read, 0 if none
	rtimer    *time.Timer
}

func newWSConn(ws *websocket.Conn, log *slog.Logger, client bool, id string, maxMsg int64, ping time.Duration) *wsConn {
	if maxMsg <= 0 {
		maxMsg = wsDefaultMaxMessage
	}
	if ping == 0 {
		ping = wsDefaultPing
	}
	ws.SetReadLimit(maxMsg)
	c := &wsConn{
		ws:     ws,
		log:    log,
		client: client,
		id:     id,
		maxMsg: maxMsg,
		in:     make(chan queued, wsIncomingQueue),
	}
	c.ending.init()
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.lastRead.Store(wsNow())
	c.wtimer = time.AfterFunc(time.Hour, c.writeWatchdog)
	c.wtimer.Stop()
	if ping > 0 {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.pingLoop(ping)
		}()
	}
	return c
}

// SessionID returns a random id for server connections (for logs; MCP over
// WebSocket has no session header) and "" for client connections.
func (c *wsConn) SessionID() string { return c.id }

// Read returns the next message from the peer, in order. After the peer
// closed the connection normally it returns io.EOF; after Close it returns
// [ErrClosed]; after a failure, an error describing it.
func (c *wsConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	c.held.release(c.budget)
	for {
		select {
		case <-c.done:
			if c.err == ErrClosed {
				return nil, ErrClosed
			}
			// Messages that arrived before the peer went away come first.
			select {
			case q := <-c.in:
				c.held.hold(c.budget, q.charge)
				return q.msg, nil
			default:
				return nil, c.err
			}
		default:
		}
		select {
		case q := <-c.in:
			c.held.hold(c.budget, q.charge)
			return q.msg, nil
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Write sends msg as one text frame. Writes are serialized; ctx is not used
// for the write itself (its expiry would close the WebSocket): a write that
// the peer does not take within 30 s closes the connection instead.
func (c *wsConn) Write(_ context.Context, msg jsonrpc.Message) error {
	select {
	case <-c.done:
		return c.closedErr()
	default:
	}
	c.wmu.Lock()
	b, err := wire.Append(c.wbuf[:0], msg)
	if err != nil {
		c.wmu.Unlock()
		return fmt.Errorf("writing to WebSocket: encoding message: %w", err)
	}
	err = c.writeLocked(b)
	if cap(b) <= wsWriteBufKeep {
		c.wbuf = b[:0]
	} else {
		c.wbuf = nil
	}
	c.wmu.Unlock()
	if err != nil {
		select {
		case <-c.done:
			return c.closedErr()
		default:
		}
		c.fail(fmt.Errorf("writing to WebSocket: %w", err))
		return fmt.Errorf("writing to WebSocket: %w", err)
	}
	return nil
}

// closedErr is the error of a Write on an ended connection: it wraps
// [ErrClosed] and, when the connection failed or the peer closed it, why.
func (c *wsConn) closedErr() error {
	if c.err == ErrClosed {
		return fmt.Errorf("writing to WebSocket: %w", ErrClosed)
	}
	return fmt.Errorf("writing to WebSocket: %w: %w", ErrClosed, c.err)
}

// writeLocked writes one text message under wmu, guarded by the write
// watchdog.
func (c *wsConn) writeLocked(b []byte) error {
	c.wdeadline.Store(wsNow() + int64(wsWriteTimeout))
	c.wtimer.Reset(wsWriteTimeout)
	err := c.ws.Write(c.ctx, websocket.MessageText, b)
	c.wdeadline.Store(0)
	c.wtimer.Stop()
	return err
}

// writeWatchdog runs on the write timer: it closes the connection when a
// write has been blocked past its deadline.
func (c *wsConn) writeWatchdog() {
	d := c.wdeadline.Load()
	if d == 0 {
		return
	}
	if rem := d - wsNow(); rem > 0 {
		c.wtimer.Reset(time.Duration(rem))
		return
	}
	c.log.Warn("WebSocket peer did not take a message: closing the connection", "timeout", wsWriteTimeout)
	c.fail(fmt.Errorf("writing to WebSocket: the peer did not take a message within %v", wsWriteTimeout))
}

// Close closes the connection with status 1000 (normal closure). It waits
// at most a few seconds for the peer to complete the close handshake, and
// for the connection's goroutines to end. Read returns [ErrClosed].
func (c *wsConn) Close() error {
	c.closeWith(websocket.StatusNormalClosure, "")
	return nil
}

func (c *wsConn) closeWith(code websocket.StatusCode, reason string) {
	c.closeOnce.Do(func() {
		c.end(ErrClosed, nil)
		// The read loop keeps reading (and discarding) until the peer's
		// close frame arrives; if it does not arrive in time, cancelling
		// ctx closes the socket under the pending read.
		t := time.AfterFunc(wsCloseTimeout, c.cancel)
		_ = c.ws.Close(code, reason)
		t.Stop()
		c.cancel()
		c.wg.Wait()
		c.wtimer.Stop()
		if c.rtimer != nil {
			c.rtimer.Stop()
		}
		c.dropQueued()
		c.held.close(c.budget)
	})
}

// dropQueued drops the messages no Read will return, after Close,
// releasing their bytes of the budget.
func (c *wsConn) dropQueued() {
	for {
		select {
		case q := <-c.in:
			c.budget.Release(q.charge)
		default:
			return
		}
	}
}

// fail ends the connection after an error and closes the socket at once.
func (c *wsConn) fail(err error) {
	c.end(err, nil)
	c.cancel()
}

// readLoop reads messages until the socket fails or closes. It runs on its
// own goroutine for client connections and in the HTTP handler for server
// connections.
func (c *wsConn) readLoop() {
	defer func() {
		// The socket must not outlive the loop (e.g. after a close frame
		// was sent but not answered).
		c.cancel()
		_ = c.ws.CloseNow()
		if c.ended() && c.err == ErrClosed {
			c.dropQueued() // what was queued after Close took its share
		}
	}()
	for {
		typ, r, err := c.ws.Reader(c.ctx)
		if err != nil {
			c.end(c.readErr(err), nil)
			return
		}
		c.lastRead.Store(wsNow())
		if typ != websocket.MessageText {
			c.log.Warn("WebSocket peer sent a binary frame: closing the connection with status 1003")
			c.end(fmt.Errorf("reading from WebSocket: %w", errWSBinary), nil)
			t := time.AfterFunc(wsCloseTimeout, c.cancel)
			_ = c.ws.Close(websocket.StatusUnsupportedData, "binary frames are not supported; send JSON-RPC messages as text")
			t.Stop()
			return
		}
		c.startMessage()
		data, charge, dropped, err := c.readMessage(r)
		c.endMessage()
		c.lastRead.Store(wsNow())
		if err != nil {
			c.end(c.readErr(err), nil)
			return
		}
		switch {
		case dropped != nil:
			c.dropOverBudget(dropped)
		case c.ended():
			c.budget.Release(charge) // closing: drain until the peer's close frame
		default:
			msg, _, code, reason := decodeMessage(data)
			if msg == nil {
				c.budget.Release(charge)
				c.badMessage(data, code, reason)
				continue
			}
			c.deliver(msg, charge)
		}
	}
}

// setMessageTimeout makes the read loop fail the connection when a
// message is not received whole within d of its first frame (d > 0). It
// is called before the read loop starts.
func (c *wsConn) setMessageTimeout(d time.Duration) {
	if d <= 0 {
		return
	}
	c.rtimeout = d
	c.rtimer = time.AfterFunc(time.Hour, c.readWatchdog)
	c.rtimer.Stop()
}

// startMessage arms the message read watchdog, if any.
func (c *wsConn) startMessage() {
	if c.rtimer != nil {
		c.rdeadline.Store(wsNow() + int64(c.rtimeout))
		c.rtimer.Reset(c.rtimeout)
	}
}

// endMessage disarms the message read watchdog, if any.
func (c *wsConn) endMessage() {
	if c.rtimer != nil {
		c.rdeadline.Store(0)
		c.rtimer.Stop()
	}
}

// readWatchdog runs on the read timer: it fails the connection when a
// message has been in reading past its deadline.
func (c *wsConn) readWatchdog() {
	d := c.rdeadline.Load()
	if d == 0 {
		return
	}
	if rem := d - wsNow(); rem > 0 {
		c.rtimer.Reset(time.Duration(rem))
		return
	}
	c.log.Warn("WebSocket peer did not send a whole message in time: closing the connection", "timeout", c.rtimeout)
	c.fail(fmt.Errorf("reading from WebSocket: a message was not received within %v", c.rtimeout))
}

// deliver hands msg, which holds charge bytes of the budget, to Read.
func (c *wsConn) deliver(msg jsonrpc.Message, charge int64) {
	c.delivering.Store(true)
	select {
	case c.in <- queued{msg, charge}:
	case <-c.done:
		c.budget.Release(charge)
	}
	c.delivering.Store(false)
}

// dropOverBudget handles a message dropped because it could not get its
// bytes of the budget: a response is replaced by a local error response.
func (c *wsConn) dropOverBudget(d *droppedMessage) {
	resp, ok := d.answer(c.budget)
	c.log.Warn("dropped a WebSocket message over the in-flight budget", "budget", c.budget.Max(), "answered", ok)
	if ok && !c.ended() {
		c.deliver(resp, 0)
	}
}

// readMessage reads one message into the connection's read buffer and
// returns an exactly sized copy, which decoded messages may alias, and the
// bytes of the budget it holds (its length). A message that cannot get its
// bytes is read on without being kept: then data is nil and dropped has
// followed it.
func (c *wsConn) readMessage(r io.Reader) (data []byte, charge int64, dropped *droppedMessage, err error) {
	buf := c.rbuf[:0]
	if cap(buf) == 0 {
		buf = make([]byte, 0, wsReadBufStart)
	}
	defer func() {
		if cap(buf) <= wsReadBufKeep {
			c.rbuf = buf[:0]
		} else {
			c.rbuf = nil
		}
	}()
	for {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), 2*cap(buf))
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if n > 0 && c.budget != nil && c.budget.acquireWithin(c.ctx, int64(n)) != nil {
			c.budget.Release(charge)
			dropped = new(droppedMessage)
			dropped.feed(buf)
			return nil, 0, dropped, discardInto(dropped, r, buf[:cap(buf)], err)
		}
		charge += int64(n) // released by nobody without a budget
		if err == io.EOF {
			break
		}
		if err != nil {
			c.budget.Release(charge)
			return nil, 0, nil, err
		}
	}
	out := make([]byte, len(buf))
	copy(out, buf)
	return out, charge, nil, nil
}

// badMessage handles a text frame that is not a JSON-RPC message: a server
// answers it with a JSON-RPC error (id null), a client drops it.
func (c *wsConn) badMessage(data []byte, code int64, reason string) {
	if c.client {
		c.log.Warn("dropping invalid message from WebSocket server", "error", reason, "message", snippet(data))
		return
	}
	c.log.Debug("invalid message from WebSocket client", "error", reason, "message", snippet(data))
	resp := &jsonrpc.Response{Error: &jsonrpc.Error{Code: code, Message: reason}}
	c.wmu.Lock()
	b, err := wire.Append(c.wbuf[:0], resp)
	if err == nil {
		err = c.writeLocked(b)
		c.wbuf = b[:0]
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("writing to WebSocket: %w", err))
	}
}

// readErr translates the error that ended the read loop into the error
// Read returns.
func (c *wsConn) readErr(err error) error {
	switch websocket.CloseStatus(err) {
	case websocket.StatusNormalClosure, websocket.StatusGoingAway:
		return io.EOF
	case -1:
		if errors.Is(err, websocket.ErrMessageTooBig) {
			return fmt.Errorf("reading from WebSocket: message larger than %d bytes: %w", c.maxMsg, err)
		}
		return fmt.Errorf("reading from WebSocket: %w", err)
	default:
		return fmt.Errorf("reading from WebSocket: peer closed the connection: %w", err)
	}
}

// pingLoop sends a ping whenever nothing was received for a whole interval
// (and the read loop is not waiting on a slow reader), and fails the
// connection when no pong comes back within the interval.
func (c *wsConn) pingLoop(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		if c.delivering.Load() || wsNow()-c.lastRead.Load() < int64(interval) {
			continue
		}
		ctx, cancel := context.WithTimeout(c.ctx, interval)
		err := c.ws.Ping(ctx)
		cancel()
		if err != nil {
			if c.ended() {
				return
			}
			c.log.Warn("WebSocket peer did not answer a keepalive ping: closing the connection", "error", err)
			c.fail(fmt.Errorf("WebSocket keepalive: no pong within %v: %w", interval, err))
			return
		}
		c.lastRead.Store(wsNow())
	}
}

// PeerInfo returns who opened the connection (see Peer).
func (c *wsConn) PeerInfo() any { return c.peer }
