// Command testprogress summarises `go test -json` as the tests run, so a
// long test run is never silent: a line per package as it finishes, every
// interval a line naming the packages still running, the output of every
// failing test in full, go test's own closing lines (ok / FAIL per
// package) as the packages finish, and at the end the ten slowest tests,
// so the next test to speed up is named in every run.
//
//	set -o pipefail; go test -json ./... | go run ./internal/cmd/testprogress
//
// It exits 1 when a test, a package or a build failed, or when the input
// ends with packages still running.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// event is one line of go test -json (cmd/test2json).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	ImportPath  string // build-output, build-fail
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
}

func main() {
	every := flag.Duration("every", 30*time.Second, "how often to name the packages still running")
	flag.Parse()
	if !summarise(os.Stdin, os.Stdout, *every, time.Now) {
		os.Exit(1)
	}
}

// run is the state of one test run.
type run struct {
	out      io.Writer
	start    time.Time
	running  map[string]time.Time // package → start
	tests    map[string][]string  // package/test → output lines held back
	pkgOut   map[string][]string  // package → its own output lines
	passed   int                  // tests passed so far
	timed    []timing             // top-level tests that passed or failed
	failed   bool
	finished int
}

// timing is how long one top-level test ran (go test's Elapsed: a
// parallel test's wait for its turn is not counted).
type timing struct {
	pkg, test string
	elapsed   time.Duration
}

// slowest is how many tests the closing list names.
const slowest = 10

// summarise reads go test -json from in and writes the summary to out; it
// reports whether everything passed.
func summarise(in io.Reader, out io.Writer, every time.Duration, now func() time.Time) bool {
	r := &run{out: out, start: now(), running: map[string]time.Time{}, tests: map[string][]string{}, pkgOut: map[string][]string{}}
	lines := make(chan []byte)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			lines <- slices.Clone(sc.Bytes())
		}
		close(lines)
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return r.end()
			}
			r.line(line)
		case <-tick.C:
			r.progress(now())
		}
	}
}

func (r *run) line(line []byte) {
	var e event
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
		fmt.Fprintf(r.out, "%s\n", line) // not JSON: go vet or build messages
		return
	}
	switch {
	case e.Action == "build-output":
		fmt.Fprint(r.out, e.Output)
	case e.Action == "build-fail":
		r.failed = true
	case e.Test != "":
		r.test(e)
	default:
		r.pkg(e)
	}
}

// test holds a test's output back, printing it only if the test fails.
func (r *run) test(e event) {
	key := e.Package + "\x00" + e.Test
	switch e.Action {
	case "output":
		r.tests[key] = append(r.tests[key], e.Output)
	case "pass", "skip":
		if e.Action == "pass" {
			r.passed++
			r.time(e)
		}
		delete(r.tests, key)
	case "fail":
		r.time(e)
		r.failed = true
		for _, l := range r.tests[key] {
			fmt.Fprint(r.out, l)
		}
		delete(r.tests, key)
	}
}

// time records a finished top-level test; a subtest's time is in its
// parent's.
func (r *run) time(e event) {
	if strings.Contains(e.Test, "/") {
		return
	}
	d := time.Duration(e.Elapsed * float64(time.Second))
	r.timed = append(r.timed, timing{pkg: e.Package, test: e.Test, elapsed: d})
}

func (r *run) pkg(e event) {
	switch e.Action {
	case "start":
		r.running[e.Package] = e.Time
	case "output":
		r.pkgOut[e.Package] = append(r.pkgOut[e.Package], e.Output)
	case "pass", "fail", "skip":
		delete(r.running, e.Package)
		r.finished++
		if e.Action == "fail" {
			r.failed = true
			r.unfinished(e.Package)
		}
		for _, l := range r.pkgOut[e.Package] {
			// The package's own output: ok/FAIL lines, and what a failing
			// package printed outside its tests (a panic, TestMain).
			if e.Action == "fail" || isClosing(l) {
				fmt.Fprint(r.out, l)
			}
		}
		delete(r.pkgOut, e.Package)
	}
}

// unfinished prints the held-back output of pkg's tests that never
// finished: when a test binary dies (go test's -timeout, a crash), the
// panic and the goroutines are the running tests' output, and no test
// fails.
func (r *run) unfinished(pkg string) {
	var keys []string
	for key := range r.tests {
		if strings.HasPrefix(key, pkg+"\x00") {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	for _, key := range keys {
		for _, l := range r.tests[key] {
			fmt.Fprint(r.out, l)
		}
		delete(r.tests, key)
	}
}

// isClosing reports whether l is one of go test's per-package result lines.
func isClosing(l string) bool {
	return strings.HasPrefix(l, "ok  \t") || strings.HasPrefix(l, "FAIL\t") || strings.HasPrefix(l, "?   \t")
}

// progress names the packages still running.
func (r *run) progress(now time.Time) {
	if len(r.running) == 0 {
		return
	}
	names := make([]string, 0, len(r.running))
	for p, since := range r.running {
		names = append(names, fmt.Sprintf("%s (%s)", strings.TrimPrefix(p, "github.com/edge-mcp/edge-mcp/"), now.Sub(since).Round(time.Second)))
	}
	slices.Sort(names)
	fmt.Fprintf(r.out, "... %s: %d packages done, %d tests passed; running: %s\n",
		now.Sub(r.start).Round(time.Second), r.finished, r.passed, strings.Join(names, ", "))
}

// end prints the slowest tests and what a cut-off run left, and reports
// whether everything passed.
func (r *run) end() bool {
	r.printSlowest()
	if len(r.running) > 0 {
		names := make([]string, 0, len(r.running))
		for p := range r.running {
			names = append(names, p)
		}
		slices.Sort(names)
		fmt.Fprintf(r.out, "testprogress: the input ended with packages still running: %s\n", strings.Join(names, ", "))
		for _, p := range names {
			for _, l := range r.pkgOut[p] {
				fmt.Fprint(r.out, l)
			}
		}
		return false
	}
	return !r.failed
}

// printSlowest names the slowest top-level tests, slowest first.
func (r *run) printSlowest() {
	if len(r.timed) == 0 {
		return
	}
	slices.SortStableFunc(r.timed, func(a, b timing) int { return cmp.Compare(b.elapsed, a.elapsed) })
	n := min(slowest, len(r.timed))
	fmt.Fprintf(r.out, "the %d slowest tests:\n", n)
	for _, t := range r.timed[:n] {
		fmt.Fprintf(r.out, "%8.2fs  %s %s\n", t.elapsed.Seconds(), strings.TrimPrefix(t.pkg, "github.com/edge-mcp/edge-mcp/"), t.test)
	}
}
