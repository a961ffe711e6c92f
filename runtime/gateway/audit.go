package gateway

import (
	"context"
	"log/slog"

	"github.com/edge-mcp/edge-mcp/internal/audit"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
)

// AuditAdmin is the audit record of one admin change: what, which digest,
// when and by which admin identity.
type AuditAdmin = admin.Record

// audit records an audit record: in the audit log when one is configured,
// and always in the gateway's log.
func (g *Gateway) audit(rec AuditAdmin) {
	g.log.LogAttrs(context.Background(), slog.LevelInfo, "audit", slog.String("action", rec.Action),
		slog.String("identity", rec.Identity), slog.String("target", rec.Target), slog.String("digest", rec.Digest),
		slog.String("detail", rec.Detail))
	g.tailAdmin(rec)
	if g.auditLog != nil {
		g.auditLog.AdminChange(audit.AdminChange{Time: rec.Time, Identity: rec.Identity, Action: rec.Action,
			Target: rec.Target, Digest: rec.Digest, Detail: rec.Detail})
	}
	if g.opts.AuditHook != nil {
		g.opts.AuditHook(rec)
	}
}
