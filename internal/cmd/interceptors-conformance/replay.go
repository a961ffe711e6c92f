package main

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

// fixture is one conformance fixture (schema/fixture.schema.json).
type fixture struct {
	ID           string               `json:"id"`
	Kind         string               `json:"kind"`
	Requirement  string               `json:"requirement"`
	Description  string               `json:"description"`
	Interceptors []fixtureInterceptor `json:"interceptors"`
	Steps        []step               `json:"steps"`
	Volatile     []string             `json:"volatile"`
}

type fixtureInterceptor struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Behavior string   `json:"behavior"`
	Events   []string `json:"events"`
	Phases   string   `json:"phases"`
	Mode     string   `json:"mode"`
	FailOpen bool     `json:"failOpen"`
}

type step struct {
	Op      string          `json:"op"`
	Event   *string         `json:"event"`
	Phase   string          `json:"phase"`
	Params  json.RawMessage `json:"params"`
	Payload json.RawMessage `json:"payload"`
	Context *struct {
		SessionID string `json:"sessionId"`
	} `json:"context"`
	Expect expect `json:"expect"`
}

type expect struct {
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

// parseFixture reads and checks one fixture.
func parseFixture(b []byte) (*fixture, error) {
	var f fixture
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

// loadFixtures reads every fixture under dir/fixtures, sorted by id.
func loadFixtures(dir string) ([]*fixture, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "fixtures", "*", "*.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no fixtures under %s", filepath.Join(dir, "fixtures"))
	}
	var out []*fixture
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		f, err := parseFixture(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *fixture) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// session is the adapter contract of ADAPTER.md over one set of
// interceptors.
type session interface {
	list(ctx context.Context, event string) (json.RawMessage, error)
	// invoke returns the result or, for a JSON-RPC error, its code.
	invoke(ctx context.Context, params json.RawMessage) (json.RawMessage, int64, error)
	apply(ctx context.Context, event, phase string, payload json.RawMessage, sessionID string) (allow bool, final json.RawMessage, err error)
	close()
}

// host creates sessions: in process or out of process.
type host interface {
	newSession(ctx context.Context, ics []fixtureInterceptor) (session, error)
}

// replay runs one fixture and returns nil when every step passes.
func replay(ctx context.Context, h host, f *fixture) error {
	s, err := h.newSession(ctx, f.Interceptors)
	if err != nil {
		return fmt.Errorf("creating the session: %w", err)
	}
	defer s.close()
	for i, st := range f.Steps {
		if err := runStep(ctx, s, f, st); err != nil {
			return fmt.Errorf("step %d (%s): %w", i+1, st.Op, err)
		}
	}
	return nil
}

func runStep(ctx context.Context, s session, f *fixture, st step) error {
	switch st.Op {
	case "list":
		ev := ""
		if st.Event != nil {
			ev = *st.Event
		}
		res, err := s.list(ctx, ev)
		if err != nil {
			return err
		}
		return compare(res, f.Volatile, *st.Expect.Canonical)
	case "invoke":
		res, code, err := s.invoke(ctx, st.Params)
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
	allow, final, err := s.apply(ctx, *st.Event, st.Phase, st.Payload, sid)
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

func checkPayload(final json.RawMessage, e expect) error {
	if e.FinalPayloadCanonical == nil && len(e.Forbids) == 0 && len(e.Requires) == 0 {
		return nil
	}
	got, err := canonical(final)
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
	scrubbed, err := scrub(actual, volatile)
	if err != nil {
		return fmt.Errorf("result %.200s: %w", actual, err)
	}
	got, err := canonical(scrubbed)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("got  %s\nwant %s", got, want)
	}
	return nil
}

// Report is the outcome of a replay of every fixture.
type report struct {
	lines          []string
	passed, failed int
}

// replayAll replays every fixture, one line each.
func replayAll(ctx context.Context, h host, fixtures []*fixture) report {
	var r report
	for _, f := range fixtures {
		if err := replay(ctx, h, f); err != nil {
			r.failed++
			r.lines = append(r.lines, fmt.Sprintf("FAIL %s: %v", f.ID, err))
			continue
		}
		r.passed++
		r.lines = append(r.lines, "ok   "+f.ID)
	}
	r.lines = append(r.lines, fmt.Sprintf("%d passed, %d failed", r.passed, r.failed))
	return r
}
