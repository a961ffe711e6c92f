package fleet

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edge-mcp/edge-mcp/policy/store"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
)

func hexDigest(c string) string { return "sha256:" + strings.Repeat(c, 64) }

func TestFleetPolicyRecordChanges(t *testing.T) {
	t.Parallel()
	r := newFleetPolicy()
	v := func(c string) store.Version { return store.Version{Digest: hexDigest(c), Size: 10} }
	for _, c := range []string{"a", "b", "c", "d"} {
		r.upload("m", v(c), "", 2)
	}
	r.upload("m", v("d"), "", 2) // the active one again: nothing changes
	if m := r.Modules["m"]; m.Active.Digest != hexDigest("d") || len(m.History) != 2 || m.History[0].Digest != hexDigest("c") || m.History[1].Digest != hexDigest("b") {
		t.Fatalf("after four uploads keeping 2: %+v", m)
	}
	r.upload("m", v("b"), "", 2) // an older version again moves out of the history
	if m := r.Modules["m"]; m.Active.Digest != hexDigest("b") || len(m.History) != 2 || m.History[0].Digest != hexDigest("d") || m.History[1].Digest != hexDigest("c") {
		t.Fatalf("after re-uploading b: %+v", m)
	}
	for _, want := range []string{"d", "c"} {
		if err := r.rollback("m", time.Now()); err != nil || r.Modules["m"].Active.Digest != hexDigest(want) {
			t.Fatalf("rollback to %s: %v %+v", want, err, r.Modules["m"])
		}
	}
	for _, tc := range []struct {
		name string
		err  error
		code string
	}{
		{"no earlier version", r.rollback("m", time.Now()), "no_previous"},
		{"unknown module rollback", r.rollback("x", time.Now()), "not_found"},
		{"unknown module remove", r.remove("x"), "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ae, ok := tc.err.(*admin.Error)
			if !ok || ae.Code != tc.code || (ae.Status != http.StatusConflict && ae.Status != http.StatusNotFound) {
				t.Errorf("err = %v, want code %s", tc.err, tc.code)
			}
		})
	}
	before := r.digest()
	c, err := r.clone()
	if err != nil || c.digest() != before || !bytes.Equal(c.encode(), r.encode()) {
		t.Errorf("a copy differs: %s vs %s", c.encode(), r.encode())
	}
	if err := c.remove("m"); err != nil || r.digest() != before || c.digest() == before {
		t.Errorf("remove on a copy: %v; the original changed: %v", err, r.digest() != before)
	}
}

// FuzzDecodeFleetPolicy: any bytes read from the control bucket are
// either refused with an error or a record that survives a copy, never a
// panic.
func FuzzDecodeFleetPolicy(f *testing.F) {
	good := newFleetPolicy()
	good.upload("guard", store.Version{Digest: hexDigest("a"), Size: 3}, "c2ln", 5)
	good.upload("guard", store.Version{Digest: hexDigest("b"), Size: 4}, "", 5)
	f.Add(good.encode())
	f.Add([]byte(`{"format":1,"modules":{},"attachments":[{"name":"g","module":"guard","tools":["*"],"mode":"shadow","config":{"a":1}}]}`))
	f.Add([]byte(`{"format":1,"modules":{"m":{"active":{"digest":"sha256:XYZ","size":3}}}}`))
	f.Add([]byte(`{"format":1,"modules":{"m":{"active":{"digest":"` + hexDigest("a") + `","size":3},"history":[{"digest":"` + hexDigest("a") + `","size":3}]}}}`))
	f.Add([]byte(`{"format":1} {}`))
	f.Add([]byte(`{"format":1,"modules":null,"attachments":null,"extra":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeFleetPolicy(b)
		if err != nil {
			return
		}
		c, err := rec.clone()
		if err != nil || c.digest() != rec.digest() {
			t.Fatalf("a decoded record changes in a copy: %s", b)
		}
		if rec.storeModules() == nil || rec.activeDigests() == nil {
			t.Fatal("nil views of a decoded record")
		}
	})
}

// FuzzDecodeFleetPins: pin decisions read from NATS are checked or
// refused, never a panic.
func FuzzDecodeFleetPins(f *testing.F) {
	f.Add([]byte(`{"format":1,"decisions":[{"server":"s","tool":"t","fingerprint":"sha256:ab","decision":"approve","at":"2026-01-01T00:00:00Z"}]}`))
	f.Add([]byte(`{"format":1,"decisions":[{"server":"s","tool":"t","fingerprint":"x","decision":"maybe"}]}`))
	f.Add([]byte(`{"format":1,"decisions":[{"server":"s","tool":"t","fingerprint":"x","decision":"reject"},{"server":"s","tool":"t","fingerprint":"y","decision":"approve"}]}`))
	f.Add([]byte(`{"format":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeFleetPins(b)
		if err != nil {
			return
		}
		for _, d := range rec.Decisions {
			if d.Server == "" || (d.Decision != "approve" && d.Decision != "reject") {
				t.Fatalf("accepted %+v", d)
			}
		}
	})
}
