package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"

	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// This file is where the gateway keeps its persistent state (stateDir);
// its observers (metrics, audit log, traces, validator, pins) are opened
// by runtime/observe.

// stateDir is the folder of the persistent state of cfg (module store and
// attachments, tool pins, OAuth tokens): admin.state_dir
// when the config sets it; else a folder of its own under the command
// line's (Options.StateDir), derived from the config file's path, so that
// two configs never share pins; else "" (state kept in memory), which is
// what a built-in config (the demo, Path "") gets.
func (g *Gateway) stateDir(cfg *config.Config) string {
	if cfg.Admin.StateDir != "" {
		return cfg.Admin.StateDir
	}
	if g.opts.StateDir == "" || cfg.Path == "" {
		return ""
	}
	return ConfigStateDir(g.opts.StateDir, cfg.Path)
}

// StateDir is the folder of the running config's persistent state (module
// store, attachments, tool pins, OAuth tokens), "" when it is kept in
// memory.
func (g *Gateway) StateDir() string { return g.stateDir(g.config()) }

// ConfigStateDir is the state folder of the config file at configPath
// under base: <base>/<base name of the file, without extension, sanitized>-
// <first 12 hex digits of the SHA-256 of its absolute path>. Two files of
// the same name in different folders get different folders; the same file
// always gets the same one.
func ConfigStateDir(base, configPath string) string {
	abs, err := filepath.Abs(configPath)
	if err != nil {
		abs = filepath.Clean(configPath)
	}
	name := strings.TrimSuffix(filepath.Base(abs), filepath.Ext(abs))
	clean := []byte(name)
	for i, c := range clean {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			clean[i] = '_'
		}
	}
	if len(clean) > 40 {
		clean = clean[:40]
	}
	if len(clean) == 0 {
		clean = []byte("config")
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(base, string(clean)+"-"+hex.EncodeToString(sum[:6]))
}
