package transports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ErrOverBudget is wrapped by the errors of a [ByteBudget] that cannot
// grant bytes, and by the failures of messages that could not get them.
var ErrOverBudget = errors.New("in-flight byte budget exhausted")

// budgetWait bounds how long a reader waits for bytes of the budget before
// it fails the message it is reading.
const budgetWait = time.Second

// ByteBudget bounds the bytes of upstream messages held in memory at once,
// across every client connection that shares it (the Budget field of the
// client transports): a reader charges a message's bytes while it reads
// and buffers them, and they are released when the decoded message is
// returned by Read. A message that cannot get its bytes in time is dropped
// without being buffered further, and the call it answers gets a local
// error response (see [IsLocal]) saying so.
//
// What is not counted, and is the margin above the budget: decoded
// messages returned by Read and not yet written downstream (a decoded
// message is about as large as its bytes), the fixed read buffers of each
// connection (8 KiB per event stream; 64 KiB per stdio child and the
// buffer of its last long line, up to 1 MiB; the WebSocket read buffer
// kept between messages, up to 1 MiB, and the library's own), the
// transient copy of a message between its read buffer and its exact-size
// buffer, and up to one read buffer of read-ahead per event stream.
//
// A ByteBudget is safe for concurrent use and lives as long as any
// connection uses it; its methods do not allocate, except Acquire when it
// has to wait. Waiters are woken when bytes are released, with no
// ordering among them: a large request may wait while smaller ones are
// granted. The nil *ByteBudget is the unlimited budget: it grants every
// request and counts nothing.
type ByteBudget struct {
	max     int64
	used    atomic.Int64
	waiters atomic.Int32

	mu   sync.Mutex
	wake chan struct{} // closed and replaced when bytes are released; nil when nobody waits
}

// NewByteBudget returns a budget of max bytes; max <= 0 returns nil, the
// unlimited budget.
func NewByteBudget(max int64) *ByteBudget {
	if max <= 0 {
		return nil
	}
	return &ByteBudget{max: max}
}

// Max returns the size of the budget, 0 for the unlimited one.
func (b *ByteBudget) Max() int64 {
	if b == nil {
		return 0
	}
	return b.max
}

