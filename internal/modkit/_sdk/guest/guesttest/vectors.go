package guesttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// Vector is one test vector of a module's vectors.json (the format of
// `edge-mcp module push --vectors` and `edge-mcp policy test --vectors`).
type Vector struct {
	Name   string          `json:"name"`
	Hook   string          `json:"hook"`
	Input  json.RawMessage `json:"input"`
	Expect struct {
		Action    string          `json:"action"`
		Reason    string          `json:"reason"`
		Arguments json.RawMessage `json:"arguments"`
		Server    string          `json:"server"`
		Tool      string          `json:"tool"`
		Result    json.RawMessage `json:"result"`
		Tools     []string        `json:"tools"`
		Error     bool            `json:"error"`
	} `json:"expect"`
}

// RunVectors runs every vector of a vectors.json file against the
// registered handlers, natively, one subtest per vector.
func RunVectors(t *testing.T, file string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var vs []Vector
	if err := dec.Decode(&vs); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			if err := Check(v); err != nil {
				t.Error(err)
			}
		})
	}
}

// Check runs one vector and reports how the answer differs from what it
// expects (nil: it passes). It checks what policy.Module.RunVectors checks,
// natively.
func Check(v Vector) error {
	out, err := Call(v.Hook, string(v.Input))
	e := v.Expect
	if err != nil {
		return err
	}
	if e.Error {
		if out.Error == "" || !strings.Contains(out.Error, e.Reason) {
			return fmt.Errorf("expected an error containing %q, got %s", e.Reason, out.Raw)
		}
		return nil
	}
	if out.Error != "" {
		return fmt.Errorf("expected the hook to succeed, got the error %q", out.Error)
	}
	var in map[string]json.RawMessage
	json.Unmarshal(v.Input, &in)
	var diffs []string
	action := out.Action
	if action == "rewrite" {
		action = "allow"
	}
	if e.Action != "" && e.Action != action {
		diffs = append(diffs, fmt.Sprintf("action: expected %q, got %q", e.Action, action))
	}
	if e.Reason != "" && (action != "deny" || !strings.Contains(out.Reason, e.Reason)) {
		diffs = append(diffs, fmt.Sprintf("reason: expected a deny reason containing %q, got %q", e.Reason, out.Reason))
	}
	if e.Arguments != nil {
		got := out.Arguments
		if got == nil {
			got = in["arguments"]
		}
		if !jsonEqual(e.Arguments, got) {
			diffs = append(diffs, fmt.Sprintf("arguments: expected %s, got %s", e.Arguments, got))
		}
	}
	if e.Server != "" && (action != "route" || out.Server != e.Server) {
		diffs = append(diffs, fmt.Sprintf("server: expected a route to %q, got %q", e.Server, out.Server))
	}
	if e.Tool != "" && action == "route" && out.Tool != "" && out.Tool != e.Tool {
		diffs = append(diffs, fmt.Sprintf("tool: expected %q, got %q", e.Tool, out.Tool))
	}
	if e.Result != nil {
		got := out.Result
		if got == nil {
			got = in["result"]
		}
		if !jsonEqual(e.Result, got) {
			diffs = append(diffs, fmt.Sprintf("result: expected %s, got %s", e.Result, got))
		}
	}
	if e.Tools != nil {
		if got := shown(in["tools"], out.Tools); !slices.Equal(got, e.Tools) {
			diffs = append(diffs, fmt.Sprintf("tools: expected %q, got %q", e.Tools, got))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%s (output %s)", strings.Join(diffs, "; "), out.Raw)
	}
	return nil
}

// shown returns the names the client sees after the edits: hidden tools
// gone, renamed ones under their new name.
func shown(tools json.RawMessage, edits []Edit) []string {
	var entries []struct{ Server, Name string }
	json.Unmarshal(tools, &entries)
	names := []string{}
	for _, en := range entries {
		name, hidden := en.Name, false
		for _, ed := range edits {
			if ed.Server == en.Server && ed.Name == en.Name {
				hidden = hidden || ed.Hide
				if ed.Rename != "" {
					name = ed.Rename
				}
			}
		}
		if !hidden {
			names = append(names, name)
		}
	}
	return names
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
