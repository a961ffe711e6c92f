package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"time"
)

// sample is one second of the scenario.
type sample struct {
	T              float64 // seconds since the load started
	RSS            float64 // MiB
	Goroutines     int
	Served, Failed int // calls answered in that second
}

// report is what a run measured.
type report struct {
	Calls, Served, Unredacted, Unanswered int
	Failed                                map[string]int
	Outages                               []time.Duration // as the clients saw them: first failure to next success
	UpstreamDown                          []time.Duration
	RSSBefore, RSSPeak, RSSAfter          float64
	GoroutinesBefore, GoroutinesAfter     int
	Samples                               []sample
}

// tally counts the results and finds the outages the clients saw.
func (r *report) tally(rs []result) {
	sortByEnd(rs)
	var down time.Time
	for _, x := range rs {
		r.Calls++
		switch x.reason {
		case "":
			r.Served++
			if !down.IsZero() {
				r.Outages = append(r.Outages, x.end.Sub(down))
				down = time.Time{}
			}
			continue
		case "UNREDACTED":
			r.Unredacted++
		case "no answer within 20s":
			r.Unanswered++
		}
		r.Failed[x.reason]++
		if down.IsZero() {
			down = x.end
		}
	}
}

// ServedShare is the share of calls served, 0 to 1.
func (r *report) ServedShare() float64 {
	if r.Calls == 0 {
		return 0
	}
	return float64(r.Served) / float64(r.Calls)
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "calls      %d\n", r.Calls)
	fmt.Fprintf(w, "served     %d (%.1f%%)\n", r.Served, 100*r.ServedShare())
	reasons := make([]string, 0, len(r.Failed))
	for k := range r.Failed {
		reasons = append(reasons, k)
	}
	sort.Strings(reasons)
	for _, k := range reasons {
		fmt.Fprintf(w, "failed     %d  %s\n", r.Failed[k], k)
	}
	fmt.Fprintf(w, "unanswered %d\nunredacted %d\n", r.Unanswered, r.Unredacted)
	fmt.Fprintf(w, "upstream down (s):  %s\n", durations(r.UpstreamDown))
	fmt.Fprintf(w, "outages seen (s):   %s\n", durations(r.Outages))
	fmt.Fprintf(w, "RSS MiB    before %.1f  peak %.1f  after %.1f (%+.1f)\n", r.RSSBefore, r.RSSPeak, r.RSSAfter, r.RSSAfter-r.RSSBefore)
	fmt.Fprintf(w, "goroutines before %d  after %d\n", r.GoroutinesBefore, r.GoroutinesAfter)
}

func durations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := ""
	for i, d := range ds {
		if i > 0 {
			s += " "
		}
		s += strconv.FormatFloat(d.Seconds(), 'f', 1, 64)
	}
	return s
}

// writeCSV writes the samples: t, rss_mib, goroutines, served, failed.
func (r *report) writeCSV(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"t", "rss_mib", "goroutines", "served", "failed"})
	for _, s := range r.Samples {
		w.Write([]string{strconv.FormatFloat(s.T, 'f', 1, 64), strconv.FormatFloat(s.RSS, 'f', 1, 64),
			strconv.Itoa(s.Goroutines), strconv.Itoa(s.Served), strconv.Itoa(s.Failed)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readCSV reads what writeCSV wrote.
func readCSV(path string) ([]sample, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []sample
	for i, row := range rows {
		if i == 0 || len(row) < 5 {
			continue
		}
		var s sample
		var errs [5]error
		s.T, errs[0] = strconv.ParseFloat(row[0], 64)
		s.RSS, errs[1] = strconv.ParseFloat(row[1], 64)
		s.Goroutines, errs[2] = strconv.Atoi(row[2])
		s.Served, errs[3] = strconv.Atoi(row[3])
		s.Failed, errs[4] = strconv.Atoi(row[4])
		for _, e := range errs {
			if e != nil {
				return nil, fmt.Errorf("%s line %d: %w", path, i+1, e)
			}
		}
		out = append(out, s)
	}
	return out, nil
}