// InUse returns the bytes currently granted and not released.
func (b *ByteBudget) InUse() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// TryAcquire grants n bytes when they are available now and reports
// whether it did. n <= 0 is always granted.
func (b *ByteBudget) TryAcquire(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	for {
		used := b.used.Load()
		if used+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// Acquire grants n bytes, waiting for releases until ctx ends. It fails
// at once, with an error wrapping [ErrOverBudget], when n exceeds the whole
// budget, and with one wrapping both ErrOverBudget and ctx's error when ctx
// ends first.
func (b *ByteBudget) Acquire(ctx context.Context, n int64) error {
	if b.TryAcquire(n) {
		return nil
	}
	if n > b.max {
		return b.overErr(n, nil)
	}
	b.waiters.Add(1)
	defer b.waiters.Add(-1)
	for {
		b.mu.Lock()
		if b.wake == nil {
			b.wake = make(chan struct{})
		}
		wake := b.wake
		b.mu.Unlock()
		// A release between the failed try and taking wake is seen here;
		// one after it closes wake.
		if b.TryAcquire(n) {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return b.overErr(n, ctx.Err())
		}
	}
}

func (b *ByteBudget) overErr(n int64, cause error) error {
	if cause != nil {
		return fmt.Errorf("%w: %d bytes wanted, %d of %d in use: %w", ErrOverBudget, n, b.used.Load(), b.max, cause)
	}
	return fmt.Errorf("%w: %d bytes wanted, more than the budget of %d", ErrOverBudget, n, b.max)
}

// Release gives back n bytes granted earlier and wakes the waiters.
// Releasing more than was granted is a bug; it panics when the count
// would go negative.
func (b *ByteBudget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	if b.used.Add(-n) < 0 {
		panic("transports: ByteBudget released more than it granted")
	}
	if b.waiters.Load() == 0 {
		return
	}
	b.mu.Lock()
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
	b.mu.Unlock()
}

// acquireWithin is Acquire bounded by budgetWait as well as by ctx; it does
// not allocate when the bytes are available.
func (b *ByteBudget) acquireWithin(ctx context.Context, n int64) error {
	if b.TryAcquire(n) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, budgetWait)
	defer cancel()
	return b.Acquire(ctx, n)
}

// budgetErrorText is the message of the local error response to a call
// whose answer could not get its bytes.
func budgetErrorText(b *ByteBudget) string {
	return fmt.Sprintf("upstream response exceeds the gateway's in-flight budget of %d bytes", b.Max())
}

// errTooLarge is returned by readAllCharged for a body over its limit.
var errTooLarge = errors.New("message too large")

// readAllCharged reads r to its end, at most max bytes (errTooLarge
// beyond), charging b for the capacity of its buffer before it grows into
// it. It returns the body and the bytes charged; on failure it has
// released them. With a nil b it is io.ReadAll with a limit.
func readAllCharged(ctx context.Context, r io.Reader, max int, b *ByteBudget) ([]byte, int64, error) {
	buf := make([]byte, 0, 512)
	charged := int64(0)
	fail := func(err error) ([]byte, int64, error) {
		b.Release(charged)
		return nil, 0, err
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		if c := int64(cap(buf)); c > charged && b != nil {
			if err := b.acquireWithin(ctx, c-charged); err != nil {
				return fail(err)
			}
			charged = c
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > max {
			return fail(errTooLarge)
		}
		if err == io.EOF {
			return buf, charged, nil
		}
		if err != nil {
			return fail(err)
		}
	}
}

// budgetMeter charges a budget for the bytes read through it, once they
// have been read into the (fixed) buffer of the reader above it and before
// that reader copies them into a growing message; the charge accumulates
// until taken. A meter that cannot charge fails the read with an error
// wrapping [ErrOverBudget]. It is used by one goroutine at a time.
type budgetMeter struct {
	r       io.Reader
	b       *ByteBudget
	ctx     context.Context
	charged int64
}

func (m *budgetMeter) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if n > 0 {
		if berr := m.b.acquireWithin(m.ctx, int64(n)); berr != nil {
			return 0, berr
		}
		m.charged += int64(n)
	}
	return n, err
}

// take returns the bytes charged since the last take; the caller releases
// them.
func (m *budgetMeter) take() int64 {
	c := m.charged
	m.charged = 0
	return c
}

// droppedMessage follows the bytes of a message that is dropped over the
// budget, which are fed to it instead of being kept, and finds the
// message's top-level "id" and whether it has a "method": a dropped
// response (an id and no method) is answered with a local error, so that
// its call does not wait forever. It keeps at most a few dozen bytes.
type droppedMessage struct {
	depth     int
	inStr     bool
	esc       bool
	expectKey bool   // at depth 1, the next string is a key
	inKey     bool   // reading a key at depth 1
	key       []byte // the key being read (its first bytes)
	value     int    // what the value at depth 1 being read belongs to
	capturing bool
	id        []byte // the raw id
	idDone    bool
	hasMethod bool
}

const (
	dropValueOther = iota
	dropValueID
	dropValueMethod
)

// maxDroppedID bounds the captured id; a longer one is not answered.
const maxDroppedID = 256

// feed follows the next bytes of the message.
func (d *droppedMessage) feed(p []byte) {
	for _, c := range p {
		if d.inStr {
			d.feedString(c)
			continue
		}
		switch c {
		case '"':
			d.inStr = true
			if d.depth == 1 && d.expectKey {
				d.inKey, d.expectKey, d.key = true, false, d.key[:0]
			} else {
				d.startValue(c)
			}
		case '{', '[':
			d.depth++
			d.expectKey = d.depth == 1 && c == '{'
		case '}', ']', ',':
			if d.depth == 1 {
				d.endValue()
				d.expectKey = c == ','
			}
			if c != ',' {
				d.depth--
			}
		case ':':
			if d.depth == 1 {
				d.value = dropValueOther
				switch string(d.key) {
				case "id":
					d.value = dropValueID
				case "method":
					d.value, d.hasMethod = dropValueMethod, true
				}
			}
		case ' ', '\t', '\r', '\n':
			if d.depth == 1 && d.capturing {
				d.endValue()
			}
		default:
			d.startValue(c)
		}
	}
}

func (d *droppedMessage) feedString(c byte) {
	switch {
	case d.inKey && len(d.key) < 8:
		d.key = append(d.key, c)
	case d.capturing:
		d.capture(c)
	}
	switch {
	case d.esc:
		d.esc = false
	case c == '\\':
		d.esc = true
	case c == '"':
		d.inStr = false
		if d.inKey {
			d.inKey = false
			d.key = d.key[:len(d.key)-min(len(d.key), 1)] // the closing quote
		} else if d.capturing {
			d.endValue()
		}
	}
}

// startValue notes a byte of a scalar value at depth 1.
func (d *droppedMessage) startValue(c byte) {
	if d.depth != 1 || d.value != dropValueID || d.idDone {
		return
	}
	d.capturing = true
	d.capture(c)
}

func (d *droppedMessage) capture(c byte) {
	if len(d.id) <= maxDroppedID {
		d.id = append(d.id, c)
	}
}

// endValue ends the value at depth 1 being read.
func (d *droppedMessage) endValue() {
	if d.capturing {
		d.capturing, d.idDone = false, true
	}
	d.value = dropValueOther
}

// answer returns the local error response for the dropped message when it
// was a response (a valid id and no method).
func (d *droppedMessage) answer(b *ByteBudget) (*jsonrpc.Response, bool) {
	if d.hasMethod || !d.idDone || len(d.id) > maxDroppedID {
		return nil, false
	}
	var raw any
	if json.Unmarshal(d.id, &raw) != nil {
		return nil, false
	}
	id, err := jsonrpc.MakeID(raw)
	if err != nil || !id.IsValid() {
		return nil, false
	}
	return errorResponse(id, budgetErrorText(b)), true
}

// discardInto feeds the rest of r to d, reading into scratch, until r
// ends; err is the error of the last read from r (io.EOF: it has ended).
func discardInto(d *droppedMessage, r io.Reader, scratch []byte, err error) error {
	for err == nil {
		var n int
		n, err = r.Read(scratch)
		d.feed(scratch[:n])
	}
	if err == io.EOF {
		return nil
	}
	return err
}

// chanContext is a context without deadline or values that is cancelled
// when its channel is closed; making one does not allocate.
type chanContext <-chan struct{}

func (c chanContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c chanContext) Done() <-chan struct{}       { return c }
func (c chanContext) Value(any) any               { return nil }

func (c chanContext) Err() error {
	select {
	case <-c:
		return context.Canceled
	default:
		return nil
	}
}

// heldBytes is the budget charge of the message a connection's Read
// returned last. The caller relays that message (decodes it, writes it to
// its client) before it calls Read again, so its bytes stay charged until
// then: the budget counts the messages being relayed, not only those being
// read. Close gives the charge back for good. Safe for concurrent use
// (Read and Close).
type heldBytes struct {
	mu     sync.Mutex
	n      int64
	closed bool
}

// release gives back the charge of the message returned last; Read calls
// it first.
func (h *heldBytes) release(b *ByteBudget) {
	h.mu.Lock()
	n := h.n
	h.n = 0
	h.mu.Unlock()
	b.Release(n)
}

// hold keeps n bytes charged until the next release (at once after close).
func (h *heldBytes) hold(b *ByteBudget, n int64) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		b.Release(n)
		return
	}
	h.n += n
	h.mu.Unlock()
}

// close gives the charge back and makes later holds give theirs at once.
func (h *heldBytes) close(b *ByteBudget) {
	h.mu.Lock()
	h.closed = true
	n := h.n
	h.n = 0
	h.mu.Unlock()
	b.Release(n)
}
