package abi

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

func TestHookNames(t *testing.T) {
	seen := map[string]bool{}
	for h := 0; h < NumHooks; h++ {
		name := HookName(h)
		if name == "" || seen[name] {
			t.Errorf("hook %d has name %q (empty or repeated)", h, name)
		}
		seen[name] = true
	}
	if HookName(NumHooks) != "" || HookName(-1) != "" {
		t.Error("HookName names a hook outside the ABI")
	}
	if got := HookExport(HookToolCall); got != "edge_hook_tool_call" {
		t.Errorf("HookExport(HookToolCall) = %q", got)
	}
}

// TestGuestExports checks the one copy Go cannot avoid: //go:wasmexport
// directives take literal names, so the guest SDK spells every export out.
// They must be exactly the exports this package names.
func TestGuestExports(t *testing.T) {
	var src []byte
	for _, f := range []string{"../abi.go", "../intercept.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("reading the guest SDK's exports: %v", err)
		}
		src = append(src, b...)
	}
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^//go:wasmexport (\S+)$`).FindAllSubmatch(src, -1) {
		got = append(got, string(m[1]))
	}
	want := []string{ExportVersion, ExportHooks, ExportAlloc, ExportConfigure}
	for h := 0; h < NumHooks; h++ {
		want = append(want, HookExport(h))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("guest/abi.go and guest/intercept.go export %q, want %q", got, want)
	}
}
