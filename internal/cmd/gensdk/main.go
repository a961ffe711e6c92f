// Command gensdk copies the Go policy SDK (guest/, without its tests and
// test data) into internal/modkit/_sdk/guest, the copy that edge-mcp embeds
// and writes into every project 'edge-mcp module new' creates. It runs from
// go generate in internal/modkit; TestEmbeddedSDKIsGuest there fails when
// the copy differs from guest/.
//
//	go run ./internal/cmd/gensdk [-src guest] [-dst internal/modkit/_sdk/guest]
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/edge-mcp/edge-mcp/internal/modkit"
)

func main() {
	src := flag.String("src", "../../guest", "the SDK's sources")
	dst := flag.String("dst", "_sdk/guest", "where the copy goes (replaced)")
	flag.Parse()
	if err := copySDK(*src, *dst); err != nil {
		fmt.Fprintln(os.Stderr, "gensdk:", err)
		os.Exit(1)
	}
}

func copySDK(src, dst string) error {
	files, err := modkit.SDKFiles(os.DirFS(src))
	if err != nil {
		return fmt.Errorf("listing %s: %w", src, err)
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	for _, name := range files {
		data, err := fs.ReadFile(os.DirFS(src), name)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(out, data, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("gensdk: %d files of %s copied to %s\n", len(files), src, dst)
	return nil
}
