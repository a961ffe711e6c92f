package transports

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Reading and writing text/event-stream: sseReader parses the streams of
// the client transports; writeSSEEvent and writeMessageEvent write the
// events of the server transports.

// errSSETooLarge is wrapped by the errors of an sseReader that met a line or
// an event larger than its limit.
var errSSETooLarge = errors.New("server-sent event too large")

// sseBufSize is the size of the read buffer of an sseReader. A line longer
// than this is read in pieces.
const sseBufSize = 8 << 10

// maxSSERetry caps the reconnection time a server can set with "retry:".
const maxSSERetry = time.Hour

// sseEvent is one dispatched server-sent event.
type sseEvent struct {
	// name is the event type ("event:" field); empty means "message". It is
	// valid until the next call to next.
	name []byte
	// id is the stream's last event ID at dispatch. It is valid until the
	// next call to next.
	id []byte
	// data is the event's data (the "data:" lines joined with "\n"). It is
	// owned by the caller.
	data []byte
	// retry is the reconnection time set by a "retry:" field in this event's
	// block, when hasRetry is set.
	retry    time.Duration
	hasRetry bool
}

// sseReader parses a text/event-stream as the WHATWG HTML standard
// ("Server-sent events", "Interpreting an event stream") describes it.
//
// Lines may end with LF, CRLF or CR; a leading UTF-8 BOM is skipped; comment
// lines (starting with ':') and unknown fields are ignored. A line, and the
// data of an event, longer than the reader's limit fail the stream with an
// error wrapping errSSETooLarge.
type sseReader struct {
	br  *bufio.Reader
	max int // limit on a line and on an event's data; <= 0 is no limit

	started bool // the BOM check is done
	skipLF  bool // the last line ended with CR: a following LF belongs to it
	err     error

	// Event being built.
	name     []byte
	data     []byte
	hasData  bool
	retry    time.Duration // from this block, when hasRetry
	hasRetry bool

	// Stream state.
	lastID       []byte
	reconnect    time.Duration // last reconnection time set by the server
	hasReconnect bool
	scratch      []byte   // value of an "id:" or "retry:" line
	chunks       [][]byte // the pieces of a long data line, kept (longData)

	meter budgetMeter // charges the budget for what is read; see charge
}

// sseReaders recycles readers with their buffers: a stream per call is the
// common case.
var sseReaders = sync.Pool{New: func() any { return &sseReader{br: bufio.NewReaderSize(nil, sseBufSize)} }}

// newSSEReader returns a reader of the event stream r. maxEvent caps the
// length of one line and of one event's data; zero or less means no cap.
// Call release when done with it.
func newSSEReader(r io.Reader, maxEvent int) *sseReader {
	sr := sseReaders.Get().(*sseReader)
	sr.reset(r, maxEvent)
	return sr
}

// reset makes r a new reader of src, keeping its buffers.
func (r *sseReader) reset(src io.Reader, maxEvent int) {
	br := r.br
	br.Reset(src)
	*r = sseReader{br: br, max: maxEvent, chunks: r.chunks, name: r.name[:0], lastID: r.lastID[:0], scratch: r.scratch[:0],
		meter: budgetMeter{r: src}}
}

// release returns the reader to the pool; it must not be used afterwards.
func (r *sseReader) release() {
	r.reset(nil, 0)
	sseReaders.Put(r)
}

// charge makes r charge b (waiting at most a second, or until ctx ends)
// for every byte it reads from its source from now on; call it before the
// first next. A read that cannot be charged fails the stream with an error
// wrapping [ErrOverBudget]. takeCharge returns what was charged.
func (r *sseReader) charge(ctx context.Context, b *ByteBudget) {
	r.meter = budgetMeter{r: r.meter.r, b: b, ctx: ctx}
	r.br.Reset(&r.meter)
}

// takeCharge returns the bytes charged since the last call, all of them
// for the event just returned by next (and up to a buffer of read-ahead);
// the caller releases them.
func (r *sseReader) takeCharge() int64 { return r.meter.take() }

// lastEventID returns the stream's last event ID buffer, which "id:" fields
// set even in blocks that are not dispatched. It is valid until the next call
// to next.
func (r *sseReader) lastEventID() []byte { return r.lastID }

// reconnectTime returns the reconnection time last set by a "retry:" field,
// and whether one was set.
func (r *sseReader) reconnectTime() (time.Duration, bool) {
	return r.reconnect, r.hasReconnect
}

// next returns the next dispatched event. At the end of the stream it
// returns io.EOF; an incomplete last event is discarded, as the standard
// says. After an error, next keeps returning it.
func (r *sseReader) next() (sseEvent, error) {
	if r.err != nil {
		return sseEvent{}, r.err
	}
	ev, err := r.parse()
	if err != nil {
		r.err = err
	}
	return ev, err
}

