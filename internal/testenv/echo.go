package testenv

import (
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"
)

// echoServerPkg is this module's tiny echo server (one tool, echo).
const echoServerPkg = "github.com/edge-mcp/edge-mcp/internal/cmd/echoserver"

// EchoServer builds internal/cmd/echoserver into <repo>/.tools/bin and
// returns its path: a go-sdk MCP server with one tool, echo, over
// streamable HTTP (-http ADDR) or stdio (-stdio, -pidfile FILE).
func EchoServer(t testing.TB) string {
	t.Helper()
	return buildBinary(t, "echoserver", echoServerPkg, true)
}

// Upstream is an echo server process on a fixed address, which a test can
// kill and start again on the same address.
type Upstream struct {
	Addr string // host:port
	bin  string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartEchoUpstream starts the echo server on a free port of 127.0.0.1
// and returns once it listens; it is killed when the test ends.
func StartEchoUpstream(t testing.TB) *Upstream {
	t.Helper()
	u := &Upstream{Addr: fmt.Sprintf("127.0.0.1:%d", FreePort(t)), bin: EchoServer(t)}
	if err := u.Start(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(u.Kill)
	return u
}

// URL is the server's MCP endpoint.
func (u *Upstream) URL() string { return "http://" + u.Addr + "/mcp" }

// Start starts the server (again) and returns once it accepts
// connections, within 10 s.
func (u *Upstream) Start() error {
	u.cmd = exec.Command(u.bin, "-http", u.Addr)
	if err := u.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", u.bin, err)
	}
	done := make(chan struct{})
	u.done = done
	go func(c *exec.Cmd) { c.Wait(); close(done) }(u.cmd)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", u.Addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("the echo server on %s exited at start", u.Addr)
		default:
		}
		if time.Now().After(deadline) {
			u.Kill()
			return fmt.Errorf("the echo server does not listen on %s: %w", u.Addr, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Kill kills the server (SIGKILL) and waits for it to exit.
func (u *Upstream) Kill() {
	if u.cmd == nil || u.cmd.Process == nil {
		return
	}
	u.cmd.Process.Kill()
	<-u.done
	u.cmd = nil
}
