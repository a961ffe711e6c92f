package main

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Memory after bursts. The Go runtime keeps the heap a burst grew (a
// module compilation, a storm of sessions, a reload) until the next
// garbage collection, which an idle or lightly loaded gateway reaches only
// after minutes, and returns the freed pages to the OS slowly after that;
// the compiled code of a module no policy uses is unmapped only when a
// collection finds it unreachable. releaseMemory looks every interval and,
// when the runtime holds much more than the live heap needs, collects and
// returns what is free at once (debug.FreeOSMemory), then returns the
// binary's pages that the burst ran (dropStartupPages): RSS comes back to
// what serving needs.

const (
	// releaseInterval is how often releaseMemory looks.
	releaseInterval = 2 * time.Second
	// releaseSlack is how much more than twice the live heap (the garbage
	// collector's own target) the runtime may hold before it is released.
	releaseSlack = 16 << 20
)

// memorySamples are the runtime/metrics releaseMemory reads.
var memorySamples = []string{
	"/memory/classes/total:bytes",         // everything the runtime mapped
	"/memory/classes/heap/released:bytes", // mapped but returned to the OS
	"/gc/heap/live:bytes",                 // the heap the last collection kept
	"/gc/cycles/total:gc-cycles",          // collections so far
}

// releaseMemory gives memory back after bursts until ctx ends: when the
// runtime holds more than releaseSlack (or a quarter of the live heap, if
// more) over twice the live heap, or, with
// no collection since it last looked (the live heap may be that of the
// burst's own collection), when the runtime holds, or the process has
// resident, more than releaseSlack over what they were after the last
// release (the process: memory the Go heap does not count, such as the
// compiled code of modules, unmapped once a collection finds it unused).
func releaseMemory(ctx context.Context, log *slog.Logger) {
	samples := make([]metrics.Sample, len(memorySamples))
	for i, name := range memorySamples {
		samples[i].Name = name
	}
	t := time.NewTicker(releaseInterval)
	defer t.Stop()
	floor, _, cycles := readMemory(samples)
	floorRSS := residentBytes()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		held, live, now := readMemory(samples)
		rss := residentBytes()
		quiet := now == cycles
		cycles = now
		grew := held > floor+releaseSlack || rss > floorRSS+releaseSlack
		// The collector lets the heap grow to twice the live heap, and the
		// runtime holds a little more (stacks, metadata): only a quarter
		// more of the live heap, at least releaseSlack, is a burst's.
		if held <= 2*live+max(releaseSlack, live/4) && !(quiet && grew) {
			if rss < floorRSS {
				floorRSS = rss
			}
			continue
		}
		debug.FreeOSMemory()
		floor, _, cycles = readMemory(samples)
		dropped := dropStartupPages(log)
		floorRSS = residentBytes()
		log.Debug("memory released after a burst", "held_MiB", held>>20, "live_MiB", live>>20, "rss_MiB", rss>>20,
			"now_rss_MiB", floorRSS>>20, "binary_KiB", dropped)
	}
}

// readMemory reads how much memory the runtime holds (mapped and not
// returned) and the live heap of the last collection, in bytes, and how
// many collections ran.
func readMemory(samples []metrics.Sample) (held, live, cycles uint64) {
	metrics.Read(samples)
	v := func(i int) uint64 {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return samples[i].Value.Uint64()
	}
	total, released := v(0), v(1)
	if released < total {
		held = total - released
	}
	return held, v(2), v(3)
}
