package transports

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// sseTestEvent is an sseEvent with owned strings, for comparisons.
type sseTestEvent struct {
	Name, ID, Data string
	Retry          time.Duration
	HasRetry       bool
}

func (e sseTestEvent) String() string {
	return fmt.Sprintf("{name=%q id=%q data=%q retry=%v/%v}", e.Name, e.ID, e.Data, e.Retry, e.HasRetry)
}

// sseReadAll parses r to the end and returns the events and the final
// error (nil at a clean end of stream).
func sseReadAll(r io.Reader, max int) ([]sseTestEvent, error) {
	sr := newSSEReader(r, max)
	defer sr.release()
	var out []sseTestEvent
	for {
		ev, err := sr.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, sseTestEvent{string(ev.name), string(ev.id), string(ev.data), ev.retry, ev.hasRetry})
	}
}

func TestSSEReader(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 3*sseBufSize+17)
	tests := []struct {
		name  string
		in    string
		max   int
		want  []sseTestEvent
		isErr error // error wrapped by the final error, if any
	}{
		{name: "empty", in: ""},
		{name: "single", in: "data: hello\n\n", want: []sseTestEvent{{Data: "hello"}}},
		{name: "no space", in: "data:hello\n\n", want: []sseTestEvent{{Data: "hello"}}},
		{name: "only one space stripped", in: "data:  two\n\n", want: []sseTestEvent{{Data: " two"}}},
		{name: "multi-line data", in: "data: a\ndata: b\ndata:\n\n", want: []sseTestEvent{{Data: "a\nb\n"}}},
		{name: "named event with id", in: "event: message\nid: 7\ndata: {}\n\n", want: []sseTestEvent{{Name: "message", ID: "7", Data: "{}"}}},
		{name: "CRLF", in: "event: x\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n", want: []sseTestEvent{{Name: "x", Data: "1"}, {Data: "2"}}},
		{name: "CR", in: "event: x\rdata: 1\r\rdata: 2\r\r", want: []sseTestEvent{{Name: "x", Data: "1"}, {Data: "2"}}},
		{name: "mixed endings", in: "data: a\r\ndata: b\rdata: c\n\r\n", want: []sseTestEvent{{Data: "a\nb\nc"}}},
		{name: "BOM", in: "\uFEFFdata: x\n\n", want: []sseTestEvent{{Data: "x"}}},
		{name: "BOM only at start", in: "data: x\n\n\uFEFFdata: y\n\n", want: []sseTestEvent{{Data: "x"}}},
		{name: "comments and keepalives", in: ": ok\n\n:ping\ndata: a\n: mid\n\n", want: []sseTestEvent{{Data: "a"}}},
		{name: "unknown field ignored", in: "foo: bar\ndata: a\n\n", want: []sseTestEvent{{Data: "a"}}},
		{name: "field without colon", in: "data\ndata\n\n", want: []sseTestEvent{{Data: "\n"}}},
		{name: "empty data dispatched", in: "data:\n\n", want: []sseTestEvent{{Data: ""}}},
		{name: "no data not dispatched", in: "event: prime\nid: p1\n\ndata: a\n\n", want: []sseTestEvent{{ID: "p1", Data: "a"}}},
		{name: "event type reset by blank line", in: "event: x\n\ndata: a\n\n", want: []sseTestEvent{{Data: "a"}}},
		{name: "id persists", in: "id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n", want: []sseTestEvent{{ID: "1", Data: "a"}, {ID: "1", Data: "b"}, {Data: "c"}}},
		{name: "id with NUL ignored", in: "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", want: []sseTestEvent{{ID: "1", Data: "a"}, {ID: "1", Data: "b"}}},
		{name: "retry", in: "retry: 1500\ndata: a\n\n", want: []sseTestEvent{{Data: "a", Retry: 1500 * time.Millisecond, HasRetry: true}}},
		{name: "retry not digits", in: "retry: 15s\ndata: a\n\nretry:\ndata: b\n\nretry: -1\ndata: c\n\n", want: []sseTestEvent{{Data: "a"}, {Data: "b"}, {Data: "c"}}},
		{name: "retry huge capped", in: "retry: 99999999999999999999999\ndata: a\n\n", want: []sseTestEvent{{Data: "a", Retry: maxSSERetry, HasRetry: true}}},
		{name: "incomplete event discarded", in: "data: a\n\ndata: b\n", want: []sseTestEvent{{Data: "a"}}},
		{name: "incomplete line discarded", in: "data: a\n\ndata: b", want: []sseTestEvent{{Data: "a"}}},
		{name: "long data line", in: "data: " + long + "\n\n", want: []sseTestEvent{{Data: long}}},
		{name: "long multi-line data", in: "data: " + long + "\ndata: " + long + "\n\n", want: []sseTestEvent{{Data: long + "\n" + long}}},
		{name: "long comment skipped", in: ":" + long + "\ndata: a\n\n", want: []sseTestEvent{{Data: "a"}}},
		{name: "long unknown field", in: long + ": v\ndata: a\n\n", want: []sseTestEvent{{Data: "a"}}},
		{name: "long id", in: "id: " + long + "\ndata: a\n\n", want: []sseTestEvent{{ID: long, Data: "a"}}},
		{name: "line at limit", in: "data: 12345\n\n", max: 11, want: []sseTestEvent{{Data: "12345"}}},
		{name: "line over limit", in: "data: 123456\n\n", max: 11, isErr: errSSETooLarge},
		{name: "comment over limit", in: ":" + long + "\n\n", max: 1000, isErr: errSSETooLarge},
		{name: "event over limit", in: "data: 1234\ndata: 1234\ndata: 1234\n\n", max: 12, isErr: errSSETooLarge},
		{name: "long line over limit", in: "data: " + long + "\n\n", max: sseBufSize, isErr: errSSETooLarge},
	}
	readers := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"one byte", iotest.OneByteReader},
		{"half", iotest.HalfReader},
	}
	for _, tt := range tests {
		for _, rd := range readers {
			t.Run(tt.name+"/"+rd.name, func(t *testing.T) {
				got, err := sseReadAll(rd.wrap(strings.NewReader(tt.in)), tt.max)
				if tt.isErr != nil {
					if !errors.Is(err, tt.isErr) {
						t.Fatalf("error = %v, want one wrapping %v", err, tt.isErr)
					}
				} else if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("events:\n got %v\nwant %v", got, tt.want)
				}
			})
		}
	}
}

