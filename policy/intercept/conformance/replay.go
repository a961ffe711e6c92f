// Package conformance reads and replays the SEP-2624 conformance fixtures
// (testdata/interceptors-conformance, ADAPTER.md): a fixture binds its
// interceptors to implementations through a Host; its steps list, invoke
// and apply events through a Session, and results compare as RFC 8785
// canonical JSON after the fixture's volatile keys are scrubbed. Used by
// the conformance replay and by edge-mcp interceptors test.
package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Fixture is one conformance fixture (schema/fixture.schema.json).
type Fixture struct {
	ID           string        `json:"id"`
	Kind         string        `json:"kind"`
	Requirement  string        `json:"requirement"`
	Description  string        `json:"description"`
	Interceptors []Interceptor `json:"interceptors"`
	Steps        []Step        `json:"steps"`
	Volatile     []string      `json:"volatile"`
}

type Interceptor struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Behavior string   `json:"behavior"`
	Events   []string `json:"events"`
	Phases   string   `json:"phases"`
	Mode     string   `json:"mode"`
	FailOpen bool     `json:"failOpen"`
}

type Step struct {
	Op      string          `json:"op"`
	Event   *string         `json:"event"`
	Phase   string          `json:"phase"`
	Params  json.RawMessage `json:"params"`
	Payload json.RawMessage `json:"payload"`
	Context *struct {
		SessionID string `json:"sessionId"`
	} `json:"context"`
	Expect Expect `json:"expect"`
}

type Expect struct {
	Canonical             *string  `json:"canonical"`
	ErrorCode             *int64   `json:"errorCode"`
	Decision              string   `json:"decision"`
	FinalPayloadCanonical *string  `json:"finalPayloadCanonical"`
	Forbids               []string `json:"forbids"`
	Requires              []string `json:"requires"`
}

// The schema's id pattern, with underscores allowed (SOURCE.md: six
// upstream ids have them).
var fixtureID = regexp.MustCompile(`^(protocol|behavior)/[a-z0-9_-]+$`)

// Parse reads and checks one fixture.
func Parse(b []byte) (*Fixture, error) {
	var f Fixture
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}
	if !fixtureID.MatchString(f.ID) {
		return nil, fmt.Errorf("fixture id %q does not match %s", f.ID, fixtureID)
	}
	if len(f.Steps) == 0 {
		return nil, fmt.Errorf("fixture %s has no steps", f.ID)
	}
	for i, s := range f.Steps {
		switch s.Op {
		case "list":
			if s.Expect.Canonical == nil {
				return nil, fmt.Errorf("fixture %s step %d: list without expect.canonical", f.ID, i+1)
			}
		case "invoke":
			if len(s.Params) == 0 || (s.Expect.Canonical == nil) == (s.Expect.ErrorCode == nil) {
				return nil, fmt.Errorf("fixture %s step %d: invoke needs params and one of expect.canonical, expect.errorCode", f.ID, i+1)
			}
		case "apply":
			if s.Event == nil || s.Expect.Decision != "allow" && s.Expect.Decision != "deny" {
				return nil, fmt.Errorf("fixture %s step %d: apply needs an event and a decision", f.ID, i+1)
			}
		default:
			return nil, fmt.Errorf("fixture %s step %d: unknown op %q", f.ID, i+1, s.Op)
		}
	}
	return &f, nil
}

// Load reads every fixture under dir/fixtures, sorted by id.
func Load(dir string) ([]*Fixture, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "fixtures", "*", "*.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no fixtures under %s", filepath.Join(dir, "fixtures"))
	}
	var out []*Fixture
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		f, err := Parse(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *Fixture) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Session is the adapter contract of ADAPTER.md over one set of
// interceptors.
type Session interface {
	List(ctx context.Context, event string) (json.RawMessage, error)
	// Invoke returns the result or, for a JSON-RPC error, its code.
	Invoke(ctx context.Context, params json.RawMessage) (json.RawMessage, int64, error)
	Apply(ctx context.Context, event, phase string, payload json.RawMessage, sessionID string) (allow bool, final json.RawMessage, err error)
	Close()
}

