package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/edge-mcp/edge-mcp/internal/modkit"
)

// moduleNewFlags defines edge-mcp module new: a starter policy project
// written from what the binary embeds (internal/modkit).
func moduleNewFlags(fs *flag.FlagSet) runFunc {
	lang := fs.String("lang", "go", "language of the project: "+strings.Join(modkit.Langs, ", ")+" (rust, c and as: a kit of guest/kits instead of the Go SDK)")
	dir := fs.String("dir", "", "folder to write (default: ./NAME); must not exist or be empty")
	return func(_ context.Context, args []string, s streams) error {
		return moduleNew(args[0], *dir, *lang, s.stdout)
	}
}

func moduleNew(name, dir, lang string, stdout io.Writer) error {
	if dir == "" {
		dir = name
	}
	p, err := modkit.New(dir, name, lang, currentVersion())
	if err != nil {
		return fmt.Errorf("module new: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s/ (%d files; the policy SDK is in %s/%s)\n", p.Dir, len(p.Files), p.Dir, p.SDK)
	fmt.Fprintf(stdout, "next:\n  cd %s\n  %s\n", p.Dir, p.Build)
	fmt.Fprintf(stdout, "  edge-mcp policy test %s --vectors vectors.json\n", p.Wasm)
	fmt.Fprintf(stdout, "  edge-mcp policy test %s --input testdata/tool_call.json\n", p.Wasm)
	fmt.Fprintf(stdout, "  edge-mcp module push %s --vectors vectors.json\n", p.Wasm)
	fmt.Fprintf(stdout, "  edge-mcp policy attach %s --module %s --shadow\n", name, name)
	fmt.Fprintln(stdout, "the walk-through: https://github.com/edge-mcp/edge-mcp/blob/main/docs/first-policy.md")
	return nil
}
