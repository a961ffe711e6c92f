package config

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
)

// StateDirUnder is the folder of the persistent state of c (module store
// and attachments, tool pins, OAuth tokens) for a command line whose
// state folder is base: admin.state_dir when c sets it; else a folder of
// its own under base, derived from c's path (StateDir), so that two
// configs never share pins; else "" (state kept in memory), which is what
// a built-in config (the demo, Path "") gets.
func (c *Config) StateDirUnder(base string) string {
	if c.Admin.StateDir != "" {
		return c.Admin.StateDir
	}
	if base == "" || c.Path == "" {
		return ""
	}
	return StateDir(base, c.Path)
}

// StateDir is the state folder of the config file at configPath under
// base: <base>/<base name of the file, without extension, sanitized>-
// <first 12 hex digits of the SHA-256 of its absolute path>. Two files of
// the same name in different folders get different folders; the same file
// always gets the same one.
func StateDir(base, configPath string) string {
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
