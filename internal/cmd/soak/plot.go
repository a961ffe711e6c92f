package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
)

// plotFiles draws the CSV files of runs (the first "before", the second
// "after") into one PNG: RSS, goroutines and calls served per second,
// one panel each, one point a second.
func plotFiles(files []string, out string) error {
	runs := make([][]sample, len(files))
	for i, f := range files {
		s, err := readCSV(f)
		if err != nil {
			return err
		}
		runs[i] = s
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = strings.ToUpper(strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)))
	}
	img := plot(runs, names)
	fh, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := png.Encode(fh, img); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// Layout of the picture, in pixels.
const (
	plotW, panelH   = 960, 200
	marginL, margin = 70, 46
)

var (
	white  = color.RGBA{255, 255, 255, 255}
	black  = color.RGBA{0, 0, 0, 255}
	grey   = color.RGBA{210, 210, 210, 255}
	colors = []color.RGBA{{214, 39, 40, 255}, {31, 119, 180, 255}, {44, 160, 44, 255}}
)

// panel is one quantity drawn against time.
type panel struct {
	title string
	value func(sample) float64
}

func plot(runs [][]sample, names []string) *image.RGBA {
	panels := []panel{
		{"RSS MIB", func(s sample) float64 { return s.RSS }},
		{"GOROUTINES", func(s sample) float64 { return float64(s.Goroutines) }},
		{"CALLS SERVED PER SECOND", func(s sample) float64 { return float64(s.Served) }},
	}
	h := margin + len(panels)*(panelH+margin) + margin
	img := image.NewRGBA(image.Rect(0, 0, plotW, h))
	fill(img, img.Bounds(), white)
	tmax := 1.0
	for _, r := range runs {
		for _, s := range r {
			tmax = max(tmax, s.T)
		}
	}
	// Legend.
	x := marginL
	for i, n := range names {
		fill(img, image.Rect(x, 10, x+20, 16), colors[i%len(colors)])
		x = text(img, x+26, 8, n, black) + 30
	}
	for pi, p := range panels {
		top := margin + 10 + pi*(panelH+margin)
		area := image.Rect(marginL, top, plotW-margin, top+panelH)
		vmax := 1.0
		for _, r := range runs {
			for _, s := range r {
				vmax = max(vmax, p.value(s))
			}
		}
		vmax = niceCeil(vmax * 1.05)
		frame(img, area, tmax, vmax, p.title)
		for i, r := range runs {
			c := colors[i%len(colors)]
			var px, py int
			for j, s := range r {
				sx := area.Min.X + int(s.T/tmax*float64(area.Dx()))
				sy := area.Max.Y - int(p.value(s)/vmax*float64(area.Dy()))
				if j > 0 {
					line(img, px, py, sx, sy, c)
				}
				px, py = sx, sy
			}
		}
	}
	return img
}

// frame draws a panel's axes, grid, scale and title.
func frame(img *image.RGBA, a image.Rectangle, tmax, vmax float64, title string) {
	for i := 0; i <= 4; i++ {
		y := a.Max.Y - i*a.Dy()/4
		line(img, a.Min.X, y, a.Max.X, y, grey)
		label := trimFloat(vmax * float64(i) / 4)
		text(img, a.Min.X-8-textWidth(label), y-5, label, black)
	}
	step := 30.0
	if tmax <= 60 {
		step = 10
	}
	for t := 0.0; t <= tmax+0.01; t += step {
		x := a.Min.X + int(t/tmax*float64(a.Dx()))
		line(img, x, a.Max.Y, x, a.Max.Y+4, black)
		label := trimFloat(t) + "S"
		text(img, x-textWidth(label)/2, a.Max.Y+8, label, black)
	}
	line(img, a.Min.X, a.Min.Y, a.Min.X, a.Max.Y, black)
	line(img, a.Min.X, a.Max.Y, a.Max.X, a.Max.Y, black)
	text(img, a.Min.X+6, a.Min.Y-14, title, black)
}

