//go:build linux

package main

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// dropStartupPages returns to the page cache the pages of the binary's
// read-only mappings (code, read-only data) that start-up touched: package
// initialisation, config loading and the first catalogue run code that an
// idle or serving gateway never runs again, and the kernel maps file pages
// in 64 KiB runs around every fault, so after start-up nearly the whole
// binary counts in RSS. The pages stay in the page cache; those still used
// come back at their next access (a minor fault, no I/O). Only clean
// file-backed mappings are touched: no private copy of a page is ever
// discarded. It returns the KiB of RSS released.
func dropStartupPages(log *slog.Logger) int {
	exe, err := os.Executable()
	if err != nil {
		log.Debug("not dropping start-up pages", "err", err)
		return 0
	}
	smaps, err := os.Open("/proc/self/smaps")
	if err != nil {
		log.Debug("not dropping start-up pages", "err", err)
		return 0
	}
	mappings := cleanMappings(smaps, exe)
	smaps.Close()
	released := 0
	for _, m := range mappings {
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, syscall.MADV_DONTNEED); errno != 0 {
			log.Debug("not dropping start-up pages", "mapping", strconv.FormatUint(uint64(m.start), 16), "err", errno)
			continue
		}
		released += m.rssKiB
	}
	return released
}

// mapping is one read-only, clean mapping of the binary.
type mapping struct {
	start, end uintptr
	rssKiB     int
}

// cleanMappings parses /proc/self/smaps and returns the mappings of the
// file path that are not writable and hold no page of their own
// (anonymous or swapped: a private copy). It reads line by line and keeps
// no line: an idle gateway runs it every quiet interval in which pages
// came back, and what it allocates stays in the heap until the next
// collection.
func cleanMappings(smaps io.Reader, path string) []mapping {
	var (
		out    []mapping
		cur    mapping
		ok     bool // cur is a candidate
		dirty  bool // cur holds a page of its own (anonymous or swapped)
		fields [][]byte
	)
	flush := func() {
		if ok && !dirty && cur.end > cur.start {
			out = append(out, cur)
		}
	}
	sc := bufio.NewScanner(smaps)
	for sc.Scan() {
		fields = splitFields(sc.Bytes(), fields[:0])
		if len(fields) == 0 {
			continue
		}
		if key, isField := bytes.CutSuffix(fields[0], []byte(":")); isField && len(fields) >= 2 {
			kb, _ := strconv.Atoi(string(fields[1]))
			switch string(key) {
			case "Rss":
				cur.rssKiB = kb
			case "Anonymous", "Swap":
				// Copies of pages of its own (a debugger's breakpoints):
				// dropping them would lose them. Private_Dirty is no such
				// sign: it also counts page-cache pages not yet written
				// back, as those of a binary just built.
				dirty = dirty || kb != 0
			}
			continue
		}
		// A mapping's header: start-end perms offset dev inode [path].
		flush()
		cur, ok, dirty = mapping{}, false, false
		if len(fields) < 6 || string(fields[5]) != path || len(fields[1]) < 4 || fields[1][1] == 'w' {
			continue
		}
		lo, hi, found := bytes.Cut(fields[0], []byte("-"))
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if !found || err1 != nil || err2 != nil {
			continue
		}
		cur, ok = mapping{start: uintptr(start), end: uintptr(end)}, true
	}
	flush()
	return out
}

// splitFields appends the space-separated fields of line to dst, without
// copying them.
func splitFields(line []byte, dst [][]byte) [][]byte {
	for {
		line = bytes.TrimLeft(line, " \t")
		if len(line) == 0 {
			return dst
		}
		end := bytes.IndexAny(line, " \t")
		if end < 0 {
			return append(dst, line)
		}
		dst = append(dst, line[:end])
		line = line[end:]
	}
}

// residentBytes is the process's resident set size and its file-backed
// part (pages of the binary and other mapped files: /proc/self/statm's
// resident and shared fields), 0 when they cannot be read.
func residentBytes() (total, file uint64) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return 0, 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	shared, _ := strconv.ParseUint(f[2], 10, 64)
	size := uint64(os.Getpagesize())
	return pages * size, shared * size
}
