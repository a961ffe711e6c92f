package gateway

import (
	"github.com/edge-mcp/edge-mcp/runtime/config"
	"github.com/edge-mcp/edge-mcp/runtime/demo"
)

// DemoConfig is the configuration edge-mcp starts with when it is given
// none: the two in-process servers of package demo, so a client that
// connects sees aggregated tools at once. The returned Options carry their
// transports.
func DemoConfig(listen string) (*config.Config, Options) {
	cfg, ts := demo.Config(listen, Version)
	return cfg, Options{Transports: ts}
}
