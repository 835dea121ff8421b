package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestResult(t *testing.T) {
	var b bytes.Buffer
	Result(&b, map[string]any{"b": 2, "a": 0.5, "t": 1500 * time.Millisecond})
	if got, want := b.String(), "result: a=0.5 b=2 t=1.5\n"; got != want {
		t.Errorf("Result wrote %q, want %q", got, want)
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	tab := Table{Columns: []string{"n", "err"}}
	tab.Add(1, 0.25)
	tab.Add(2, 1e-9)
	if err := tab.WriteCSV(filepath.Join(dir, "t.csv")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "t.csv"))
	if got, want := string(b), "n,err\n1,0.25\n2,1e-09\n"; got != want {
		t.Errorf("CSV %q, want %q", got, want)
	}
	png := filepath.Join(dir, "p.png")
	if err := LinePlot(png, "t", "x", "y", true, Series{"a", []float64{1, 2, 3}, []float64{1, 0.1, 0}}); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(png)
	if !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("plot is not a PNG (%d bytes)", len(b))
	}
	var pb bytes.Buffer
	p := &Progress{W: &pb, Label: "work", Total: 2}
	p.Step("a")
	p.Step("b")
	if s := pb.String(); !strings.Contains(s, "2/2") || !strings.HasSuffix(s, "\n") {
		t.Errorf("progress bar wrote %q", s)
	}
}
