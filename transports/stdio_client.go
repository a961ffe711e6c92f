package transports

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/edge-mcp/edge-mcp/internal/wire"
)

const (
	stdioDefaultMaxLine   = 64 << 20
	stdioDefaultKillGrace = 2 * time.Second
	// stdioReadBuf is the size of the stdout read buffer; longer lines are
	// assembled in a separate buffer.
	stdioReadBuf = 64 << 10
	// stdioMaxStderrLine caps the part of one stderr line that is logged.
	stdioMaxStderrLine = 4 << 10
	// stdioIncomingQueue is the capacity of the queue between the stdout
	// reader and Read.
	stdioIncomingQueue = 64
	// stdioExitWait is how long the end of stdout waits for the exit status
	// of the child, and how long the exit of the child waits for its pipes
	// to reach EOF (a grandchild may hold them) before they are closed.
	stdioExitWait = time.Second
	// stdioWriteBufKeep is the largest encode buffer kept between writes.
	stdioWriteBufKeep = 1 << 20
)

// CommandTransport starts an MCP server as a child process and talks to it
// over its stdin and stdout, one JSON-RPC message per line.
//
// The child runs in its own process group. Lines on its stdout that are not
// JSON-RPC messages (banners, debug prints) are dropped, logged at Debug
// and counted; its stderr lines are logged at Info with the server's name.
//
// Concurrency and lifetime: the transport must not be changed after the
// first Connect; each Connect starts its own child. On the connection,
// Write may be called concurrently (lines are written whole, one at a time)
// and Read must not be called concurrently with itself. The connection
// lives until Close or until the child exits: Close stops the child (see
// [CommandTransport.Connect]) and returns once it is reaped, making a
// pending Read return [ErrClosed]; when the child exits on its own, Read
// returns its remaining messages and then an error wrapping its exit
// status.
type CommandTransport struct {
	// Command is the program to run, looked up in PATH when it has no slash.
	Command string
	// Args are the program's arguments (without the program name).
	Args []string
	// Env is the child's full environment; nil means os.Environ().
	Env []string
	// Dir is the child's working directory; "" means the current one.
	Dir string
	// Logger receives the child's stderr and the transport's messages; nil
	// discards them.
	Logger *slog.Logger
	// Name identifies the server in logs and errors; "" means Command.
	Name string
	// MaxLineBytes caps one line of stdout; 0 means 64 MiB. A longer line
	// fails the connection.
	MaxLineBytes int
	// KillGrace is how long Close waits for the child to exit after closing
	// its stdin, and again after SIGTERM, before escalating; 0 means 2 s.
	KillGrace time.Duration
	// Budget, when not nil, is charged with the bytes of every stdout line
	// that carries a message, as a long line is assembled or before a
	// short one is copied, until Read returns the message. A line that
	// cannot get its bytes within a second is read on and discarded
	// without being kept; when it was a response, Read returns a local
	// error response (see [IsLocal]) naming the budget in its place. See
	// [ByteBudget] for what is not counted.
	Budget *ByteBudget
}

// CommandConnection is the Connection returned by
// [CommandTransport.Connect]; type-assert a Connection to it to read the
// child's status.
type CommandConnection interface {
	Connection
	// Pid returns the child's process id (also its process group id).
	Pid() int
	// DroppedLines returns how many stdout lines were dropped because they
	// were not JSON-RPC messages.
	DroppedLines() int64
}

var _ CommandConnection = (*stdioConn)(nil)

