package cluster

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestDecodeMember(t *testing.T) {
	t.Parallel()
	good := `{"replica":"a","last_seen":"2026-01-02T03:04:05Z","started":"2026-01-02T03:00:00Z","nats":"connected","generation":3,"modules":{"guard":"sha256:ab"}}`
	for _, tc := range []struct{ name, in, err string }{
		{"good", good, ""},
		{"not JSON", `{"replica":`, "unexpected EOF"},
		{"no replica", `{"last_seen":"2026-01-02T03:04:05Z"}`, `no "replica"`},
		{"never seen", `{"replica":"a"}`, `no "last_seen"`},
		{"unknown field", `{"replica":"a","last_seen":"2026-01-02T03:04:05Z","x":1}`, "unknown field"},
		{"trailing data", good + `{}`, "data after"},
		{"huge field", `{"replica":"` + strings.Repeat("a", 2000) + `","last_seen":"2026-01-02T03:04:05Z"}`, "at most"},
		{"huge record", strings.Repeat(" ", maxMemberBytes+1), "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeMember([]byte(tc.in))
			if tc.err == "" {
				if err != nil || m.Replica != "a" || m.Generation != 3 {
					t.Fatalf("DecodeMember = %+v, %v", m, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
		})
	}
}

// FuzzDecodeMember: member records read from NATS decode to a checked
// record or an error, never a panic, and a decoded one encodes back to a
// record that decodes the same.
func FuzzDecodeMember(f *testing.F) {
	m := Member{Replica: "a", LastSeen: time.Unix(1, 0).UTC(), NATS: "connected", Modules: map[string]string{"g": "sha256:00"},
		Failed: &Failure{Generation: 2, Error: "too large", At: time.Unix(2, 0).UTC()}}
	b, _ := json.Marshal(m)
	f.Add(b)
	f.Add([]byte(`{"replica":"","last_seen":"0001-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"replica":"x","last_seen":"2026-01-02T03:04:05Z","failed":null,"modules":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMember(b)
		if err != nil {
			return
		}
		again, _ := json.Marshal(m)
		m2, err := DecodeMember(again)
		if err != nil || m2.Replica != m.Replica || !m2.LastSeen.Equal(m.LastSeen) {
			t.Fatalf("a decoded record does not survive encoding: %s → %s: %v", b, again, err)
		}
	})
}
