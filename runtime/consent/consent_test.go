package consent

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name, res, want, errHas string
	}{
		{"approved", `{"action":"accept","content":{"approve":true}}`, Approved, ""},
		{"accepted unchecked", `{"action":"accept","content":{"approve":false}}`, Declined, "did not approve"},
		{"accepted without content", `{"action":"accept"}`, Declined, "did not approve"},
		{"declined", `{"action":"decline"}`, Declined, "declined the call"},
		{"declined though checked", `{"action":"decline","content":{"approve":true}}`, Declined, "declined the call"},
		{"cancelled", `{"action":"cancel"}`, Cancelled, "cancelled the approval"},
		{"no action", `{}`, Cancelled, "cancelled the approval"},
		{"not JSON", `nope`, Invalid, "not understood"},
		{"approve of the wrong type", `{"action":"accept","content":{"approve":"yes"}}`, Invalid, "not understood"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decide("echo", json.RawMessage(tc.res))
			if got != tc.want {
				t.Errorf("decision %q, want %q", got, tc.want)
			}
			switch {
			case tc.errHas == "" && err != nil:
				t.Errorf("err %v, want none", err)
			case tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), `"echo"`)):
				t.Errorf("err %v, want one naming tool \"echo\" with %q", err, tc.errHas)
			}
		})
	}
}

func TestQuestion(t *testing.T) {
	for _, tc := range []struct {
		name, shown, wantArgs string
	}{
		{"arguments", `{"token":"***","n":1}`, `{"token":"***","n":1}`},
		{"none", ``, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q struct {
				Message         string `json:"message"`
				RequestedSchema struct {
					Required []string `json:"required"`
				} `json:"requestedSchema"`
			}
			if err := json.Unmarshal(Question("echo", "docs", json.RawMessage(tc.shown)), &q); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(q.Message, `tool "echo" on server "docs"`) || !strings.HasSuffix(q.Message, "(secrets masked): "+tc.wantArgs) {
				t.Errorf("message %q", q.Message)
			}
			if len(q.RequestedSchema.Required) != 1 || q.RequestedSchema.Required[0] != "approve" {
				t.Errorf("schema requires %q, want [approve]", q.RequestedSchema.Required)
			}
		})
	}
}

// FuzzDecide checks that any answer decides: a known decision, and an
// error unless approved.
func FuzzDecide(f *testing.F) {
	for _, s := range []string{`{"action":"accept","content":{"approve":true}}`, `{"action":"decline"}`, `{}`, `nope`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, res []byte) {
		d, err := Decide("t", res)
		switch d {
		case Approved:
			if err != nil {
				t.Fatalf("approved with error %v", err)
			}
		case Declined, Cancelled, Invalid:
			if err == nil {
				t.Fatalf("%s without error", d)
			}
		default:
			t.Fatalf("decision %q", d)
		}
	})
}
