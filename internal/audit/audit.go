// Package audit writes the gateway's append-only audit log: one JSON object
// per line for every tool call, approval decision and admin change.
//
// Records are encoded on the caller's goroutine and handed to a single writer
// goroutine through a bounded queue, so a slow disk never blocks a tool call
// for long: when the queue is full the record is dropped and counted (see
// Logger.Dropped). Lines are written whole and never interleaved. Files are
// rotated by size with lumberjack.
//
// Tool arguments are redacted by default: every string, number and boolean
// is replaced by a marker of its type (and, for strings, its length) while
// object keys and structure are kept, so an auditor sees the shape of a call
// without its content.
package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"
)

// Defaults applied by Open.
const (
	// DefaultBufferSize is the number of records queued for the writer
	// before further records are dropped.
	DefaultBufferSize = 4096
	// maxBatch is the largest number of bytes handed to one Write call.
	maxBatch = 64 << 10
)

// Record types, the value of the "type" member of every line.
const (
	TypeToolCall    = "tool_call"
	TypeAdminChange = "admin_change"
	TypeApproval    = "approval"
)

var (
	// ErrInvalidConfig is returned by Open for a configuration it cannot use.
	ErrInvalidConfig = errors.New("invalid audit configuration")
)

// Config configures an audit Logger.
type Config struct {
	// Path is the log file. "-" writes to standard output and "" disables
	// auditing (Open returns a nil *Logger, whose methods do nothing).
	Path string
	// MaxSizeMB is the size in megabytes at which the file is rotated;
	// 0 means 100.
	MaxSizeMB int
	// MaxBackups is the number of rotated files kept; 0 keeps all of them.
	MaxBackups int
	// MaxAgeDays is the number of days rotated files are kept; 0 keeps
	// them regardless of age.
	MaxAgeDays int
	// Compress gzips rotated files.
	Compress bool
	// IncludeArguments writes tool arguments verbatim instead of redacting
	// them to their shape.
	IncludeArguments bool
	// BufferSize is the number of records queued for the writer before
	// further records are dropped; 0 means DefaultBufferSize.
	BufferSize int
	// Log receives write errors; nil discards them.
	Log *slog.Logger
}

