// Package memlimit sets the Go runtime's soft memory limit
// (debug.SetMemoryLimit) from the configuration or, when none is
// configured, from the memory limit of the process's cgroup, so that the
// garbage collector works harder before the kernel's OOM killer steps in.
package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
)

// Sources of the limit, as Apply returns them.
const (
	SourceConfig     = "config"     // the configured number of bytes
	SourceGOMEMLIMIT = "GOMEMLIMIT" // the environment variable, applied by the runtime
	SourceCgroupV2   = "cgroup v2"  // a fraction of memory.max
	SourceCgroupV1   = "cgroup v1"  // a fraction of memory.limit_in_bytes
	SourceDefault    = "default"    // nothing set: Go's default (no limit)
)

// CgroupFraction is the share of the cgroup's memory limit that becomes the
// soft limit, leaving room for memory the Go runtime does not account for
// (mapped binary pages, cgo, kernel buffers charged to the cgroup).
const CgroupFraction = 0.9

// Where the cgroup files are read; tests point these at temporary files.
var (
	cgroupRoot = "/sys/fs/cgroup"
	procCgroup = "/proc/self/cgroup"
	getenv     = os.Getenv
)

// v1Unlimited: cgroup v1 reports "no limit" as a huge number (the largest
// page-aligned int64); anything from here up is treated as no limit.
const v1Unlimited = 1 << 62

// Apply sets the Go soft memory limit and returns it with its source (one
// of the Source constants):
//
//   - configured > 0: configured bytes (SourceConfig);
//   - configured == 0 and GOMEMLIMIT set: left as the runtime applied it;
//   - configured == 0: CgroupFraction of the memory limit of the process's
//     cgroup (v2 memory.max of its own cgroup or the nearest ancestor with a
//     limit, else v1 memory.limit_in_bytes);
//   - otherwise (no cgroup limit, or configured < 0): Go's default is left
//     in place (SourceDefault) and limit is the runtime's current limit
//     (math.MaxInt64 unless something else set one).
//
// A cgroup file that cannot be read or parsed is logged at debug level and
// skipped; Apply never fails.
func Apply(configured int64, log *slog.Logger) (limit int64, source string) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch {
	case configured > 0:
		debug.SetMemoryLimit(configured)
		log.Info("memory limit set", "bytes", configured, "source", SourceConfig)
		return configured, SourceConfig
	case configured < 0:
		return debug.SetMemoryLimit(-1), SourceDefault
	case getenv("GOMEMLIMIT") != "":
		return debug.SetMemoryLimit(-1), SourceGOMEMLIMIT
	}
	cg, source, err := cgroupLimit()
	if err != nil {
		log.Debug("memory limit: reading the cgroup limit", "err", err)
	}
	if cg <= 0 {
		return debug.SetMemoryLimit(-1), SourceDefault
	}
	limit = int64(float64(cg) * CgroupFraction)
	debug.SetMemoryLimit(limit)
	log.Info("memory limit set", "bytes", limit, "source", source, "cgroup_bytes", cg)
	return limit, source
}

// cgroupLimit returns the memory limit of the process's cgroup in bytes, 0
// when there is none, and which cgroup version it came from.
func cgroupLimit() (int64, string, error) {
	v2, errV2 := cgroupV2Limit()
	if v2 > 0 {
		return v2, SourceCgroupV2, nil
	}
	v1, errV1 := readLimit(path.Join(cgroupRoot, "memory", "memory.limit_in_bytes"))
	if v1 > 0 && v1 < v1Unlimited {
		return v1, SourceCgroupV1, nil
	}
	if errors.Is(errV1, fs.ErrNotExist) {
		errV1 = nil
	}
	return 0, "", errors.Join(errV2, errV1)
}

// cgroupV2Limit returns the smallest memory.max of the process's cgroup
// and its ancestors (a systemd unit's MemoryMax is in its own cgroup; a
// container sees its cgroup as the root), 0 when none has a limit.
func cgroupV2Limit() (int64, error) {
	dir := "/"
	if data, err := os.ReadFile(procCgroup); err == nil {
		dir = unifiedPath(data)
	}
	var (
		limit int64
		errs  []error
	)
	for {
		n, err := readLimit(path.Join(cgroupRoot, dir, "memory.max"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		if n > 0 && (limit == 0 || n < limit) {
			limit = n
		}
		if dir == "/" {
			return limit, errors.Join(errs...)
		}
		dir = path.Dir(dir)
	}
}

// unifiedPath returns the cgroup v2 path in the contents of
// /proc/self/cgroup (the "0::/path" line), "/" when there is none.
func unifiedPath(data []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok && strings.HasPrefix(p, "/") {
			return path.Clean(p)
		}
	}
	return "/"
}

// readLimit reads a cgroup memory limit file: a number of bytes, or "max"
// for none (returned as 0).
func readLimit(name string) (int64, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return 0, fmt.Errorf("reading the cgroup memory limit: %w", err)
	}
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("parsing the cgroup memory limit in %s: %q is not a byte count", name, s)
	}
	return n, nil
}