// Host creates sessions: in process or out of process.
type Host interface {
	NewSession(ctx context.Context, ics []Interceptor) (Session, error)
}

// Replay runs one fixture and returns nil when every step passes.
func Replay(ctx context.Context, h Host, f *Fixture) error {
	s, err := h.NewSession(ctx, f.Interceptors)
	if err != nil {
		return fmt.Errorf("creating the session: %w", err)
	}
	defer s.Close()
	for i, st := range f.Steps {
		if err := runStep(ctx, s, f, st); err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, st.Op, err)
		}
	}
	return nil
}

func runStep(ctx context.Context, s Session, f *Fixture, st Step) error {
	switch st.Op {
	case "list":
		ev := ""
		if st.Event != nil {
			ev = *st.Event
		}
		res, err := s.List(ctx, ev)
		if err != nil {
			return err
		}
		return compare(res, f.Volatile, *st.Expect.Canonical)
	case "invoke":
		res, code, err := s.Invoke(ctx, st.Params)
		if err != nil {
			return err
		}
		if st.Expect.ErrorCode != nil {
			if code != *st.Expect.ErrorCode {
				return fmt.Errorf("want JSON-RPC error %d, got code %d result %s", *st.Expect.ErrorCode, code, res)
			}
			return nil
		}
		if code != 0 {
			return fmt.Errorf("want a result, got JSON-RPC error %d", code)
		}
		return compare(res, f.Volatile, *st.Expect.Canonical)
	}
	sid := ""
	if st.Context != nil {
		sid = st.Context.SessionID
	}
	allow, final, err := s.Apply(ctx, *st.Event, st.Phase, st.Payload, sid)
	if err != nil {
		return err
	}
	if got := map[bool]string{true: "allow", false: "deny"}[allow]; got != st.Expect.Decision {
		return fmt.Errorf("decision %s, want %s", got, st.Expect.Decision)
	}
	if !allow {
		return nil
	}
	return checkPayload(final, st.Expect)
}

func checkPayload(final json.RawMessage, e Expect) error {
	if e.FinalPayloadCanonical == nil && len(e.Forbids) == 0 && len(e.Requires) == 0 {
		return nil
	}
	got, err := Canonical(final)
	if err != nil {
		return err
	}
	if e.FinalPayloadCanonical != nil && got != *e.FinalPayloadCanonical {
		return fmt.Errorf("final payload %s, want %s", got, *e.FinalPayloadCanonical)
	}
	for _, s := range e.Forbids {
		if strings.Contains(got, s) {
			return fmt.Errorf("final payload %s contains %q", got, s)
		}
	}
	for _, s := range e.Requires {
		if !strings.Contains(got, s) {
			return fmt.Errorf("final payload %s lacks %q", got, s)
		}
	}
	return nil
}

func compare(actual json.RawMessage, volatile []string, want string) error {
	scrubbed, err := Scrub(actual, volatile)
	if err != nil {
		return fmt.Errorf("result %.200s: %w", actual, err)
	}
	got, err := Canonical(scrubbed)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("got  %s\nwant %s", got, want)
	}
	return nil
}

// Report is the outcome of a replay of every fixture.
type Report struct {
	Lines          []string
	Passed, Failed int
}

// ReplayAll replays every fixture, one line each.
func ReplayAll(ctx context.Context, h Host, fixtures []*Fixture) Report {
	var r Report
	for _, f := range fixtures {
		if err := Replay(ctx, h, f); err != nil {
			r.Failed++
			r.Lines = append(r.Lines, fmt.Sprintf("FAIL %s: %v", f.ID, err))
			continue
		}
		r.Passed++
		r.Lines = append(r.Lines, "ok   "+f.ID)
	}
	r.Lines = append(r.Lines, fmt.Sprintf("%d passed, %d failed", r.Passed, r.Failed))
	return r
}