func TestSSEReaderState(t *testing.T) {
	t.Parallel()
	// id and retry update the stream state even in blocks without data.
	sr := newSSEReader(strings.NewReader("data: a\n\nid: 9\nretry: 250\n\n"), 0)
	defer sr.release()
	if ev, err := sr.next(); err != nil || string(ev.data) != "a" {
		t.Fatalf("first event = %q, %v", ev.data, err)
	}
	if _, err := sr.next(); err != io.EOF {
		t.Fatalf("second next: %v, want io.EOF", err)
	}
	if got := string(sr.lastEventID()); got != "9" {
		t.Errorf("lastEventID = %q, want 9", got)
	}
	if d, ok := sr.reconnectTime(); !ok || d != 250*time.Millisecond {
		t.Errorf("reconnectTime = %v, %v; want 250ms, true", d, ok)
	}
	// The error sticks.
	if _, err := sr.next(); err != io.EOF {
		t.Errorf("next after EOF: %v", err)
	}
}

func TestSSEReaderReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom))
	got, err := sseReadAll(r, 0)
	if !errors.Is(err, boom) {
		t.Fatalf("error = %v, want %v", err, boom)
	}
	if len(got) != 1 || got[0].Data != "a" {
		t.Errorf("events = %v", got)
	}
}

func TestSSEReaderDataOwned(t *testing.T) {
	t.Parallel()
	// Data must stay intact after later events reuse the reader's buffers.
	sr := newSSEReader(strings.NewReader("data: first\n\ndata: second\n\n"), 0)
	defer sr.release()
	a, _ := sr.next()
	if _, err := sr.next(); err != nil {
		t.Fatal(err)
	}
	if string(a.data) != "first" {
		t.Errorf("first event data changed to %q", a.data)
	}
}

func TestSSEReaderLargeLineAllocs(t *testing.T) {
	payload := bytes.Repeat([]byte("a"), 1<<20)
	stream := append(append([]byte("data: "), payload...), "\n\n"...)
	src := bytes.NewReader(stream)
	sr := newSSEReader(src, 0)
	defer sr.release()
	allocs := testing.AllocsPerRun(5, func() {
		src.Reset(stream)
		sr.reset(src, 0)
		ev, err := sr.next()
		if err != nil || len(ev.data) != len(payload) {
			t.Fatalf("next: %d bytes, %v", len(ev.data), err)
		}
	})
	// Only the event's data, allocated at its size: the long line is
	// gathered in the reader's reused buffer.
	if allocs > 1 {
		t.Errorf("%v allocations to read a 1 MiB line, want 1", allocs)
	}
}

func TestWriteSSEEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, evName, id, data string
		want                   string
		wantData               string
	}{
		{name: "plain", data: `{"a":1}`, want: "data: {\"a\":1}\n\n", wantData: `{"a":1}`},
		{name: "named with id", evName: "message", id: "s_1", data: "x", want: "event: message\nid: s_1\ndata: x\n\n", wantData: "x"},
		{name: "empty data", data: "", want: "data: \n\n", wantData: ""},
		{name: "line breaks", data: "a\nb\r\nc\rd\n", want: "data: a\ndata: b\ndata: c\ndata: d\ndata: \n\n", wantData: "a\nb\nc\nd\n"},
		{name: "leading space kept", data: " x", want: "data:  x\n\n", wantData: " x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeSSEEvent(&b, tt.evName, tt.id, []byte(tt.data)); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("wrote %q, want %q", b.String(), tt.want)
			}
			got, err := sseReadAll(&b, 0)
			if err != nil || len(got) != 1 {
				t.Fatalf("read back %v, %v", got, err)
			}
			if got[0].Name != tt.evName || got[0].ID != tt.id || got[0].Data != tt.wantData {
				t.Errorf("read back %v", got[0])
			}
		})
	}
	for _, bad := range []struct{ name, id string }{{"a\nb", ""}, {"a\rb", ""}, {"", "1\n"}, {"", "1\x002"}} {
		if err := writeSSEEvent(io.Discard, bad.name, bad.id, nil); err == nil {
			t.Errorf("writeSSEEvent(name %q, id %q) succeeded, want an error", bad.name, bad.id)
		}
	}
}

// FuzzSSE checks that the reader never panics, that chunked reads give the
// same events as whole reads, and that events written by writeSSEEvent read
// back identically.
func FuzzSSE(f *testing.F) {
	f.Add([]byte("data: hello\n\n"), "message", "1", []byte(`{"jsonrpc":"2.0"}`), uint8(3))
	f.Add([]byte("event: x\r\ndata: 1\r\n\r\n: c\rid: 2\rretry: 10\rdata\r\r"), "", "", []byte("a\r\nb"), uint8(1))
	f.Add([]byte("\uFEFFdata:x\n\nid: a\x00b\ndata: y\n\n"), "e", "", []byte(""), uint8(7))
	f.Add([]byte(strings.Repeat("data: aaaaaaaa\n", 50)+"\n"), "n", "id", []byte("\n\n\r"), uint8(0))
	f.Fuzz(func(t *testing.T, stream []byte, name, id string, data []byte, chunk uint8) {
		const max = 1 << 12
		whole, werr := sseReadAll(bytes.NewReader(stream), max)
		chunked, cerr := sseReadAll(&sseChunkReader{data: stream, n: int(chunk)%9 + 1}, max)
		if fmt.Sprint(whole) != fmt.Sprint(chunked) || (werr == nil) != (cerr == nil) {
			t.Fatalf("whole read %v (%v), chunked read %v (%v)", whole, werr, chunked, cerr)
		}
		for _, ev := range whole {
			if len(ev.Data) > max {
				t.Fatalf("event of %d bytes passed the %d byte limit", len(ev.Data), max)
			}
		}

		// Round trip: a stream of written events reads back identically.
		var b bytes.Buffer
		var want []sseTestEvent
		lastID := ""
		for i := range 3 {
			evID := id
			if i == 1 {
				evID = "" // an event without id keeps the previous one
			}
			if err := writeSSEEvent(&b, name, evID, data); err != nil {
				if strings.ContainsAny(name, "\r\n") || strings.ContainsAny(evID, "\r\n\x00") {
					return
				}
				t.Fatalf("writeSSEEvent: %v", err)
			}
			if evID != "" {
				lastID = evID
			}
			norm := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(string(data))
			want = append(want, sseTestEvent{Name: name, ID: lastID, Data: norm})
		}
		got, err := sseReadAll(&sseChunkReader{data: b.Bytes(), n: int(chunk)%9 + 1}, 0)
		if err != nil {
			t.Fatalf("reading written events: %v", err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round trip:\n got %v\nwant %v\nstream %q", got, want, b.Bytes())
		}
	})
}

// sseChunkReader returns data in reads of at most n bytes.
type sseChunkReader struct {
	data []byte
	n    int
}

func (r *sseChunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.n, len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func BenchmarkSSEReader(b *testing.B) {
	for _, size := range []int{200, 1 << 20} {
		payload := bytes.Repeat([]byte("a"), size)
		var stream bytes.Buffer
		for range 16 {
			writeSSEEvent(&stream, "message", "", payload)
		}
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			b.SetBytes(int64(stream.Len()))
			b.ReportAllocs()
			for b.Loop() {
				sr := newSSEReader(bytes.NewReader(stream.Bytes()), 0)
				for {
					if _, err := sr.next(); err != nil {
						break
					}
				}
				sr.release()
			}
		})
	}
}
