package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edge-mcp/edge-mcp/runtime/config"

	"github.com/edge-mcp/edge-mcp/internal/audit"
	"github.com/edge-mcp/edge-mcp/internal/budget"
	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/internal/pinning"
	"github.com/edge-mcp/edge-mcp/internal/schema"
	"github.com/edge-mcp/edge-mcp/internal/telemetry"
)

// This file sets up what the gateway shows operators (observers):
// Prometheus metrics, the audit log, OpenTelemetry traces; and the argument
// validator and the tool pins, which live as long as the process.

// observers are what the gateway shows operators (metrics, audit log,
// traces), and the argument validator and tool pins; they live as long as
// the process.
type observers struct {
	metrics   *metrics.Metrics  // nil: metrics off
	auditLog  *audit.Logger     // nil: no audit log
	tracer    *telemetry.Tracer // nil: tracing off
	validator *schema.Validator
	pins      *pinning.Store // nil: pinning off
}

// openObservers starts the observers of a new gateway: clientMem reports
// the client-memory budget, stateDir holds the pins ("": in memory).
func openObservers(cfg *config.Config, log *slog.Logger, clientMem func() *budget.Stats, stateDir string) (o observers, err error) {
	if m := cfg.Observability.Metrics; m == nil || *m {
		o.metrics = metrics.New()
		o.metrics.ClientMemory(clientMem)
	}
	if cfg.Audit.Path != "" {
		o.auditLog, err = audit.Open(audit.Config{Path: cfg.Audit.Path, MaxSizeMB: cfg.Audit.MaxSizeMB, MaxBackups: cfg.Audit.MaxBackups,
			MaxAgeDays: cfg.Audit.MaxAgeDays, Compress: cfg.Audit.Compress, IncludeArguments: cfg.Audit.IncludeArguments, Log: log})
		if err != nil {
			return o, &config.Error{File: cfg.Path, Key: "audit.path", Reason: err.Error()}
		}
	}
	t := cfg.Telemetry
	tc := telemetry.Config{Endpoint: t.OTLPEndpoint, ServiceName: t.ServiceName, Headers: t.Headers, Insecure: t.Insecure, Logger: log}
	if t.SampleRatio != nil {
		tc.SampleRatio = *t.SampleRatio
	}
	// The standard OTEL_* variables fill in what the config leaves out.
	if tc = telemetry.FromEnv(tc); tc.Endpoint != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if o.tracer, err = telemetry.Setup(ctx, tc); err != nil {
			o.close()
			return o, &config.Error{File: cfg.Path, Key: "telemetry", Reason: err.Error()}
		}
	}
	o.validator = schema.NewValidator(0)
	if cfg.Pinning.Mode != "off" {
		path := ""
		if stateDir != "" {
			if err := os.MkdirAll(stateDir, 0o700); err != nil {
				o.close()
				return o, fmt.Errorf("creating the state folder of the tool pins: %w", err)
			}
			path = filepath.Join(stateDir, "pins.json")
		}
		if o.pins, err = pinning.Open(path); err != nil {
			o.close()
			return o, fmt.Errorf("opening the tool pins: %w", err)
		}
	}
	return o, nil
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

// close flushes the audit log and the traces.
func (o observers) close() error {
	var err error
	if o.auditLog != nil {
		err = o.auditLog.Close()
	}
	if o.tracer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = errors.Join(err, o.tracer.Shutdown(ctx))
	}
	return err
}
