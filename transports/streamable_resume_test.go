package transports_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/transports"
)

// resEvent is one SSE event as read off the wire, with its id and retry.
type resEvent struct {
	id, retry, data string
	hasID           bool
}

// resStream reads the events of an SSE response itself, line by line.
type resStream struct {
	resp   *http.Response
	cancel context.CancelFunc
	events chan resEvent
}

func resEvents(r io.Reader) chan resEvent {
	out := make(chan resEvent, 256)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		var ev resEvent
		var data []string
		fields := false
		for sc.Scan() {
			line := sc.Text()
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch {
			case line == "":
				if fields {
					ev.data = strings.Join(data, "\n")
					out <- ev
				}
				ev, data, fields = resEvent{}, nil, false
			case name == "":
				// a comment
			case name == "id":
				ev.id, ev.hasID, fields = value, true, true
			case name == "retry":
				ev.retry, fields = value, true
			case name == "data":
				data, fields = append(data, value), true
			default:
				fields = true
			}
		}
	}()
	return out
}

// open sends a GET (with lastID as Last-Event-ID when set) and returns its
// stream; it retries while the previous GET is still registered (409).
func resOpen(t *testing.T, h *srvHarness, sid, lastID string) *resStream {
	t.Helper()
	hdr := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	if lastID != "" {
		hdr["Last-Event-ID"] = lastID
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithCancel(context.Background())
		resp := h.do(t, ctx, http.MethodGet, sid, "", hdr)
		if resp.StatusCode == http.StatusOK {
			s := &resStream{resp: resp, cancel: cancel, events: resEvents(resp.Body)}
			t.Cleanup(s.drop)
			return s
		}
		body := srvBody(t, resp)
		cancel()
		if resp.StatusCode != http.StatusConflict || time.Now().After(deadline) {
			t.Fatalf("GET (Last-Event-ID %q): %d %s", lastID, resp.StatusCode, body)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *resStream) drop() {
	s.cancel()
	s.resp.Body.Close()
}

// next returns the next event with data, skipping priming events.
func (s *resStream) next(t *testing.T) resEvent {
	t.Helper()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatal("event stream ended")
			}
			if ev.data == "" {
				continue
			}
			return ev
		case <-time.After(5 * time.Second):
			t.Fatal("timed out waiting for an SSE event")
		}
	}
}

