// Package spec is a policy attachment as operators write it: the Spec the
// configuration file, the admin API and the fleet's control record carry,
// and its checks. It is a leaf (the standard library only), so that the config loader can decode and check attachments
// without linking the Wasm runtime; package policy loads what a Spec names
// (policy.Spec is this type).
package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Spec is the configuration of one attachment as operators write it:
//
//	{"name":"redact","module":"/etc/edge-mcp/redact.wasm","tools":["*"],
//	 "servers":["github"],"config":{...},"on_error":"deny",
//	 "timeout_ms":50,"memory_mb":64,"mode":"enforce"}
type Spec struct {
	Name      string          `json:"name"`
	Module    string          `json:"module"`
	Tools     []string        `json:"tools,omitempty"`
	Servers   []string        `json:"servers,omitempty"`
	Config    json.RawMessage `json:"config,omitempty"`
	OnError   string          `json:"on_error,omitempty"`
	TimeoutMS int             `json:"timeout_ms,omitempty"`
	MemoryMB  int             `json:"memory_mb,omitempty"`
	PoolSize  int             `json:"pool_size,omitempty"`
	// Grants lists optional capabilities: "clock".
	Grants []string `json:"grants,omitempty"`
	// AllowedHosts are the hosts an Extism plugin may reach with
	// http_request: globs on the host name ("api.example.com",
	// "*.example.com"), or on host:port when they have a colon.
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
	// Mode is "enforce" (the default) or "shadow".
	Mode string `json:"mode,omitempty"`
}

// Attachment modes of Spec.Mode.
const (
	ModeEnforce = "enforce"
	ModeShadow  = "shadow"
)

// The bounds of a module's memory and instance pool.
const (
	// MinMemoryMB: a Go guest needs about 37 pages (2.3 MiB) to start.
	MinMemoryMB = 4
	MaxMemoryMB = 4096
	MaxPoolSize = 1024
	// MaxTimeoutMS bounds timeout_ms.
	MaxTimeoutMS = 60_000
	// MaxGlob bounds one glob of tools or servers.
	MaxGlob = 512
)

// Validate checks a spec without loading its module.
func (s *Spec) Validate() error {
	if s.Name == "" {
		return errors.New("policy: name is required")
	}
	if s.Module == "" {
		return fmt.Errorf("policy %q: module (path to a .wasm file) is required", s.Name)
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("policy %q: %w", s.Name, err)
	}
	return nil
}

func (s *Spec) check() error {
	if s.OnError != "" && s.OnError != "deny" && s.OnError != "allow" {
		return fmt.Errorf("on_error %q: want \"deny\" or \"allow\"", s.OnError)
	}
	if s.Mode != "" && s.Mode != ModeEnforce && s.Mode != ModeShadow {
		return fmt.Errorf("mode %q: want %q or %q", s.Mode, ModeEnforce, ModeShadow)
	}
	if s.TimeoutMS < 0 || s.TimeoutMS > MaxTimeoutMS {
		return fmt.Errorf("timeout_ms %d out of range [0, %d]", s.TimeoutMS, MaxTimeoutMS)
	}
	if _, err := s.Clock(); err != nil {
		return err
	}
	if s.MemoryMB != 0 && (s.MemoryMB < MinMemoryMB || s.MemoryMB > MaxMemoryMB) {
		return fmt.Errorf("memory_mb %d out of range [%d, %d]", s.MemoryMB, MinMemoryMB, MaxMemoryMB)
	}
	if s.PoolSize < 0 || s.PoolSize > MaxPoolSize {
		return fmt.Errorf("pool size %d out of range [1, %d]", s.PoolSize, MaxPoolSize)
	}
	if c := bytes.TrimSpace(s.Config); len(c) > 0 && (c[0] != '{' || !json.Valid(c)) {
		return errors.New("config must be a JSON object")
	}
	if err := checkGlobs("tools", s.Tools); err != nil {
		return err
	}
	for _, h := range s.AllowedHosts {
		if h == "" || len(h) > 255 || strings.ContainsAny(h, "/@ ") {
			return fmt.Errorf("allowed_hosts: %q is not a host name glob (no scheme, path or user)", h)
		}
	}
	return checkGlobs("servers", s.Servers)
}

// Clock reports whether the spec grants the real clock, the one grant
// there is; any other grant is an error.
func (s *Spec) Clock() (bool, error) {
	clock := false
	for _, g := range s.Grants {
		if strings.ToLower(g) != "clock" {
			return false, fmt.Errorf("unknown grant %q (known: clock)", g)
		}
		clock = true
	}
	return clock, nil
}

func checkGlobs(field string, patterns []string) error {
	for _, p := range patterns {
		if p == "" {
			return fmt.Errorf("%s: empty glob", field)
		}
		if len(p) > MaxGlob {
			return fmt.Errorf("%s: glob longer than %d bytes", field, MaxGlob)
		}
	}
	return nil
}
