package transports_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/transports"
)

// testFleet is a StreamableFleet that adopts the ids it was told to and
// records what the server hands it.
type testFleet struct {
	mu        sync.Mutex
	adoptable map[string]bool
	adopted   []string
	elsewhere []string
	streams   []string
	deleted   []string
}

func (f *testFleet) SessionID(_ any, init *jsonrpc.Request) string {
	if init.Method != "initialize" {
		return ""
	}
	return "fleet-session-1"
}

func (f *testFleet) Adopt(_ *http.Request, id string) (any, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.adopted = append(f.adopted, id)
	return "peer-of-" + id, f.adoptable[id]
}

func (f *testFleet) Elsewhere(id string, msg []byte) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.elsewhere = append(f.elsewhere, id+" "+string(msg))
	return true
}

func (f *testFleet) Standalone(id string, open bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	state := "closed"
	if open {
		state = "open"
	}
	f.streams = append(f.streams, id+" "+state)
}

func (f *testFleet) Deleted(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, id)
}

func (f *testFleet) snapshot() (adopted, elsewhere, streams, deleted []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.adopted...), append([]string(nil), f.elsewhere...),
		append([]string(nil), f.streams...), append([]string(nil), f.deleted...)
}

// TestStreamableFleetHooks: the fleet names new sessions; an unknown id is
// adopted only when the fleet says so (else 404), once however many
// requests race for it; standalone messages go elsewhere while no GET is
// open here and to the GET stream when one is; WriteStandalone queues on
// it; a DELETE is reported.
func TestStreamableFleetHooks(t *testing.T) {
	t.Parallel()
	f := &testFleet{adoptable: map[string]bool{"from-elsewhere": true}}
	h := srvStart(t, true, transports.StreamableServerOptions{Fleet: f})
	ctx := context.Background()

	sid, conn := h.initSession(t)
	if sid != "fleet-session-1" {
		t.Fatalf("session id %q, want the fleet's", sid)
	}
	if err := conn.Write(ctx, &jsonrpc.Request{Method: "notifications/message", Params: []byte(`{"level":"info","data":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, elsewhere, _, _ := f.snapshot(); len(elsewhere) != 1 || !strings.HasPrefix(elsewhere[0], sid+" ") {
		t.Fatalf("with no GET open, a standalone message went %v, want to the fleet", elsewhere)
	}

	resp := h.post(t, "unknown-id", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if srvBody(t, resp); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an id the fleet refuses: %d", resp.StatusCode)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := h.post(t, "from-elsewhere", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			if srvBody(t, resp); resp.StatusCode != http.StatusAccepted {
				t.Errorf("adopted session: %d", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	adoptedConn := srvWait(t, h.conns, "accept of the adopted session")
	if adoptedConn.SessionID() != "from-elsewhere" || transports.Peer(adoptedConn) != "peer-of-from-elsewhere" {
		t.Fatalf("adopted %q with peer %v", adoptedConn.SessionID(), transports.Peer(adoptedConn))
	}
	select {
	case c := <-h.conns:
		t.Fatalf("the adopted id was accepted twice (%s)", c.SessionID())
	default:
	}

	gctx, cancel := context.WithCancel(ctx)
	get := h.do(t, gctx, http.MethodGet, "from-elsewhere", "", nil)
	events := srvEvents(get.Body)
	if !h.srv.WriteStandalone("from-elsewhere", []byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a://b"}}`)) {
		t.Fatal("WriteStandalone found no session")
	}
	if ev := srvNextEvent(t, events, true); !strings.Contains(ev.data, "a://b") {
		t.Fatalf("GET stream got %q", ev.data)
	}
	if h.srv.WriteStandalone("nobody", []byte(`{}`)) {
		t.Fatal("WriteStandalone to an unknown session reported success")
	}
	cancel()
	get.Body.Close()
	_, _ = io.Copy(io.Discard, get.Body)

	del := h.do(t, ctx, http.MethodDelete, "from-elsewhere", "", nil)
	srvBody(t, del)
	adopted, _, streams, deleted := f.snapshot()
	if del.StatusCode != http.StatusNoContent || len(deleted) != 1 || deleted[0] != "from-elsewhere" {
		t.Fatalf("DELETE: %d, reported %v", del.StatusCode, deleted)
	}
	if len(streams) == 0 || streams[0] != "from-elsewhere open" {
		t.Fatalf("GET stream reports %v", streams)
	}
	if len(adopted) < 2 {
		t.Fatalf("adoption asked %v", adopted)
	}
}

// TestStreamableEventIDPrefix: a Last-Event-ID without the server's
// prefix (another fleet replica's) starts the stream fresh, telling the
// client to re-list, instead of replaying this server's events of the
// same number; without a prefix the same id is resumed.
func TestStreamableEventIDPrefix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ prefix, last, want string }{
		{"R1/", "0-0", "list_changed"},
		{"R1/", "R2/0-0", "list_changed"},
		{"", "0-0", "notifications/message"},
		{"R1/", "R1/0-0", "notifications/message"},
	} {
		t.Run(tc.prefix+tc.last, func(t *testing.T) {
			h := srvStart(t, true, transports.StreamableServerOptions{EventIDPrefix: tc.prefix})
			sid, conn := h.initSession(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for range 2 {
				if err := conn.Write(ctx, &jsonrpc.Request{Method: "notifications/message", Params: []byte(`{"level":"info","data":"x"}`)}); err != nil {
					t.Fatal(err)
				}
			}
			resp := h.do(t, ctx, http.MethodGet, sid, "", map[string]string{"Last-Event-ID": tc.last})
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, srvBody(t, resp))
			}
			evs := srvEvents(resp.Body)
			ev := srvNextEvent(t, evs, true)
			for ev.data == "" {
				ev = srvNextEvent(t, evs, true)
			}
			if !strings.Contains(ev.data, tc.want) {
				t.Fatalf("first event %q, want %s", ev.data, tc.want)
			}
		})
	}
}
