package main

import (
	"testing"

	"github.com/edge-mcp/edge-mcp/guest/guesttest"
)

// The module's vectors, run natively on its handlers (init registered
// them): the same file the built module passes under
// edge-mcp policy test --vectors, and the Rust, C and AssemblyScript ports.
func TestVectorsNatively(t *testing.T) {
	guesttest.RunVectors(t, "vectors.json")
}

func TestConfigRefusesUnknownKeys(t *testing.T) {
	t.Cleanup(func() { guesttest.Configure(`{}`) })
	if err := guesttest.Configure(`{"no_such_option":true}`); err == nil {
		t.Fatal("an unknown key was accepted")
	}
	if err := guesttest.Configure(`{"replacement":"<{kind}>"}`); err != nil {
		t.Fatal(err)
	}
	out, err := guesttest.Call("tool_call", `{"server":"s","tool":"t","arguments":{"k":"mail a@example.com"}}`)
	if err != nil || string(out.Arguments) != `{"k":"mail <email>"}` {
		t.Fatalf("%v %+v", err, out)
	}
}
