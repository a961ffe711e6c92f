package ociwasm

import (
	"crypto/x509"
	"fmt"
	"time"
)

// A trusted root's entries each say when they may be used (validFor): a
// log's key for entries and timestamps of that period, a certificate
// authority or timestamp authority for times in it. Rotation lists the old
// entry with an end and the new one with a start.

// window is a validFor period; a zero end is open.
type window struct{ start, end time.Time }

// validForJSON is a trusted root entry's validFor.
type validForJSON struct {
	ValidFor *struct {
		Start string `json:"start"`
		End   string `json:"end"`
	} `json:"validFor"`
}

// window parses the entry's period; without one it is always valid.
func (v validForJSON) window() (window, error) {
	var w window
	if v.ValidFor == nil {
		return w, nil
	}
	var err error
	if v.ValidFor.Start != "" {
		if w.start, err = time.Parse(time.RFC3339Nano, v.ValidFor.Start); err != nil {
			return w, fmt.Errorf("validFor start: %w", err)
		}
	}
	if v.ValidFor.End != "" {
		if w.end, err = time.Parse(time.RFC3339Nano, v.ValidFor.End); err != nil {
			return w, fmt.Errorf("validFor end: %w", err)
		}
	}
	return w, nil
}

func (w window) contains(t time.Time) bool {
	return !t.Before(w.start) && (w.end.IsZero() || !t.After(w.end))
}

func (w window) String() string {
	end := "open"
	if !w.end.IsZero() {
		end = w.end.UTC().Format(time.RFC3339)
	}
	return w.start.UTC().Format(time.RFC3339) + " to " + end
}

// anchors maps a trusted root's chains, by their root certificate, to
// the periods they are valid for (several entries may share a root).
type anchors map[string][]window

func (a anchors) add(root *x509.Certificate, w window) {
	a[string(root.Raw)] = append(a[string(root.Raw)], w)
}

// check reports whether the chain's root is valid at t.
func (a anchors) check(chain []*x509.Certificate, t time.Time, what string) error {
	ws := a[string(chain[len(chain)-1].Raw)]
	for _, w := range ws {
		if w.contains(t) {
			return nil
		}
	}
	return fmt.Errorf("%s %q is not valid at %s (validFor %v)", what, chain[len(chain)-1].Subject.CommonName, t.UTC().Format(time.RFC3339), ws)
}
