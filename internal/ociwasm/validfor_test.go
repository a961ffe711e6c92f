package ociwasm

import (
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestValidFor: each validFor period of a trusted root's entries bounds
// what it vouches for: the log key the signed entry timestamp's time,
// the CT log key the SCT's, the certificate authority the signing time,
// the timestamp authority the stamped time. Periods that contain them
// verify; a malformed period is a trusted root error naming the entry.
func TestValidFor(t *testing.T) {
	f := newSigstore(t)
	key := ecKey(t)
	cert := f.Leaf(t, key, testSAN, testIssuer)
	sum := sha256.Sum256([]byte("m"))
	v1 := f.Bundle(t, key, cert, sum, bundleOpts{})                      // signed entry timestamp at t0+2m
	v2 := f.Bundle(t, key, cert, sum, bundleOpts{V2: true, Stamp: true}) // stamped at t0+2m2.25s
	ids := []Identity{{SAN: testSAN, Issuer: testIssuer}}
	period := func(start, end time.Time) map[string]any {
		p := map[string]any{"start": start.Format(time.RFC3339)}
		if !end.IsZero() {
			p["end"] = end.Format(time.RFC3339)
		}
		return p
	}
	rootWith := func(section string, p map[string]any) *TrustedRoot {
		var j map[string]any
		json.Unmarshal(f.TrustedRoot, &j)
		j[section].([]any)[0].(map[string]any)["validFor"] = p
		b, _ := json.Marshal(j)
		r, err := ParseTrustedRoot(b)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	cases := []struct {
		name    string
		section string
		period  map[string]any
		bundle  []byte
		want    string // "" verifies
	}{
		{"log key, containing", "tlogs", period(t0, t0.Add(time.Hour)), v1, ""},
		{"log key, started later", "tlogs", period(t0.Add(time.Hour), time.Time{}), v1, "the log's key is not valid at the integrated time"},
		{"log key, ended before", "tlogs", period(t0.AddDate(-1, 0, 0), t0.Add(time.Minute)), v1, "the log's key is not valid at the integrated time"},
		{"CT log key, containing", "ctlogs", period(t0, time.Time{}), v1, ""},
		{"CT log key, ended before", "ctlogs", period(t0.AddDate(-1, 0, 0), t0), v1, "certificate transparency: SCT 0: log"},
		{"certificate authority, containing", "certificateAuthorities", period(t0, time.Time{}), v1, ""},
		{"certificate authority, ended before", "certificateAuthorities", period(t0.AddDate(-1, 0, 0), t0.Add(time.Minute)), v1, `certificate authority "test-fulcio-root" is not valid`},
		{"timestamp authority, containing", "timestampAuthorities", period(t0, time.Time{}), v2, ""},
		{"timestamp authority, started later", "timestampAuthorities", period(t0.Add(time.Hour), time.Time{}), v2, `timestamp authority "test-tsa-root" is not valid`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := VerifyKeyless(c.bundle, rootWith(c.section, c.period), ids)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v; want %q", err, c.want)
			}
		})
	}
	var j map[string]any
	json.Unmarshal(f.TrustedRoot, &j)
	j["ctlogs"].([]any)[0].(map[string]any)["validFor"] = map[string]any{"start": "yesterday"}
	b, _ := json.Marshal(j)
	if _, err := ParseTrustedRoot(b); err == nil || !strings.Contains(err.Error(), "ctlogs[0] validFor start") {
		t.Fatalf("a malformed validFor: %v", err)
	}
}
