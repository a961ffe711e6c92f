package oauth

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/oauth2"

	"github.com/edge-mcp/edge-mcp/internal/natstest"
)

// kvRig is a KV token store on an in-process NATS, with what its watch
// reported.
type kvRig struct {
	store *KVStore
	kv    jetstream.KeyValue
	logs  *lockedBuffer
	mu    sync.Mutex
	seen  []string
}

func newKVRig(t *testing.T, url string, key []byte) *kvRig {
	t.Helper()
	nc, err := nats.Connect(url, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	r := &kvRig{logs: &lockedBuffer{}}
	open := func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "test_oauth", History: 1})
	}
	if r.kv, err = open(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.store = NewKVStore(open, nc.IsConnected, sealer, slog.New(slog.NewTextHandler(r.logs, nil)), func(server, identity string) {
		r.mu.Lock()
		r.seen = append(r.seen, server+"/"+identity)
		r.mu.Unlock()
	})
	t.Cleanup(r.store.Close)
	return r
}

func (r *kvRig) saw(what string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.seen {
		if s == what {
			return true
		}
	}
	return false
}

func testRecord(access, refresh string) *Record {
	return &Record{Token: &oauth2.Token{AccessToken: access, RefreshToken: refresh, Expiry: time.Now().Add(time.Hour)},
		ClientID: "client", TokenURL: "http://127.0.0.1:1/token", Saved: time.Now()}
}

// TestKVStore: records round-trip sealed, versions refuse a stale write,
// the watch reports other replicas' writes, a value that does not open
// is refused, and NATS never holds a token in plaintext.
func TestKVStore(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	key := bytes.Repeat([]byte{9}, 32)
	a, b := newKVRig(t, srv.ClientURL(), key), newKVRig(t, srv.ClientURL(), key)
	const server, identity = "up.one>*", "user@example.com"

	t.Run("versions", func(t *testing.T) {
		rev, err := a.store.SaveVersion(server, identity, testRecord("access-1", "refresh-1"), 0)
		if err != nil || rev == 0 {
			t.Fatalf("create: %d %v", rev, err)
		}
		if _, err := b.store.SaveVersion(server, identity, testRecord("access-x", "refresh-x"), 0); !errors.Is(err, ErrStale) {
			t.Fatalf("a second create: %v, want ErrStale", err)
		}
		rec, got, err := b.store.LoadVersion(server, identity)
		if err != nil || rec.Token.RefreshToken != "refresh-1" || got != rev {
			t.Fatalf("load: %+v %d %v", rec, got, err)
		}
		rev2, err := b.store.SaveVersion(server, identity, testRecord("access-2", "refresh-2"), rev)
		if err != nil {
			t.Fatal(err)
		}
		// a refreshed at the same time from the old version: it loses.
		if _, err := a.store.SaveVersion(server, identity, testRecord("access-3", "refresh-3"), rev); !errors.Is(err, ErrStale) {
			t.Fatalf("stale update: %v, want ErrStale", err)
		}
		rec, got, _ = a.store.LoadVersion(server, identity)
		if rec.Token.RefreshToken != "refresh-2" || got != rev2 {
			t.Fatalf("after the race the store holds %q (rev %d), want refresh-2", rec.Token.RefreshToken, got)
		}
	})
	t.Run("watch", func(t *testing.T) {
		if err := b.store.Save("w", "", testRecord("access-w", "")); err != nil {
			t.Fatal(err)
		}
		if err := b.store.Delete(server, identity); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for !(a.saw("w/") && a.saw(server+"/"+identity)) {
			if time.Now().After(deadline) {
				t.Fatalf("replica a saw %v within 2 s", a.seen)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if rec, err := a.store.Load(server, identity); err != nil || rec != nil {
			t.Fatalf("after delete: %v %v", rec, err)
		}
	})
	t.Run("no plaintext", func(t *testing.T) {
		keys, err := a.kv.Keys(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			e, err := a.kv.Get(context.Background(), k)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(e.Value(), []byte("access-")) || bytes.Contains(e.Value(), []byte("client")) {
				t.Fatalf("key %s holds plaintext: %q", k, e.Value())
			}
		}
	})
	t.Run("other key refused", func(t *testing.T) {
		other := newKVRig(t, srv.ClientURL(), bytes.Repeat([]byte{1}, 32))
		rec, err := other.store.Load("w", "")
		if err == nil || rec != nil {
			t.Fatalf("a record sealed with another key opened: %v", err)
		}
		if _, err := a.kv.Put(context.Background(), KVKey("junk", ""), []byte("not sealed")); err != nil {
			t.Fatal(err)
		}
		if rec, err := a.store.Load("junk", ""); err == nil || rec != nil {
			t.Fatal("an unsealed value was accepted")
		}
		if !strings.Contains(a.logs.String(), "fleet token record refused") {
			t.Fatalf("refusal not logged: %s", a.logs.String())
		}
	})
}

// TestKVStoreRetriesWhenNATSReturns: a write while NATS is down is kept
// and lands when NATS is back.
func TestKVStoreRetriesWhenNATSReturns(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	r := newKVRig(t, srv.ClientURL(), bytes.Repeat([]byte{9}, 32))
	srv.Shutdown()
	srv.WaitForShutdown()
	if err := r.store.Save("up", "", testRecord("access-late", "refresh-late")); err != nil {
		t.Fatalf("a save while NATS is down must be kept, got %v", err)
	}
	if err := r.store.Delete("gone", ""); err == nil {
		t.Fatal("a delete while NATS is down must say so")
	}
	srv.Restart(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, err := r.store.Load("up", "")
		if err == nil && rec != nil && rec.Token.AccessToken == "access-late" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kept write did not land: %v %v", rec, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestKVKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ server, identity string }{{"up", ""}, {"a.b*>", "sub|x y"}, {"ü", "\x00"}} {
		t.Run(c.server, func(t *testing.T) {
			k := KVKey(c.server, c.identity)
			if strings.ContainsAny(k, " *>") {
				t.Fatalf("key %q has characters KV refuses", k)
			}
			s, i, err := ParseKVKey(k)
			if err != nil || s != c.server || i != c.identity {
				t.Fatalf("round trip %q: %q %q %v", k, s, i, err)
			}
		})
	}
}

// FuzzParseKVKey: keys come from the bucket's watch (any NATS client of
// the fleet may write them); parsing never panics and round-trips.
func FuzzParseKVKey(f *testing.F) {
	f.Add(KVKey("up", ""))
	f.Add("tok.s.i")
	f.Add("tok.sA.iB.C")
	f.Fuzz(func(t *testing.T, key string) {
		s, i, err := ParseKVKey(key)
		if err == nil && KVKey(s, i) != key {
			t.Fatalf("%q parsed to %q %q, which encode to %q", key, s, i, KVKey(s, i))
		}
	})
}

// FuzzRelayMessages: forwarded redirects and answers are bytes from NATS.
func FuzzRelayMessages(f *testing.F) {
	f.Add([]byte(`{"state":"s","code":"c"}`))
	f.Add([]byte(`{"status":200,"message":"ok"}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if req, err := decodeRelayRequest(data); err == nil && req.State == "" {
			t.Fatal("a request without state accepted")
		}
		if rep, err := decodeRelayReply(data); err == nil && (rep.Status < 200 || rep.Status > 599) {
			t.Fatal("a reply out of range accepted")
		}
	})
}
