// Command gensdk copies the Go policy SDK (guest/, without its tests and
// test data) into internal/modkit/_sdk/guest and the kits of the other
// languages (guest/kits) into internal/modkit/_kits: the copies that
// edge-mcp embeds and writes into the projects 'edge-mcp module new'
// creates. It runs from go generate in internal/modkit;
// TestEmbeddedSDKIsGuest and TestEmbeddedKitsAreGuestKits there fail when
// a copy differs from its original.
//
//	go run ./internal/cmd/gensdk [-src guest] [-dst internal/modkit/_sdk/guest] [-kits guest/kits -kits-dst internal/modkit/_kits]
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
	kits := flag.String("kits", "", "the kits' sources (guest/kits); empty: no kits")
	kitsDst := flag.String("kits-dst", "_kits", "where the kits' copy goes (replaced)")
	flag.Parse()
	err := copyTree(*src, *dst, modkit.SDKFiles)
	if err == nil && *kits != "" {
		err = copyTree(*kits, *kitsDst, modkit.KitFiles)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gensdk:", err)
		os.Exit(1)
	}
}

// copyTree replaces dst with the files of src that list picks.
func copyTree(src, dst string, list func(fs.FS) ([]string, error)) error {
	files, err := list(os.DirFS(src))
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
		mode := os.FileMode(0o644)
		if filepath.Ext(name) == ".sh" {
			mode = 0o755
		}
		if err := os.WriteFile(out, data, mode); err != nil {
			return err
		}
	}
	fmt.Printf("gensdk: %d files of %s copied to %s\n", len(files), src, dst)
	return nil
}