// Connect starts the child process. ctx is only checked before starting:
// the child lives until Close, or until it exits.
//
// Read returns the child's messages in order; once the child has exited
// and its stdout is drained, Read returns an error wrapping its exit status
// (and io.EOF when it exited with status 0). Write encodes one message per
// line and is serialized; it blocks while the child does not read its
// stdin. Close closes the child's stdin, waits KillGrace for it to exit,
// then sends SIGTERM to its process group, waits KillGrace again, then sends
// SIGKILL; it returns once the child has been reaped. Whenever the child
// exits, whatever is left of its process group is killed with SIGKILL.
func (t *CommandTransport) Connect(ctx context.Context) (Connection, error) {
	name := t.Name
	if name == "" {
		name = t.Command
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("starting stdio server %q: %w", name, err)
	}
	log := t.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("server_name", name)
	c := &stdioConn{
		name:    name,
		log:     log,
		maxLine: t.MaxLineBytes,
		grace:   t.KillGrace,
		budget:  t.Budget,
		in:      make(chan queued, stdioIncomingQueue),
		exited:  make(chan struct{}),
		closing: make(chan struct{}),
		outDone: make(chan struct{}),
		errDone: make(chan struct{}),
	}
	if c.maxLine <= 0 {
		c.maxLine = stdioDefaultMaxLine
	}
	if c.grace <= 0 {
		c.grace = stdioDefaultKillGrace
	}

	cmd := exec.Command(t.Command, t.Args...)
	cmd.Env = t.Env
	cmd.Dir = t.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Plain pipes, not StdinPipe/StdoutPipe: Wait must not close the
	// read ends while the readers drain them, nor wait for a grandchild
	// that holds them.
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("starting stdio server %q: creating stdin pipe: %w", name, err)
	}
	files = append(files, inR, inW)
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("starting stdio server %q: creating stdout pipe: %w", name, err)
	}
	files = append(files, outR, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("starting stdio server %q: creating stderr pipe: %w", name, err)
	}
	files = append(files, errR, errW)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, fmt.Errorf("starting stdio server %q: %w", name, err)
	}
	// The child has its copies; ours would keep the pipes open.
	inR.Close()
	outW.Close()
	errW.Close()
	c.cmd, c.stdin, c.stdout, c.stderr = cmd, inW, outR, errR
	c.pid = cmd.Process.Pid
	log.Debug("stdio server started", "pid", c.pid, "command", t.Command)

	go c.readStdout()
	go c.readStderr()
	go c.wait()
	return c, nil
}

// stdioConn is the Connection of a CommandTransport.
type stdioConn struct {
	name    string
	log     *slog.Logger
	maxLine int
	grace   time.Duration
	cmd     *exec.Cmd
	pid     int
	stdin   *os.File
	stdout  *os.File
	stderr  *os.File

	budget  *ByteBudget
	held    heldBytes   // the charge of the message Read returned last
	in      chan queued // messages and their charge; closed by readStdout when stdout ends
	readErr error       // why stdout ended; written before in is closed
	dropped atomic.Int64

	exited  chan struct{} // closed by wait once the child is reaped
	exitErr error         // the child's exit; written before exited is closed
	outDone chan struct{} // readStdout returned
	errDone chan struct{} // readStderr returned

	closing   chan struct{} // closed by Close
	closeOnce sync.Once

	wmu  sync.Mutex
	wbuf []byte
}

// SessionID returns "": stdio has no sessions.
func (c *stdioConn) SessionID() string { return "" }

// Pid returns the child's process id, which is also its process group id.
func (c *stdioConn) Pid() int { return c.pid }

// DroppedLines returns how many stdout lines were dropped because they were
// not JSON-RPC messages.
func (c *stdioConn) DroppedLines() int64 { return c.dropped.Load() }

// Read returns the next message from the child. After the child's stdout
// ended it returns an error wrapping the child's exit status; after Close,
// [ErrClosed].
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	c.held.release(c.budget)
	select {
	case <-c.closing:
		return nil, ErrClosed
	default:
	}
	select {
	case q, ok := <-c.in:
		if !ok {
			return nil, c.readErr
		}
		c.held.hold(c.budget, q.charge)
		return q.msg, nil
	case <-c.closing:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write sends msg to the child's stdin as one line. Line breaks in msg
// (insignificant whitespace in valid JSON) are replaced by spaces. Writes
// are serialized. ctx is not used: a message is written even when the
// context of the request it belongs to has ended (a cancellation, a late
// response), since a half-written line would corrupt the stream; a write
// blocked by a child that does not read its stdin ends with Close.
func (c *stdioConn) Write(_ context.Context, msg jsonrpc.Message) error {
	select {
	case <-c.closing:
		return fmt.Errorf("writing to stdio server %q: %w", c.name, ErrClosed)
	default:
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b, err := wire.Append(c.wbuf[:0], msg)
	if err != nil {
		return fmt.Errorf("writing to stdio server %q: encoding message: %w", c.name, err)
	}
	// Raw CR and LF can only be whitespace in valid JSON (strings escape
	// them), so blanking them keeps the message intact on one line.
	for i := bytes.IndexAny(b, "\r\n"); i >= 0; {
		b[i] = ' '
		j := bytes.IndexAny(b[i+1:], "\r\n")
		if j < 0 {
			break
		}
		i += 1 + j
	}
	b = append(b, '\n')
	_, err = c.stdin.Write(b)
	if cap(b) <= stdioWriteBufKeep {
		c.wbuf = b[:0]
	} else {
		c.wbuf = nil
	}
	if err != nil {
		select {
		case <-c.closing:
			return fmt.Errorf("writing to stdio server %q: %w", c.name, ErrClosed)
		default:
		}
		return fmt.Errorf("writing to stdio server %q: %w", c.name, err)
	}
	return nil
}

// Close stops the child (see [CommandTransport.Connect]) and waits until it
// has been reaped and the connection's goroutines have ended.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closing)
		c.stdin.Close()
		if !c.waitExit(c.grace) {
			c.log.Debug("stdio server did not exit after stdin closed: sending SIGTERM", "pid", c.pid)
			c.signalGroup(syscall.SIGTERM)
			if !c.waitExit(c.grace) {
				c.log.Warn("stdio server did not exit after SIGTERM: sending SIGKILL", "pid", c.pid)
				c.signalGroup(syscall.SIGKILL)
			}
		}
		<-c.exited
		<-c.outDone
		<-c.errDone
		for q := range c.in { // closed once outDone is
			c.budget.Release(q.charge)
		}
		c.held.close(c.budget)
	})
	return nil
}