func (r *sseReader) parse() (sseEvent, error) {
	for {
		line, eol, err := r.chunk(true)
		if err != nil {
			return sseEvent{}, err
		}
		if !r.started {
			r.started = true
			line = bytes.TrimPrefix(line, []byte("\uFEFF"))
		}
		if len(line) == 0 && eol {
			if ev, ok := r.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		} else if !eol {
			// A field name longer than the buffer is no field we know.
			field = nil
		}
		total := len(line)
		switch string(field) {
		case "data":
			if r.hasData {
				r.data = r.grow(r.data, 1)
				r.data = append(r.data, '\n')
			}
			r.hasData = true
			if r.data, err = r.rest(r.data, value, eol, total, keepData); err != nil {
				return sseEvent{}, err
			}
		case "event":
			if r.name, err = r.rest(r.name[:0], value, eol, total, keepValue); err != nil {
				return sseEvent{}, err
			}
		case "id":
			if r.scratch, err = r.rest(r.scratch[:0], value, eol, total, keepValue); err != nil {
				return sseEvent{}, err
			}
			if bytes.IndexByte(r.scratch, 0) < 0 {
				r.lastID = append(r.lastID[:0], r.scratch...)
			}
		case "retry":
			if r.scratch, err = r.rest(r.scratch[:0], value, eol, total, keepValue); err != nil {
				return sseEvent{}, err
			}
			if d, ok := parseRetry(r.scratch); ok {
				r.retry, r.hasRetry = d, true
				r.reconnect, r.hasReconnect = d, true
			}
		default:
			// Comments (empty field name) and unknown fields.
			if _, err = r.rest(nil, nil, eol, total, skipLine); err != nil {
				return sseEvent{}, err
			}
		}
	}
}

// dispatch ends the block at a blank line. It returns the event when the
// block had data; the event type and retry of the block are reset either way.
func (r *sseReader) dispatch() (sseEvent, bool) {
	ev := sseEvent{name: r.name, id: r.lastID, data: r.data, retry: r.retry, hasRetry: r.hasRetry}
	ok := r.hasData
	if ev.data == nil && ok {
		ev.data = []byte{}
	}
	r.name = r.name[:0]
	r.data, r.hasData = nil, false
	r.retry, r.hasRetry = 0, false
	return ev, ok
}

// What rest does with the pieces of a line.
const (
	skipLine  = iota // only check the line's length
	keepValue        // append to dst
	keepData         // append to dst, which is the event's data
)

// rest appends value and the remaining pieces of the current line to dst,
// as mode says. total is the length of the line read so far.
func (r *sseReader) rest(dst, value []byte, eol bool, total int, mode int) ([]byte, error) {
	if mode == keepData && !eol {
		return r.longData(dst, value, total)
	}
	piece := value
	for {
		if r.max > 0 && total > r.max {
			return dst, r.tooLarge("line")
		}
		if mode != skipLine {
			if mode == keepData && r.max > 0 && len(dst)+len(piece) > r.max {
				return dst, r.tooLarge("event")
			}
			dst = r.grow(dst, len(piece))
			dst = append(dst, piece...)
		}
		if eol {
			return dst, nil
		}
		var err error
		piece, eol, err = r.chunk(false)
		if err != nil {
			return dst, err
		}
		total += len(piece)
	}
}

// sseChunkSize is the size of the pieces a long data line is gathered in.
const sseChunkSize = 64 << 10

// maxKeptChunks is how many pieces (4 MiB) a reader keeps for the next
// long line, pooled with it.
const maxKeptChunks = 64

// longData appends a data line longer than the read buffer (its first piece
// value, the line's length so far total) to the event's data dst. The line
// is gathered in pieces the reader keeps for the next one, then copied
// once into dst, which grows once (to its exact size when it was empty):
// growing dst or one buffer as the pieces come would allocate and copy a
// 1 MiB line about four times over.
func (r *sseReader) longData(dst, value []byte, total int) ([]byte, error) {
	used := 0 // pieces of r.chunks in use; the last one may have room
	size := 0
	piece, eol := value, false
	for {
		if r.max > 0 && total > r.max {
			return dst, r.tooLarge("line")
		}
		size += len(piece)
		for len(piece) > 0 {
			if used == 0 || len(r.chunks[used-1]) == sseChunkSize {
				if used == len(r.chunks) {
					r.chunks = append(r.chunks, make([]byte, 0, sseChunkSize))
				}
				r.chunks[used] = r.chunks[used][:0]
				used++
			}
			c := &r.chunks[used-1]
			n := min(len(piece), sseChunkSize-len(*c))
			*c = append(*c, piece[:n]...)
			piece = piece[n:]
		}
		if eol {
			break
		}
		var err error
		if piece, eol, err = r.chunk(false); err != nil {
			return dst, err
		}
		total += len(piece)
	}
	if r.max > 0 && len(dst)+size > r.max {
		return dst, r.tooLarge("event")
	}
	dst = r.grow(dst, size)
	for _, c := range r.chunks[:used] {
		dst = append(dst, c...)
	}
	if len(r.chunks) > maxKeptChunks {
		r.chunks = nil
	}
	return dst, nil
}

