package gateway

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
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
	}
	var err error
	if cfg.Audit.Path != "" {
		g.auditLog, err = audit.Open(audit.Config{Path: cfg.Audit.Path, MaxSizeMB: cfg.Audit.MaxSizeMB, MaxBackups: cfg.Audit.MaxBackups,
			MaxAgeDays: cfg.Audit.MaxAgeDays, Compress: cfg.Audit.Compress, IncludeArguments: cfg.Audit.IncludeArguments, Log: g.log})
		if err != nil {
			return &config.Error{File: cfg.Path, Key: "audit.path", Reason: err.Error()}
		}
	}
	if t := cfg.Telemetry; t.OTLPEndpoint != "" {
		tc := telemetry.Config{Endpoint: t.OTLPEndpoint, ServiceName: t.ServiceName, Headers: t.Headers, Insecure: t.Insecure}
		if t.SampleRatio != nil {
			tc.SampleRatio = *t.SampleRatio
		}
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
			path = filepath.Join(dir, "pins.json")
		}
		if g.pins, err = pinning.Open(path); err != nil {
			g.closeObservability()
			return fmt.Errorf("opening the tool pins: %w", err)
		}
	}
	return nil
}

// stateDir is the folder of persistent state: the config's, else the
// command line's.
func (g *Gateway) stateDir(cfg *config.Config) string {
	if cfg.Admin.StateDir != "" {
		return cfg.Admin.StateDir
	}
	return g.opts.StateDir
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