func (c *stdioConn) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.exited:
		return true
	case <-t.C:
		return false
	}
}

// signalGroup sends sig to the child's process group.
func (c *stdioConn) signalGroup(sig syscall.Signal) {
	if err := syscall.Kill(-c.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		c.log.Warn("signalling stdio server process group", "pid", c.pid, "signal", sig.String(), "error", err)
	}
}

// wait reaps the child, kills what is left of its process group, records
// the exit and makes sure the pipe readers end.
func (c *stdioConn) wait() {
	err := c.cmd.Wait()
	// Leftover members of the group (grandchildren) are orphans of a dead
	// server. The group id cannot have been reused in the microseconds
	// since the leader was reaped: pids are allocated cyclically.
	if kerr := syscall.Kill(-c.pid, syscall.SIGKILL); kerr == nil {
		c.log.Debug("killed leftover processes of stdio server", "pgid", c.pid)
	}
	switch {
	case err == nil:
		c.exitErr = fmt.Errorf("stdio server %q exited with status 0: %w", c.name, io.EOF)
	default:
		c.exitErr = fmt.Errorf("stdio server %q exited: %w", c.name, err)
	}
	c.log.Debug("stdio server exited", "pid", c.pid, "status", c.cmd.ProcessState.String())
	close(c.exited)

	// A process outside the group may still hold the pipes; closing our
	// ends unblocks the readers.
	t := time.NewTimer(stdioExitWait)
	defer t.Stop()
	for _, p := range []struct {
		done chan struct{}
		f    *os.File
	}{{c.outDone, c.stdout}, {c.errDone, c.stderr}} {
		select {
		case <-p.done:
		case <-t.C:
			p.f.Close()
			<-p.done
		}
	}
}

// readStdout turns stdout lines into messages until stdout ends.
func (c *stdioConn) readStdout() {
	defer close(c.outDone)
	defer c.stdout.Close()
	br := bufio.NewReaderSize(c.stdout, stdioReadBuf)
	var long []byte // a line longer than the read buffer
	var err error
	for {
		var line []byte
		var charge int64
		var dropped *droppedMessage
		line, long, charge, dropped, err = c.readLine(br, long)
		switch {
		case dropped != nil:
			c.dropOverBudget(dropped)
		case len(line) > c.maxLine:
			c.budget.Release(charge)
			err = fmt.Errorf("stdout line longer than %d bytes", c.maxLine)
		case len(line) > 0 && (err == nil || err == io.EOF):
			c.handleLine(line, charge)
		default:
			c.budget.Release(charge)
		}
		if cap(long) > stdioWriteBufKeep {
			long = nil
		}
		if err != nil {
			break
		}
	}
	c.finishStdout(err)
}