func (r *sseReader) tooLarge(what string) error {
	return fmt.Errorf("reading event stream: %s longer than %d bytes: %w", what, r.max, errSSETooLarge)
}

// grow makes room for n more bytes in b: exactly n when b is empty,
// otherwise doubling its capacity so that long values cost few copies.
func (r *sseReader) grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	c := len(b) + n
	if len(b) > 0 {
		c = max(c, 2*cap(b))
		if r.max > 0 && c > r.max && len(b)+n <= r.max {
			c = r.max
		}
	}
	nb := make([]byte, len(b), c)
	copy(nb, b)
	return nb
}

// chunk returns the next piece of the current line, without its line
// ending, and whether the piece ends the line. The piece is valid until the
// next read. When first is set (a line starts), the piece is the whole line
// or at least a full buffer, so that the field name is always in it.
func (r *sseReader) chunk(first bool) ([]byte, bool, error) {
	scanned := 0
	n := r.br.Buffered()
	for {
		if n == 0 {
			n = 1
		}
		b, err := r.br.Peek(n)
		if r.skipLF && len(b) > 0 {
			r.skipLF = false
			if b[0] == '\n' {
				r.br.Discard(1)
				n = r.br.Buffered()
				continue
			}
		}
		if i := indexEOL(b[scanned:]); i >= 0 {
			i += scanned
			if b[i] == '\r' {
				if i+1 < len(b) {
					if b[i+1] == '\n' {
						r.br.Discard(i + 2)
						return b[:i], true, nil
					}
				} else {
					r.skipLF = true
				}
			}
			r.br.Discard(i + 1)
			return b[:i], true, nil
		}
		if len(b) > 0 && (!first || len(b) >= r.br.Size()) {
			r.br.Discard(len(b))
			return b, false, nil
		}
		if err != nil {
			if err == io.EOF {
				return nil, false, io.EOF
			}
			return nil, false, fmt.Errorf("reading event stream: %w", err)
		}
		scanned = len(b)
		n = len(b) + 1
	}
}

// indexEOL returns the index of the first CR or LF in b, or -1.
func indexEOL(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	end := b
	if i >= 0 {
		end = b[:i]
	}
	if j := bytes.IndexByte(end, '\r'); j >= 0 {
		return j
	}
	return i
}

// parseRetry parses the value of a "retry:" field: ASCII digits only, in
// milliseconds.
func parseRetry(v []byte) (time.Duration, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var ms int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		if ms < int64(maxSSERetry/time.Millisecond) {
			ms = ms*10 + int64(c-'0')
		}
	}
	return min(time.Duration(ms)*time.Millisecond, maxSSERetry), true
}

var sseWriteBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// writeSSEEvent writes one event with a single Write call: an "event:" line
// when name is set, an "id:" line when id is set, and the data as "data:"
// lines (one per line of data, so LF, CRLF and CR in data read back as LF).
// Empty data is sent as one empty data line. name and id must not contain
// line breaks, nor id a NUL, as the stream could not carry them.
func writeSSEEvent(w io.Writer, name, id string, data []byte) error {
	if strings.ContainsAny(name, "\r\n") {
		return fmt.Errorf("writing event: name %q contains a line break", name)
	}
	if strings.ContainsAny(id, "\r\n\x00") {
		return fmt.Errorf("writing event: id %q contains a line break or NUL", id)
	}
	bp := sseWriteBufs.Get().(*[]byte)
	b := (*bp)[:0]
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	for {
		i := indexEOL(data)
		b = append(b, "data: "...)
		if i < 0 {
			b = append(b, data...)
			b = append(b, '\n')
			break
		}
		b = append(b, data[:i]...)
		b = append(b, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	b = append(b, '\n')
	_, err := w.Write(b)
	if cap(b) <= 1<<20 {
		*bp = b
		sseWriteBufs.Put(bp)
	}
	if err != nil {
		return fmt.Errorf("writing event: %w", err)
	}
	return nil
}

var (
	sseMessageStart = []byte("event: message\ndata: ")
	sseDataCont     = []byte("\ndata: ")
	sseEventEnd     = []byte("\n\n")
)

// writeMessageEvent writes data as one SSE "message" event; line breaks in data
// (legal JSON whitespace) continue on further data lines.
func writeMessageEvent(w io.Writer, data []byte) error {
	if _, err := w.Write(sseMessageStart); err != nil {
		return err
	}
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			break
		}
		if _, err := w.Write(data[:i]); err != nil {
			return err
		}
		j := i + 1
		if data[i] == '\r' && j < len(data) && data[j] == '\n' {
			j++
		}
		data = data[j:]
		if _, err := w.Write(sseDataCont); err != nil {
			return err
		}
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	_, err := w.Write(sseEventEnd)
	return err
}