func trimFloat(v float64) string {
	if v == float64(int(v)) {
		return fmt.Sprint(int(v))
	}
	return fmt.Sprintf("%.1f", v)
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := 1.0
	for p*10 <= v {
		p *= 10
	}
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

// line draws from (x0,y0) to (x1,y1), two pixels wide (Bresenham).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		img.SetRGBA(x0, y0, c)
		img.SetRGBA(x0, y0+1, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

// font is a 3×5 pixel font of the characters the picture uses, each row
// three bits ('#' set), drawn at scale 2.
var font = map[rune][5]string{
	'0': {"###", "#.#", "#.#", "#.#", "###"}, '1': {".#.", "##.", ".#.", ".#.", "###"},
	'2': {"###", "..#", "###", "#..", "###"}, '3': {"###", "..#", ".##", "..#", "###"},
	'4': {"#.#", "#.#", "###", "..#", "..#"}, '5': {"###", "#..", "###", "..#", "###"},
	'6': {"###", "#..", "###", "#.#", "###"}, '7': {"###", "..#", ".#.", ".#.", ".#."},
	'8': {"###", "#.#", "###", "#.#", "###"}, '9': {"###", "#.#", "###", "..#", "###"},
	'A': {".#.", "#.#", "###", "#.#", "#.#"}, 'B': {"##.", "#.#", "##.", "#.#", "##."},
	'C': {".##", "#..", "#..", "#..", ".##"}, 'D': {"##.", "#.#", "#.#", "#.#", "##."},
	'E': {"###", "#..", "##.", "#..", "###"}, 'F': {"###", "#..", "##.", "#..", "#.."},
	'G': {".##", "#..", "#.#", "#.#", ".##"}, 'H': {"#.#", "#.#", "###", "#.#", "#.#"},
	'I': {"###", ".#.", ".#.", ".#.", "###"}, 'J': {"..#", "..#", "..#", "#.#", ".#."},
	'K': {"#.#", "#.#", "##.", "#.#", "#.#"}, 'L': {"#..", "#..", "#..", "#..", "###"},
	'M': {"#.#", "###", "###", "#.#", "#.#"}, 'N': {"##.", "#.#", "#.#", "#.#", "#.#"},
	'O': {".#.", "#.#", "#.#", "#.#", ".#."}, 'P': {"##.", "#.#", "##.", "#..", "#.."},
	'Q': {".#.", "#.#", "#.#", "##.", ".##"}, 'R': {"##.", "#.#", "##.", "#.#", "#.#"},
	'S': {".##", "#..", ".#.", "..#", "##."}, 'T': {"###", ".#.", ".#.", ".#.", ".#."},
	'U': {"#.#", "#.#", "#.#", "#.#", "###"}, 'V': {"#.#", "#.#", "#.#", "#.#", ".#."},
	'W': {"#.#", "#.#", "###", "###", "#.#"}, 'X': {"#.#", "#.#", ".#.", "#.#", "#.#"},
	'Y': {"#.#", "#.#", ".#.", ".#.", ".#."}, 'Z': {"###", "..#", ".#.", "#..", "###"},
	'.': {"...", "...", "...", "...", ".#."}, '-': {"...", "...", "###", "...", "..."},
	'/': {"..#", "..#", ".#.", "#..", "#.."}, '(': {".#.", "#..", "#..", "#..", ".#."},
	')': {".#.", "..#", "..#", "..#", ".#."}, ' ': {"...", "...", "...", "...", "..."},
	'_': {"...", "...", "...", "...", "###"}, ':': {"...", ".#.", "...", ".#.", "..."},
}

const glyphScale = 2

func textWidth(s string) int { return len([]rune(s)) * 4 * glyphScale }

// text draws s (upper case) at (x, y) and returns the x after it.
func text(img *image.RGBA, x, y int, s string, c color.RGBA) int {
	for _, r := range strings.ToUpper(s) {
		g, ok := font[r]
		if !ok {
			g = font[' ']
		}
		for row, bits := range g {
			for col, b := range bits {
				if b == '#' {
					fill(img, image.Rect(x+col*glyphScale, y+row*glyphScale, x+(col+1)*glyphScale, y+(row+1)*glyphScale), c)
				}
			}
		}
		x += 4 * glyphScale
	}
	return x
}
