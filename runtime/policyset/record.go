package policyset

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/edge-mcp/edge-mcp/policy"
)

// recorder writes the input of every policy hook call, redacted, to a
// folder, one file per call, in the form edge-mcp policy test replays.
type recorder struct {
	dir string
	log *slog.Logger
	n   atomic.Uint64
	max uint64
}

// recordedInput is one file written by the recorder.
type recordedInput struct {
	Hook   string          `json:"hook"`
	Module string          `json:"module"`
	Time   string          `json:"time"`
	Input  json.RawMessage `json:"input"`
}

// newRecorder prepares dir (mode 0700: inputs are redacted, but still
// traffic).
func newRecorder(dir string, log *slog.Logger) (*recorder, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("record folder: %w", err)
	}
	return &recorder{dir: dir, log: log, max: 100_000}, nil
}

// record writes one hook input. It runs on the call's path, so it writes a
// small file and returns; after max files it stops (and says so once).
func (r *recorder) record(rec policy.Recorded) {
	n := r.n.Add(1)
	if n > r.max {
		if n == r.max+1 {
			r.log.Warn("record folder holds the maximum number of inputs; recording stopped", "dir", r.dir, "max", r.max)
		}
		return
	}
	b, _ := json.Marshal(recordedInput{Hook: rec.Hook.String(), Module: rec.Module,
		Time: rec.Time.UTC().Format("2006-01-02T15:04:05.000000Z"), Input: policy.RedactInput(rec.Input)})
	name := filepath.Join(r.dir, fmt.Sprintf("%s-%06d-%s-%s.json", rec.Time.UTC().Format("20060102T150405"), n, rec.Module, rec.Hook))
	if err := os.WriteFile(name, b, 0o600); err != nil {
		r.log.Warn("recording a hook input", "err", err)
	}
}
