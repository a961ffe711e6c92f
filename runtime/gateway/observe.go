package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/config"

	"github.com/edge-mcp/edge-mcp/internal/audit"
	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/internal/pinning"
	"github.com/edge-mcp/edge-mcp/internal/schema"
	"github.com/edge-mcp/edge-mcp/internal/telemetry"
)

// This file sets up what the gateway shows operators: Prometheus metrics,
// the audit log, OpenTelemetry traces; and the argument validator and the
// tool pins, which live as long as the process.

// openObservability starts metrics, audit log, tracing, the validator and
// the pin store of a new gateway.
func (g *Gateway) openObservability(cfg *config.Config) error {
	if m := cfg.Observability.Metrics; m == nil || *m {
		g.metrics = metrics.New()
		g.metrics.ClientMemory(g.clientMem.Stats)
	}
	var err error
	if cfg.Audit.Path != "" {
		g.auditLog, err = audit.Open(audit.Config{Path: cfg.Audit.Path, MaxSizeMB: cfg.Audit.MaxSizeMB, MaxBackups: cfg.Audit.MaxBackups,
			MaxAgeDays: cfg.Audit.MaxAgeDays, Compress: cfg.Audit.Compress, IncludeArguments: cfg.Audit.IncludeArguments, Log: g.log})
		if err != nil {
			return &config.Error{File: cfg.Path, Key: "audit.path", Reason: err.Error()}
		}
	}
	t := cfg.Telemetry
	tc := telemetry.Config{Endpoint: t.OTLPEndpoint, ServiceName: t.ServiceName, Headers: t.Headers, Insecure: t.Insecure, Logger: g.log}
	if t.SampleRatio != nil {
		tc.SampleRatio = *t.SampleRatio
	}
	// The standard OTEL_* variables fill in what the config leaves out.
	if tc = telemetry.FromEnv(tc); tc.Endpoint != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if g.tracer, err = telemetry.Setup(ctx, tc); err != nil {
			g.closeObservability()
			return &config.Error{File: cfg.Path, Key: "telemetry", Reason: err.Error()}
		}
	}
	g.validator = schema.NewValidator(0)
	if cfg.Pinning.Mode != "off" {
		path := ""
		if dir := g.stateDir(cfg); dir != "" {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				g.closeObservability()
				return fmt.Errorf("creating the state folder of the tool pins: %w", err)
			}
			path = filepath.Join(dir, "pins.json")
		}
		if g.pins, err = pinning.Open(path); err != nil {
			g.closeObservability()
			return fmt.Errorf("opening the tool pins: %w", err)
		}
	}
	return nil
}

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

// closeObservability flushes the audit log and the traces.
func (g *Gateway) closeObservability() error {
	var err error
	if g.auditLog != nil {
		err = g.auditLog.Close()
	}
	if g.tracer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = errors.Join(err, g.tracer.Shutdown(ctx))
	}
	return err
}
