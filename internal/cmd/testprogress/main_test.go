package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSummarise runs go test -json on a small module of its own (a
// passing, a slow and a failing package) and summarises it.
func TestSummarise(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":            "module sample\n\ngo 1.24\n",
		"good/good_test.go": "package good\n\nimport \"testing\"\n\nfunc TestGood(t *testing.T) {\n\tt.Log(\"quiet when passing\")\n\tt.Run(\"sub\", func(t *testing.T) {})\n}\n",
		"slow/slow_test.go": "package slow\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestSlow(t *testing.T) { time.Sleep(1500 * time.Millisecond) }\n",
		"bad/bad_test.go":   "package bad\n\nimport \"testing\"\n\nfunc TestBad(t *testing.T) { t.Fatal(\"this is why\") }\n",
	}
	for name, text := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-json", "-count=1", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	raw, _ := cmd.Output() // exits 1: a test fails
	var out bytes.Buffer
	ok := summarise(slowReader{bytes.NewReader(raw)}, &out, 20*time.Millisecond, time.Now)
	got := out.String()
	if ok {
		t.Errorf("a failing run summarised as passing:\n%s", got)
	}
	for _, want := range []string{"--- FAIL: TestBad", "this is why", "FAIL\tsample/bad", "ok  \tsample/good", "ok  \tsample/slow", "packages done"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "quiet when passing") {
		t.Errorf("a passing test's log is shown:\n%s", got)
	}
	// It ends with the slowest top-level tests, slowest first, after go
	// test's closing lines; subtests are in their parents' time.
	_, tail, found := strings.Cut(got, "the 3 slowest tests:\n")
	if !found {
		t.Fatalf("the summary does not name the slowest tests:\n%s", got)
	}
	if strings.Contains(tail, "ok  \t") || strings.Contains(tail, "FAIL\t") {
		t.Errorf("go test's closing lines come after the slowest tests:\n%s", got)
	}
	slow := strings.Split(strings.TrimSpace(tail), "\n")
	if len(slow) != 3 || !strings.HasSuffix(slow[0], "s  sample/slow TestSlow") || strings.Contains(tail, "TestGood/sub") {
		t.Errorf("the slowest tests are not TestSlow first, then the other two top-level tests:\n%s", tail)
	}

	// A run cut off in the middle fails and says which packages ran on.
	cut := raw[:bytes.Index(raw, []byte(`"Action":"start","Package":"sample/slow"`))]
	cut = append(cut[:bytes.LastIndexByte(cut, '\n')+1], []byte(`{"Action":"start","Package":"sample/slow"}`+"\n")...)
	out.Reset()
	if summarise(bytes.NewReader(cut), &out, time.Hour, time.Now) || !strings.Contains(out.String(), "still running: sample/slow") {
		t.Errorf("a cut-off run: %s", out.String())
	}
}

// TestSlowestTen: of twelve tests only the ten slowest are named, slowest
// first, from the elapsed times go test reports.
func TestSlowestTen(t *testing.T) {
	var in strings.Builder
	for i := range 12 {
		fmt.Fprintf(&in, `{"Action":"pass","Package":"p","Test":"Test%02d","Elapsed":%d.5}`+"\n", i, i)
	}
	in.WriteString(`{"Action":"pass","Package":"p","Test":"Test11/sub","Elapsed":99}` + "\n")
	var out bytes.Buffer
	if !summarise(strings.NewReader(in.String()), &out, time.Hour, time.Now) {
		t.Errorf("a passing run summarised as failing:\n%s", out.String())
	}
	want := "the 10 slowest tests:\n"
	for i := 11; i >= 2; i-- {
		want += fmt.Sprintf("%8.2fs  p Test%02d\n", float64(i)+0.5, i)
	}
	if got := out.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestTimeoutShown: a test binary killed by go test's -timeout fails no
// test; the panic naming the test that ran, held back as that test's
// output, is printed with the package's FAIL.
func TestTimeoutShown(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":            "module sample\n\ngo 1.24\n",
		"hang/hang_test.go": "package hang\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestHang(t *testing.T) { time.Sleep(time.Minute) }\n",
	}
	for name, text := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-json", "-count=1", "-timeout=1s", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	raw, _ := cmd.Output() // exits 1: the test binary times out
	var out bytes.Buffer
	if summarise(bytes.NewReader(raw), &out, time.Hour, time.Now) {
		t.Errorf("a timed-out run summarised as passing:\n%s", out.String())
	}
	for _, want := range []string{"panic: test timed out after 1s", "running tests:", "TestHang", "FAIL\tsample/hang"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// slowReader hands its data out a line at a time with a pause, as a
// running go test does, so that progress lines get their turn.
type slowReader struct{ r *bytes.Reader }

func (s slowReader) Read(p []byte) (int, error) {
	time.Sleep(5 * time.Millisecond)
	line := make([]byte, 0, len(p))
	for len(line) < len(p) {
		c, err := s.r.ReadByte()
		if err != nil {
			if len(line) > 0 {
				return copy(p, line), nil
			}
			return 0, err
		}
		line = append(line, c)
		if c == '\n' {
			break
		}
	}
	return copy(p, line), nil
}
