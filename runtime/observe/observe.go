// Package observe sets up what the gateway shows operators (observers):
// Prometheus metrics, the audit log, OpenTelemetry traces; and the
// argument validator and the tool pins. They are opened once when a
// gateway is made and live as long as it: the gateway keeps each in a
// field of its own and calls Close (audit log and traces flushed) when it
// closes. Each observer is safe for concurrent use.
package observe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/audit"
	"github.com/edge-mcp/edge-mcp/internal/budget"
	"github.com/edge-mcp/edge-mcp/internal/metrics"
	"github.com/edge-mcp/edge-mcp/internal/pinning"
	"github.com/edge-mcp/edge-mcp/internal/schema"
	"github.com/edge-mcp/edge-mcp/internal/telemetry"
	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// Observers are what the gateway shows operators (metrics, audit log,
// traces), and the argument validator and tool pins; they live as long as
// the process.
type Observers struct {
	Metrics   *metrics.Metrics  // nil: metrics off
	AuditLog  *audit.Logger     // nil: no audit log
	Tracer    *telemetry.Tracer // nil: tracing off
	Validator *schema.Validator
	Pins      *pinning.Store // nil: pinning off
}

// Open starts the observers of a new gateway: clientMem reports
// the client-memory budget, stateDir holds the pins ("": in memory).
func Open(cfg *config.Config, log *slog.Logger, clientMem func() *budget.Stats, stateDir string) (o Observers, err error) {
	if m := cfg.Observability.Metrics; m == nil || *m {
		o.Metrics = metrics.New()
		o.Metrics.ClientMemory(clientMem)
	}
	if cfg.Audit.Path != "" {
		o.AuditLog, err = audit.Open(audit.Config{Path: cfg.Audit.Path, MaxSizeMB: cfg.Audit.MaxSizeMB, MaxBackups: cfg.Audit.MaxBackups,
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
		if o.Tracer, err = telemetry.Setup(ctx, tc); err != nil {
			o.Close()
			return o, &config.Error{File: cfg.Path, Key: "telemetry", Reason: err.Error()}
		}
	}
	o.Validator = schema.NewValidator(0)
	if cfg.Pinning.Mode != "off" {
		path := ""
		if stateDir != "" {
			if err := os.MkdirAll(stateDir, 0o700); err != nil {
				o.Close()
				return o, fmt.Errorf("creating the state folder of the tool pins: %w", err)
			}
			path = filepath.Join(stateDir, "pins.json")
		}
		if o.Pins, err = pinning.Open(path); err != nil {
			o.Close()
			return o, fmt.Errorf("opening the tool pins: %w", err)
		}
	}
	return o, nil
}

// Close flushes the audit log and the traces.
func (o Observers) Close() error {
	var err error
	if o.AuditLog != nil {
		err = o.AuditLog.Close()
	}
	if o.Tracer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = errors.Join(err, o.Tracer.Shutdown(ctx))
	}
	return err
}
