package transports

import (
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

// TestReadBodyAllocatesWhatArrives: a client that announces a 4 MB body
// and sends a few bytes costs what it sent, not what it announced (before,
// the whole announced length was allocated up front, so slow clients
// announcing large bodies could take the memory of the process).
func TestReadBodyAllocatesWhatArrives(t *testing.T) {
	const announced = 4_000_000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		r := &http.Request{ContentLength: announced, Body: io.NopCloser(strings.NewReader(`{"jsonrpc":`))}
		if _, err := readBody(r, 4<<20); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("a short body: %v, want an unexpected EOF", err)
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 2<<20 {
		t.Errorf("10 bodies announcing 4 MB and sending 11 bytes allocated %d MiB, want well under the 40 MB announced", got>>20)
	}
	for _, n := range []int{0, 100, preallocBody, preallocBody + 1, 1 << 20} {
		body := strings.Repeat("x", n)
		b, err := readBody(&http.Request{ContentLength: int64(n), Body: io.NopCloser(strings.NewReader(body))}, 4<<20)
		if err != nil || string(b) != body {
			t.Errorf("a body of %d bytes: %d bytes, %v", n, len(b), err)
		}
	}
}