// readLine reads the next line of stdout, without its line ending. A line
// longer than the read buffer is assembled in long, which is returned for
// reuse, and charged to the budget as it grows (a short one is charged by
// handleLine). A line that cannot get its bytes is read on without being
// kept: then dropped has followed it.
func (c *stdioConn) readLine(br *bufio.Reader, long []byte) (line, keep []byte, charge int64, dropped *droppedMessage, err error) {
	line, err = br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return bytes.TrimRight(line, "\r\n"), long, 0, nil, err
	}
	long = long[:0]
	for {
		if c.budget.acquireWithin(c.ctxClosing(), int64(len(line))) != nil {
			c.budget.Release(charge)
			dropped = new(droppedMessage)
			dropped.feed(long)
			dropped.feed(line)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				dropped.feed(line)
			}
			return nil, long, 0, dropped, err
		}
		charge += int64(len(line))
		long = append(long, line...)
		if !errors.Is(err, bufio.ErrBufferFull) || len(long) > c.maxLine+2 {
			break
		}
		line, err = br.ReadSlice('\n')
	}
	if errors.Is(err, bufio.ErrBufferFull) {
		err = nil // too long: the caller sees it by its length
	}
	return bytes.TrimRight(long, "\r\n"), long, charge, nil, err
}

// finishStdout records why stdout ended, preferring the child's exit
// status, and ends Read.
func (c *stdioConn) finishStdout(err error) {
	if err != nil && err != io.EOF && !errors.Is(err, os.ErrClosed) {
		c.readErr = fmt.Errorf("reading from stdio server %q: %w", c.name, err)
		close(c.in)
		return
	}
	t := time.NewTimer(stdioExitWait)
	defer t.Stop()
	var exited bool
	select {
	case <-c.exited:
		exited = true
	case <-c.closing:
	case <-t.C:
	}
	switch {
	case exited:
		c.readErr = c.exitErr
	default:
		c.readErr = fmt.Errorf("stdio server %q closed its stdout: %w", c.name, io.EOF)
	}
	close(c.in)
}

// handleLine delivers one stdout line (without its line ending), which
// holds charge bytes of the budget (0: it is not charged yet), or drops it
// when it is not a JSON-RPC message.
func (c *stdioConn) handleLine(line []byte, charge int64) {
	trimmed := bytes.TrimLeft(line, " \t")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		c.budget.Release(charge)
		if len(trimmed) > 0 {
			c.drop(line, "not a JSON-RPC message")
		}
		return
	}
	if charge == 0 {
		if c.budget.acquireWithin(c.ctxClosing(), int64(len(line))) != nil {
			d := new(droppedMessage)
			d.feed(line)
			c.dropOverBudget(d)
			return
		}
		charge = int64(len(line))
	}
	data := make([]byte, len(line))
	copy(data, line)
	msg, err := wire.Decode(data)
	if err != nil {
		c.budget.Release(charge)
		c.drop(line, err.Error())
		return
	}
	c.deliver(msg, charge)
}

// deliver hands msg, which holds charge bytes of the budget, to Read.
func (c *stdioConn) deliver(msg jsonrpc.Message, charge int64) {
	select {
	case c.in <- queued{msg, charge}:
	case <-c.closing:
		c.budget.Release(charge)
	}
}

// dropOverBudget handles a line dropped because it could not get its bytes
// of the budget: a response is replaced by a local error response.
func (c *stdioConn) dropOverBudget(d *droppedMessage) {
	resp, ok := d.answer(c.budget)
	c.log.Warn("dropped a stdout line over the in-flight budget", "budget", c.budget.Max(), "answered", ok)
	if ok {
		c.deliver(resp, 0)
	}
}

// ctxClosing returns a context that ends when Close is called, for waits
// on the budget; it does not allocate.
func (c *stdioConn) ctxClosing() context.Context { return chanContext(c.closing) }

func (c *stdioConn) drop(line []byte, why string) {
	n := c.dropped.Add(1)
	c.log.Debug("dropping stdout line of stdio server", "reason", why, "line", snippet(line), "dropped", n)
}

// readStderr logs the child's stderr, one Info record per line (each cut at
// 4 KiB).
func (c *stdioConn) readStderr() {
	defer close(c.errDone)
	defer c.stderr.Close()
	br := bufio.NewReaderSize(c.stderr, stdioMaxStderrLine)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			c.log.Info("stdio server stderr", "line", string(line), "truncated", true)
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
		} else if line = bytes.TrimRight(line, "\r\n"); len(line) > 0 {
			c.log.Info("stdio server stderr", "line", string(line))
		}
		if err != nil {
			return
		}
	}
}
