package console

import (
	"bytes"
	"fmt"
	"net/http"
)

// Chart geometry: one bar a second.
const (
	chartW, chartH = 600, 120
	barW           = chartW / chartSeconds
)

// chartSVG draws the calls (and, over them, the errors) of each of the
// last chartSeconds seconds as bars, scaled to the busiest second.
func chartSVG(calls, errs []int) []byte {
	peak := 1
	for _, n := range calls {
		peak = max(peak, n)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img">`, chartW, chartH+14, chartW, chartH+14)
	fmt.Fprintf(&b, `<title>Calls and errors per second, last %d seconds; peak %d/s</title>`, chartSeconds, peak)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff" stroke="#dde1e6"/>`, chartW, chartH)
	bar := func(class, fill string, i, n int) {
		h := n * (chartH - 4) / peak
		if n > 0 && h == 0 {
			h = 1
		}
		fmt.Fprintf(&b, `<rect class="%s" data-n="%d" x="%d" y="%d" width="%d" height="%d" fill="%s"/>`, class, n, i*barW+1, chartH-h, barW-2, h, fill)
	}
	for i := range calls {
		if calls[i] > 0 {
			bar("calls", "#2f6fd0", i, calls[i])
		}
		if errs[i] > 0 {
			bar("errors", "#a3262a", i, errs[i])
		}
	}
	fmt.Fprintf(&b, `<text x="2" y="%d" font-size="11" font-family="sans-serif" fill="#555">-%ds</text>`, chartH+12, chartSeconds)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" font-family="sans-serif" fill="#555" text-anchor="end">now · peak %d/s</text></svg>`, chartW-2, chartH+12, peak)
	return b.Bytes()
}

func (c *Console) chart(w http.ResponseWriter, r *http.Request) {
	if c.whoIs(r).identity == "" {
		http.Error(w, "log in first", http.StatusUnauthorized)
		return
	}
	calls, errs := c.tail.rates()
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Write(chartSVG(calls, errs))
}
