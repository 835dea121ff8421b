// Package report gives the example programs one command-line experience:
// progress on standard error (a bar on a terminal, plain lines elsewhere),
// CSV and JSON files, PNG line plots made with gonum/plot (Plot), and the
// final machine-readable result line.
package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Table is a named table of rows for CSV and JSON output.
type Table struct {
	Columns []string
	Rows    [][]any
}

// Add appends a row; it must have one value per column.
func (t *Table) Add(values ...any) {
	if len(values) != len(t.Columns) {
		panic(fmt.Sprintf("report: row of %d values for %d columns", len(values), len(t.Columns)))
	}
	t.Rows = append(t.Rows, values)
}

func format(v any) string {
	switch v := v.(type) {
	case float64:
		return strconv.FormatFloat(v, 'g', 10, 64)
	case time.Duration:
		return strconv.FormatFloat(v.Seconds(), 'g', 6, 64)
	}
	return fmt.Sprint(v)
}

// WriteCSV writes the table to path.
func (t *Table) WriteCSV(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write(t.Columns)
	for _, r := range t.Rows {
		rec := make([]string, len(r))
		for i, v := range r {
			rec[i] = format(v)
		}
		w.Write(rec)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteJSON writes v, indented, to path.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Result prints the final line, "result: key=value ...", with the keys in
// sorted order, to w. A float that is NaN or infinite is not printed: its
// key is listed instead in the value of the key "undefined" (a precision
// with nothing flagged, say), so that no NaN reaches a script reading the
// line.
func Result(w io.Writer, kv map[string]any) {
	keys := make([]string, 0, len(kv))
	var undefined []string
	for k, v := range kv {
		if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			undefined = append(undefined, k)
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(undefined)
	parts := make([]string, 0, len(keys)+1)
	if len(undefined) > 0 {
		keys = append(keys, "undefined")
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := kv[k]
		if k == "undefined" && len(undefined) > 0 {
			v = strings.Join(undefined, ",")
		}
		parts = append(parts, k+"="+format(v))
	}
	fmt.Fprintln(w, "result: "+strings.Join(parts, " "))
}

// OutDir creates dir (and its parents) and returns a function joining
// file names onto it.
func OutDir(dir string) (func(name string) string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the output folder: %w", err)
	}
	return func(name string) string { return filepath.Join(dir, name) }, nil
}
