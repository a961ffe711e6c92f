package metrics

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
)

// This file writes the Go runtime and process metrics, under the names the
// Prometheus Go client uses for them, computed at scrape time: nothing runs
// between scrapes.

// runtimeGauges maps runtime/metrics samples to gauge names.
var runtimeGauges = [...]struct{ sample, name, help string }{
	{"/sched/goroutines:goroutines", "go_goroutines", "Number of goroutines that currently exist."},
	{"/sched/gomaxprocs:threads", "go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting."},
	{"/gc/gogc:percent", "go_gc_gogc_percent", "Heap size target percentage configured by GOGC."},
	{"/gc/gomemlimit:bytes", "go_gc_gomemlimit_bytes", "Go runtime memory limit configured by GOMEMLIMIT or debug.SetMemoryLimit."},
	{"/memory/classes/heap/objects:bytes", "go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use."},
	{"/gc/heap/objects:objects", "go_memstats_heap_objects", "Number of currently allocated objects."},
	{"/gc/heap/goal:bytes", "go_memstats_next_gc_bytes", "Heap size the next garbage collection aims at."},
	{"/memory/classes/total:bytes", "go_memstats_sys_bytes", "Number of bytes obtained from the system."},
}

// writeRuntime writes the Go runtime metrics.
func writeRuntime(b *bytes.Buffer) {
	samples := make([]metrics.Sample, len(runtimeGauges))
	for i, g := range runtimeGauges {
		samples[i].Name = g.sample
	}
	metrics.Read(samples)
	writeHeader(b, "go_info", "Information about the Go environment.", kindGauge)
	writeSample(b, "go_info", `version="`+escapeLabel(runtime.Version())+`"`, 1)
	for i, g := range runtimeGauges {
		var v float64
		switch s := samples[i].Value; s.Kind() {
		case metrics.KindUint64:
			v = float64(s.Uint64())
		case metrics.KindFloat64:
			v = s.Float64()
		default:
			continue // not supported by this Go version
		}
		writeHeader(b, g.name, g.help, kindGauge)
		writeSample(b, g.name, "", v)
	}
	threads, _ := runtime.ThreadCreateProfile(nil)
	writeHeader(b, "go_threads", "Number of OS threads created.", kindGauge)
	writeSample(b, "go_threads", "", float64(threads))
}

// userHZ is the unit of the times in /proc/self/stat: clock ticks, 100 a
// second on every Linux architecture (as the Prometheus procfs package
// assumes too).
const userHZ = 100

// Where the process metrics are read; tests may point these elsewhere.
var (
	procStat   = "/proc/self/stat"
	procLimits = "/proc/self/limits"
	procFDs    = "/proc/self/fd"
	procBoot   = "/proc/stat"
)

// writeProcess writes the process metrics from /proc; nothing where /proc
// cannot be read (not Linux).
func writeProcess(b *bytes.Buffer) {
	st, ok := readStat()
	if !ok {
		return
	}
	gauge := func(name, help string, v float64) {
		writeHeader(b, name, help, kindGauge)
		writeSample(b, name, "", v)
	}
	writeHeader(b, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", kindCounter)
	writeSample(b, "process_cpu_seconds_total", "", float64(st.utime+st.stime)/userHZ)
	gauge("process_resident_memory_bytes", "Resident memory size in bytes.", float64(st.rss*int64(os.Getpagesize())))
	gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", float64(st.vsize))
	if boot, ok := bootTime(); ok {
		gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", float64(boot)+float64(st.start)/userHZ)
	}
	if fds, err := os.ReadDir(procFDs); err == nil {
		gauge("process_open_fds", "Number of open file descriptors.", float64(len(fds)))
	}
	if n, ok := maxFDs(); ok {
		gauge("process_max_fds", "Maximum number of open file descriptors.", n)
	}
}

// stat holds the fields of /proc/self/stat the process metrics use.
type stat struct {
	utime, stime, start int64 // clock ticks
	vsize               int64 // bytes
	rss                 int64 // pages
}

func readStat() (stat, bool) {
	data, err := os.ReadFile(procStat)
	if err != nil {
		return stat{}, false
	}
	// The command name, field 2, is in parentheses and may hold spaces;
	// fields are counted from the state, field 3.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 22 {
		return stat{}, false
	}
	num := func(field int) int64 {
		n, _ := strconv.ParseInt(f[field-3], 10, 64)
		return n
	}
	return stat{utime: num(14), stime: num(15), start: num(22), vsize: num(23), rss: num(24)}, true
}

// bootTime returns the boot time in seconds since the epoch, from the
// btime line of /proc/stat.
func bootTime() (int64, bool) {
	data, err := os.ReadFile(procBoot)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// maxFDs returns the soft limit of open files from /proc/self/limits.
func maxFDs() (float64, bool) {
	data, err := os.ReadFile(procLimits)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Max open files"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				return 0, false
			}
			n, err := strconv.ParseFloat(f[0], 64)
			return n, err == nil
		}
	}
	return 0, false
}