// method returns the method of the message an event carries, or its text
// result for a response.
func resMethod(t *testing.T, ev resEvent) string {
	t.Helper()
	var m struct {
		Method string `json:"method"`
		Params struct {
			N int `json:"n"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(ev.data), &m); err != nil {
		t.Fatalf("event data %q: %v", ev.data, err)
	}
	if m.Params.N != 0 {
		return fmt.Sprintf("%s#%d", m.Method, m.Params.N)
	}
	return m.Method
}

func resNote(t *testing.T, conn transports.Connection, method string, n int) {
	t.Helper()
	err := conn.Write(context.Background(), &jsonrpc.Request{Method: method,
		Params: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))})
	if err != nil {
		t.Fatal(err)
	}
}

// resExpect reads events and checks their methods, ids present and distinct.
func resExpect(t *testing.T, s *resStream, want ...string) []resEvent {
	t.Helper()
	var got []resEvent
	for _, w := range want {
		ev := s.next(t)
		if m := resMethod(t, ev); m != w {
			t.Fatalf("event %d: got %s, want %s (so far %v)", len(got), m, w, got)
		}
		if !ev.hasID || ev.id == "" {
			t.Fatalf("event %s has no id", w)
		}
		for _, g := range got {
			if g.id == ev.id {
				t.Fatalf("id %q repeated", ev.id)
			}
		}
		got = append(got, ev)
	}
	return got
}

func TestStreamableResumeStandalone(t *testing.T) {
	t.Parallel()
	h := srvStart(t, false, transports.StreamableServerOptions{})
	sid, conn := h.initSession(t)

	s := resOpen(t, h, sid, "")
	resNote(t, conn, "n", 1)
	first := resExpect(t, s, "n#1")
	s.drop()
	// Written while no GET (or a dying GET) is open.
	for i := 2; i <= 6; i++ {
		resNote(t, conn, "n", i)
	}
	s2 := resOpen(t, h, sid, first[0].id)
	resExpect(t, s2, "n#2", "n#3", "n#4", "n#5", "n#6")
	resNote(t, conn, "n", 7)
	resExpect(t, s2, "n#7")

	// Events written live and then missed are replayed under their ids.
	s2.drop()
	s3 := resOpen(t, h, sid, "")
	resNote(t, conn, "n", 8)
	resNote(t, conn, "n", 9)
	resNote(t, conn, "n", 10)
	got := resExpect(t, s3, "n#8", "n#9", "n#10")
	s3.drop()
	s4 := resOpen(t, h, sid, got[0].id)
	again := resExpect(t, s4, "n#9", "n#10")
	if again[0].id != got[1].id || again[1].id != got[2].id {
		t.Errorf("replayed ids %q %q, want %q %q", again[0].id, again[1].id, got[1].id, got[2].id)
	}
	resNote(t, conn, "n", 11)
	resExpect(t, s4, "n#11")
}

func TestStreamableResumeFreshStream(t *testing.T) {
	t.Parallel()
	h := srvStart(t, false, transports.StreamableServerOptions{EventStoreSize: 2})
	sid, conn := h.initSession(t)
	s := resOpen(t, h, sid, "")
	for i := 1; i <= 5; i++ {
		resNote(t, conn, "n", i)
	}
	got := resExpect(t, s, "n#1", "n#2", "n#3", "n#4", "n#5")
	s.drop()

	fresh := []string{"notifications/tools/list_changed", "notifications/prompts/list_changed",
		"notifications/resources/list_changed"}
	for _, id := range []string{got[0].id, "0-99999", "7-1"} {
		t.Run(id, func(t *testing.T) {
			s := resOpen(t, h, sid, id)
			resExpect(t, s, fresh...)
			resNote(t, conn, "live", 0)
			resExpect(t, s, "live")
			s.drop()
		})
	}

	t.Run("malformed", func(t *testing.T) {
		resp := h.do(t, context.Background(), http.MethodGet, sid, "", map[string]string{"Last-Event-ID": "abc"})
		if body := srvBody(t, resp); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("malformed Last-Event-ID: %d %s", resp.StatusCode, body)
		}
	})
}

func TestStreamableResumeDisabled(t *testing.T) {
	t.Parallel()
	h := srvStart(t, false, transports.StreamableServerOptions{EventStoreSize: -1})
	sid, conn := h.initSession(t)
	s := resOpen(t, h, sid, "")
	resNote(t, conn, "n", 1)
	if ev := s.next(t); ev.hasID {
		t.Errorf("event has id %q with the store off", ev.id)
	}
	resp := h.do(t, context.Background(), http.MethodGet, sid, "", map[string]string{"Last-Event-ID": "0-1"})
	if body := srvBody(t, resp); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("Last-Event-ID with resumption off: %d %s", resp.StatusCode, body)
	}
}

func TestStreamableResumePOSTStream(t *testing.T) {
	t.Parallel()
	h := srvStart(t, false, transports.StreamableServerOptions{})
	sid, _ := h.initSession(t)
	hdr := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}

	t.Run("ids on a POST stream", func(t *testing.T) {
		resp := h.do(t, context.Background(), http.MethodPost, sid,
			`{"jsonrpc":"2.0","id":"p1","method":"tools/call","params":{"name":"progress","_meta":{"progressToken":"t"}}}`, hdr)
		defer resp.Body.Close()
		events := resEvents(resp.Body)
		var ids []string
		primed := false
		for ev := range events {
			if !ev.hasID {
				t.Errorf("event without id: %q", ev.data)
			}
			if ev.data == "" {
				primed = primed || ev.retry != ""
				continue
			}
			ids = append(ids, ev.id)
		}
		if len(ids) != 3 || !primed {
			t.Errorf("ids %q, priming event with retry: %v", ids, primed)
		}
	})

	t.Run("resume before the response", func(t *testing.T) {
		prime, ask := resAsk(t, h, sid, "a1")
		s := resOpen(t, h, sid, prime.id)
		if ev := s.next(t); ev.id != ask.id || ev.data != ask.data {
			t.Fatalf("replayed %+v, want %+v", ev, ask)
		}
		answer := h.post(t, sid, `{"jsonrpc":"2.0","id":"ask-a1","result":{"role":"assistant","content":{"type":"text","text":"42"},"model":"m"}}`)
		if body := srvBody(t, answer); answer.StatusCode != http.StatusAccepted {
			t.Fatalf("answer: %d %s", answer.StatusCode, body)
		}
		ev := s.next(t)
		if !ev.hasID || !strings.Contains(ev.data, `"id":"a1"`) || !strings.Contains(ev.data, "42") {
			t.Fatalf("resumed stream carried %+v, want the response", ev)
		}
		if _, ok := <-s.events; ok {
			t.Error("the resumed stream did not end after the response")
		}
	})
}

// resAsk POSTs the "ask" tool call id, reads its priming event and the
// sampling request, and drops the stream.
func resAsk(t *testing.T, h *srvHarness, sid, id string) (prime, ask resEvent) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := h.do(t, ctx, http.MethodPost, sid,
		`{"jsonrpc":"2.0","id":"`+id+`","method":"tools/call","params":{"name":"ask"}}`,
		map[string]string{"Mcp-Protocol-Version": "2025-11-25"})
	defer resp.Body.Close()
	for ev := range resEvents(resp.Body) {
		if ev.data == "" {
			prime = ev
			continue
		}
		ask = ev
		break
	}
	if !prime.hasID || prime.retry == "" || !strings.Contains(ask.data, "sampling/createMessage") || !ask.hasID {
		t.Fatalf("priming %+v, first event %+v", prime, ask)
	}
	return prime, ask
}

func TestStreamableResumeCancelledPOST(t *testing.T) {
	t.Parallel()
	h := srvStart(t, false, transports.StreamableServerOptions{})
	sid, _ := h.initSession(t)
	prime, ask := resAsk(t, h, sid, "c1")
	// The client cancels the request it dropped: the kept stream goes and
	// the id is free again.
	deadline := time.Now().Add(5 * time.Second)
	for {
		note := h.post(t, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1"}}`)
		srvBody(t, note)
		resp := h.post(t, sid, `{"jsonrpc":"2.0","id":"c1","method":"ping"}`)
		if body := srvBody(t, resp); resp.StatusCode == http.StatusOK {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("ping with the cancelled id: %d %s", resp.StatusCode, body)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// What was written stays replayable; the stream then ends.
	s := resOpen(t, h, sid, prime.id)
	if ev := s.next(t); ev.id != ask.id {
		t.Fatalf("replayed %+v, want %+v", ev, ask)
	}
	if _, ok := <-s.events; ok {
		t.Error("the replay of a finished stream did not end")
	}
	answer := h.post(t, sid, `{"jsonrpc":"2.0","id":"ask-c1","result":{"role":"assistant","content":{"type":"text","text":"x"},"model":"m"}}`)
	srvBody(t, answer)
}

func TestStreamableResumeSessionsApart(t *testing.T) {
	t.Parallel()
	h := srvStart(t, false, transports.StreamableServerOptions{})
	sidA, connA := h.initSession(t)
	sidB, connB := h.initSession(t)
	sa, sb := resOpen(t, h, sidA, ""), resOpen(t, h, sidB, "")
	for i := 1; i <= 3; i++ {
		resNote(t, connA, "a", i)
		resNote(t, connB, "b", i)
	}
	ga := resExpect(t, sa, "a#1", "a#2", "a#3")
	gb := resExpect(t, sb, "b#1", "b#2", "b#3")
	sa.drop()
	sb.drop()
	resNote(t, connA, "a", 4)
	resNote(t, connB, "b", 4)

	ra := resOpen(t, h, sidA, ga[0].id)
	resExpect(t, ra, "a#2", "a#3", "a#4")
	rb := resOpen(t, h, sidB, gb[0].id)
	resExpect(t, rb, "b#2", "b#3", "b#4")
	// An id of session A means nothing more to session B than its own.
	rb.drop()
	rb2 := resOpen(t, h, sidB, ga[2].id)
	resNote(t, connB, "b", 5)
	for {
		ev := rb2.next(t)
		m := resMethod(t, ev)
		if strings.HasPrefix(m, "a#") {
			t.Fatalf("session B got session A's %s", m)
		}
		if m == "b#5" {
			break
		}
	}
}
