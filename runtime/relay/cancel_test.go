package relay

import (
	"encoding/json"
	"testing"
)

func TestCancelledID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		params string
		want   any
		ok     bool
	}{
		{`{"requestId":7,"reason":"x"}`, int64(7), true},
		{`{"requestId":"abc"}`, "abc", true},
		{`{"requestId":"a\"b"}`, `a"b`, true},
		{`{"requestId":1.5}`, nil, false},
		{`{"requestId":null}`, nil, false},
		{`{"reason":"no id"}`, nil, false},
	} {
		t.Run(tc.params, func(t *testing.T) {
			id, ok := CancelledID(json.RawMessage(tc.params))
			if ok != tc.ok || (ok && id.Raw() != tc.want) {
				t.Errorf("CancelledID(%s) = %v, %v; want %v, %v", tc.params, id.Raw(), ok, tc.want, tc.ok)
			}
		})
	}
}

// TestCancelParams checks that what CancelParams writes CancelledID reads
// back, with the reason as a JSON string.
func TestCancelParams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id     int64
		reason string
	}{{7, "timeout"}, {0, ""}, {-3, `a "quoted" reason`}, {1 << 40, "client disconnected"}} {
		t.Run(tc.reason, func(t *testing.T) {
			params := CancelParams(tc.id, tc.reason)
			var p struct {
				RequestID int64  `json:"requestId"`
				Reason    string `json:"reason"`
			}
			if err := json.Unmarshal(params, &p); err != nil || p.RequestID != tc.id || p.Reason != tc.reason {
				t.Fatalf("CancelParams(%d, %q) = %s (%v)", tc.id, tc.reason, params, err)
			}
			if id, ok := CancelledID(params); !ok || id.Raw() != tc.id {
				t.Errorf("CancelledID(%s) = %v, %v", params, id.Raw(), ok)
			}
		})
	}
}

// FuzzCancelledID: any params decode to an id or to none; never a panic.
func FuzzCancelledID(f *testing.F) {
	for _, s := range []string{`{"requestId":7}`, `{"requestId":"abc"}`, `{"requestId":1.5}`, `{}`, `[]`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, params string) {
		id, ok := CancelledID(json.RawMessage(params))
		if ok && !id.IsValid() {
			t.Fatalf("CancelledID(%s): ok with an invalid id", params)
		}
	})
}
