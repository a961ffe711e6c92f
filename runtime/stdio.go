package gateway

import (
	"context"
	"os"
	"os/exec"

	"github.com/edge-mcp/edge-mcp/transports"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// commandTransport starts a fresh child process for every connection, so a
// crashed stdio server is restarted by the upstream's reconnect loop.
type commandTransport struct{ cfg ServerConfig }

func newCommandTransport(sc ServerConfig) mcp.Transport { return commandTransport{sc} }

// Connect starts the configured command.
func (t commandTransport) Connect(ctx context.Context) (transports.Connection, error) {
	cmd := exec.Command(t.cfg.Command, t.cfg.Args...)
	cmd.Dir = t.cfg.Cwd
	cmd.Env = os.Environ()
	for k, v := range t.cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return (&mcp.CommandTransport{Command: cmd}).Connect(ctx)
}