// ToolCall is the audit record of one tool call.
type ToolCall struct {
	Time       time.Time       `json:"time"`
	Identity   string          `json:"identity,omitempty"`
	Server     string          `json:"server"`
	Tool       string          `json:"tool"`
	Outcome    string          `json:"outcome"`
	DurationMS int64           `json:"duration_ms"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	Error      string          `json:"error,omitempty"`
	SessionID  string          `json:"session_id,omitempty"`
}

// AdminChange is the audit record of one administrative change, such as a
// configuration reload or a policy module being replaced.
type AdminChange struct {
	Time     time.Time `json:"time"`
	Identity string    `json:"identity,omitempty"`
	Action   string    `json:"action"`
	Target   string    `json:"target,omitempty"`
	Digest   string    `json:"digest,omitempty"`
	Detail   string    `json:"detail,omitempty"`
}

// Approval is the audit record of a human approval decision on a tool call.
type Approval struct {
	Time      time.Time       `json:"time"`
	Identity  string          `json:"identity,omitempty"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Decision  string          `json:"decision"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Logger is an audit log. It is safe for concurrent use. A nil *Logger is a
// disabled log: its methods do nothing.
type Logger struct {
	out         io.Writer
	closer      io.Closer // nil when out must not be closed (stdout)
	includeArgs bool
	log         *slog.Logger

	mu     sync.RWMutex // guards closed and sends on queue
	closed bool
	queue  chan []byte
	done   chan struct{}

	dropped atomic.Uint64
}

// Open opens the audit log described by cfg and starts its writer. It
// returns a nil *Logger and no error when cfg.Path is empty.
func Open(cfg Config) (*Logger, error) {
	if cfg.Path == "" {
		return nil, nil
	}
	if cfg.MaxSizeMB < 0 || cfg.MaxBackups < 0 || cfg.MaxAgeDays < 0 || cfg.BufferSize < 0 {
		return nil, fmt.Errorf("%w: negative size, count or age", ErrInvalidConfig)
	}
	var (
		out    io.Writer
		closer io.Closer
	)
	if cfg.Path == "-" {
		out = os.Stdout
	} else {
		lj := &lumberjack.Logger{
			Filename:   cfg.Path,
			MaxSize:    cfg.MaxSizeMB,
			MaxBackups: cfg.MaxBackups,
			MaxAge:     cfg.MaxAgeDays,
			Compress:   cfg.Compress,
		}
		// An empty write opens (or creates) the file now, so that a bad
		// path fails Open rather than every later write.
		if _, err := lj.Write(nil); err != nil {
			return nil, fmt.Errorf("opening audit log %q: %w", cfg.Path, err)
		}
		out, closer = lj, lj
	}
	size := cfg.BufferSize
	if size == 0 {
		size = DefaultBufferSize
	}
	return newLogger(out, closer, size, cfg.IncludeArguments, cfg.Log), nil
}

func newLogger(out io.Writer, closer io.Closer, size int, includeArgs bool, log *slog.Logger) *Logger {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Logger{
		out:         out,
		closer:      closer,
		includeArgs: includeArgs,
		log:         log,
		queue:       make(chan []byte, size),
		done:        make(chan struct{}),
	}
	go l.run()
	return l
}

// ToolCall records a tool call. A zero Time is set to the current time.
func (l *Logger) ToolCall(rec ToolCall) {
	if l == nil {
		return
	}
	if rec.Time.IsZero() {
		rec.Time = time.Now().UTC()
	}
	rec.Arguments = l.arguments(rec.Arguments)
	l.enqueue(struct {
		Type string `json:"type"`
		ToolCall
	}{TypeToolCall, rec})
}

// AdminChange records an administrative change. A zero Time is set to the
// current time.
func (l *Logger) AdminChange(rec AdminChange) {
	if l == nil {
		return
	}
	if rec.Time.IsZero() {
		rec.Time = time.Now().UTC()
	}
	l.enqueue(struct {
		Type string `json:"type"`
		AdminChange
	}{TypeAdminChange, rec})
}

// Approval records an approval decision. A zero Time is set to the current
// time.
func (l *Logger) Approval(rec Approval) {
	if l == nil {
		return
	}
	if rec.Time.IsZero() {
		rec.Time = time.Now().UTC()
	}
	rec.Arguments = l.arguments(rec.Arguments)
	l.enqueue(struct {
		Type string `json:"type"`
		Approval
	}{TypeApproval, rec})
}

// Dropped reports how many records were lost because the queue was full,
// the log was closed or the write failed.
func (l *Logger) Dropped() uint64 {
	if l == nil {
		return 0
	}
	return l.dropped.Load()
}

// Close writes every queued record, stops the writer and closes the file.
// Records logged after Close are dropped. Close is idempotent.
func (l *Logger) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.queue)
	l.mu.Unlock()

	<-l.done
	if l.closer != nil {
		if err := l.closer.Close(); err != nil {
			return fmt.Errorf("closing audit log: %w", err)
		}
	}
	return nil
}

// arguments returns the form of args that goes into the log.
func (l *Logger) arguments(args json.RawMessage) json.RawMessage {
	if len(args) == 0 {
		return nil
	}
	if !l.includeArgs {
		return RedactArguments(args)
	}
	if !json.Valid(args) {
		return invalidMarker(args)
	}
	return args
}

func (l *Logger) enqueue(rec any) {
	line, err := json.Marshal(rec)
	if err != nil {
		// Only reachable through a bug: every field marshals.
		l.dropped.Add(1)
		l.log.Error("encoding audit record", "err", err)
		return
	}
	line = append(line, '\n')

	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		l.dropped.Add(1)
		return
	}
	select {
	case l.queue <- line:
	default:
		l.dropped.Add(1)
	}
}

// run writes queued lines, batching whole lines into one Write so that a
// rotation never splits a line.
func (l *Logger) run() {
	defer close(l.done)
	var batch []byte
	for line := range l.queue {
		batch = append(batch[:0], line...)
		n := uint64(1)
	fill:
		for len(batch) < maxBatch {
			select {
			case more, ok := <-l.queue:
				if !ok {
					break fill
				}
				batch = append(batch, more...)
				n++
			default:
				break fill
			}
		}
		if _, err := l.out.Write(batch); err != nil {
			l.dropped.Add(n)
			l.log.Error("writing audit log", "records", n, "err", err)
		}
	}
}
