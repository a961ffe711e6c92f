package pinning

import (
	"fmt"
	"strings"
)

// opKind is one step of a line edit script.
type opKind byte

const (
	opKeep opKind = ' '
	opDel  opKind = '-'
	opIns  opKind = '+'
)

// op is one line of an edit script turning the old text into the new.
type op struct {
	kind opKind
	line string
}

// maxLCSCells bounds the dynamic-programming table of the line diff. Tool
// definitions are small; beyond this (a hostile or absurd definition) the
// differing middle is shown as wholly removed and added instead.
const maxLCSCells = 1 << 20

// diffContext is how many unchanged lines surround each change.
const diffContext = 3

// lineDiff returns an edit script from a to b that keeps a longest common
// subsequence of lines.
func lineDiff(a, b []string) []op {
	// Common prefix and suffix cost nothing and shrink the table.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ops := make([]op, 0, len(a)+len(b))
	for _, l := range a[:pre] {
		ops = append(ops, op{opKeep, l})
	}
	ops = append(ops, lcsDiff(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, op{opKeep, l})
	}
	return ops
}

// lcsDiff diffs two slices with no common prefix or suffix.
func lcsDiff(a, b []string) []op {
	n, m := len(a), len(b)
	ops := make([]op, 0, n+m)
	if n == 0 || m == 0 || n*m > maxLCSCells {
		for _, l := range a {
			ops = append(ops, op{opDel, l})
		}
		for _, l := range b {
			ops = append(ops, op{opIns, l})
		}
		return ops
	}
	// t[i*(m+1)+j] is the LCS length of a[i:] and b[j:].
	t := make([]int32, (n+1)*(m+1))
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				t[i*(m+1)+j] = t[(i+1)*(m+1)+j+1] + 1
			} else {
				t[i*(m+1)+j] = max(t[(i+1)*(m+1)+j], t[i*(m+1)+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			ops = append(ops, op{opKeep, a[i]})
			i++
			j++
		case t[(i+1)*(m+1)+j] >= t[i*(m+1)+j+1]:
			ops = append(ops, op{opDel, a[i]})
			i++
		default:
			ops = append(ops, op{opIns, b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		ops = append(ops, op{opDel, a[i]})
	}
	for ; j < m; j++ {
		ops = append(ops, op{opIns, b[j]})
	}
	return ops
}

// unifiedDiff renders the difference between two texts line by line, in the
// style of a unified diff: a "@@ -l,n +l,n @@" header per hunk, then lines
// prefixed with "- " (only in old), "+ " (only in new) or "  " (context).
// It returns "" when the texts are equal.
func unifiedDiff(oldName, newName, old, new string) string {
	ops := lineDiff(splitLines(old), splitLines(new))
	var sb strings.Builder
	for start := 0; start < len(ops); {
		// Find the next change.
		first := start
		for first < len(ops) && ops[first].kind == opKeep {
			first++
		}
		if first == len(ops) {
			break
		}
		// Extend the hunk while changes are close enough to share context.
		last := first
		for k := first; k < len(ops); k++ {
			if ops[k].kind != opKeep {
				last = k
			} else if k-last > 2*diffContext {
				break
			}
		}
		lo := max(first-diffContext, start)
		hi := min(last+diffContext+1, len(ops))

		if sb.Len() == 0 {
			fmt.Fprintf(&sb, "--- %s\n+++ %s\n", oldName, newName)
		}
		oldLine, newLine := 1, 1
		for _, o := range ops[:lo] {
			if o.kind != opIns {
				oldLine++
			}
			if o.kind != opDel {
				newLine++
			}
		}
		oldN, newN := 0, 0
		for _, o := range ops[lo:hi] {
			if o.kind != opIns {
				oldN++
			}
			if o.kind != opDel {
				newN++
			}
		}
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n", hunkRange(oldLine, oldN), hunkRange(newLine, newN))
		for _, o := range ops[lo:hi] {
			sb.WriteByte(byte(o.kind))
			sb.WriteByte(' ')
			sb.WriteString(o.line)
			sb.WriteByte('\n')
		}
		start = hi
	}
	return sb.String()
}

// hunkRange formats a hunk's line range; an empty range names the line
// before it, as unified diffs do.
func hunkRange(line, n int) string {
	if n == 0 {
		line--
	}
	return fmt.Sprintf("%d,%d", line, n)
}

// splitLines splits text into lines; "" has none.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
