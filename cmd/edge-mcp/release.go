package main

import (
	"context"
	"log/slog"
	"net/http"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
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
//
// Pages of the binary also come back without any burst: the kernel maps a
// file page in 64 KiB runs around every fault (fault-around; madvise
// advice does not change it), so one /status request, or one collection
// (which reads the type and stack maps of what it scans), after the
// start-up drop makes 5-10 MiB of the binary resident again. So when no
// request began for a whole interval and the binary's resident pages grew
// by more than idleSlack since the last drop, releaseMemory drops them
// again: an idle gateway holds only the pages its idle loop runs. The
// next request faults back what it runs (about a hundred minor faults, no
// I/O). Pages that background work brings back within an interval are
// kept (idleTrim).

const (
	// releaseInterval is how often releaseMemory looks.
	releaseInterval = 2 * time.Second
	// releaseSlack is how much more than twice the live heap (the garbage
	// collector's own target) the runtime may hold before it is released.
	releaseSlack = 16 << 20
	// idleSlack is how much the file-backed resident set (the binary's
	// pages) may grow over the idle working set before an idle gateway
	// drops it again (idleTrim): eight fault-around runs.
	idleSlack = 512 << 10
)

// requestCounter counts the requests the gateway's listeners began, so
// that releaseMemory can tell an idle gateway from a serving one.
type requestCounter struct{ n atomic.Uint64 }

// wrap counts each request h serves.
func (c *requestCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		h.ServeHTTP(w, r)
	})
}

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
// Apart from bursts, when requests saw no new request for a whole interval,
// it drops the binary's pages that came back since the last drop
// (idleTrim).
func releaseMemory(ctx context.Context, log *slog.Logger, requests *requestCounter) {
	samples := make([]metrics.Sample, len(memorySamples))
	for i, name := range memorySamples {
		samples[i].Name = name
	}
	t := time.NewTicker(releaseInterval)
	defer t.Stop()
	floor, _, cycles := readMemory(samples)
	floorRSS, _ := residentBytes()
	var trim idleTrim
	seen := requests.n.Load()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		held, live, now := readMemory(samples)
		rss, file := residentBytes()
		began := requests.n.Load()
		if trim.look(began == seen, file) {
			dropped := dropStartupPages(log)
			_, after := residentBytes()
			log.Debug("binary pages released while idle", "file_KiB", file>>10, "now_file_KiB", after>>10, "binary_KiB", dropped)
			rss, after = residentBytes() // with the pages logging ran: they are no sign of work
			trim.dropped(file, after)
		}
		seen = began
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
		floorRSS, _ = residentBytes()
		log.Debug("memory released after a burst", "held_MiB", held>>20, "live_MiB", live>>20, "rss_MiB", rss>>20,
			"now_rss_MiB", floorRSS>>20, "binary_KiB", dropped)
	}
}

// idleTrim decides when an idle gateway drops the binary's pages again:
// at a look with no request since the one before, when the file-backed
// resident set is more than idleSlack over the idle working set (floor).
// The floor is what stays after a drop (the idle loop's own pages); when
// the pages come back within a quiet interval of a drop, the gateway's
// own background work runs them (a fleet replica's heartbeats and
// watches: 5-10 MiB every interval), so they count as idle working set
// too and are not dropped every interval to no avail.
type idleTrim struct {
	floor         uint64 // file-backed bytes the idle gateway keeps using
	justDropped   bool   // the last look dropped
	before, after uint64 // file-backed bytes around that drop
}

// look is one interval's look: quiet when no request began since the last
// one, file the file-backed resident bytes now. It says whether to drop;
// after a drop the caller reports it with dropped.
func (t *idleTrim) look(quiet bool, file uint64) bool {
	after := t.justDropped
	t.justDropped = false
	switch {
	case !quiet:
		return false
	case after && file > t.after+idleSlack:
		t.floor = max(t.floor, t.before)
		return false
	case after:
		t.floor = max(t.floor, file)
		return false
	}
	return file > t.floor+idleSlack
}

// dropped records a drop from before to after file-backed bytes.
func (t *idleTrim) dropped(before, after uint64) {
	t.justDropped, t.before, t.after = true, before, after
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
