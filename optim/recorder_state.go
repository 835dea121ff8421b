package optim

import (
	"bytes"
	"encoding"
	"encoding/gob"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/gobilevel/bilevel/oracle"
)

// Recorders save their position in checkpoints through
// encoding.BinaryMarshaler and get it back on Resume through
// encoding.BinaryUnmarshaler.
var (
	_ encoding.BinaryMarshaler   = (*MemoryRecorder)(nil)
	_ encoding.BinaryUnmarshaler = (*MemoryRecorder)(nil)
	_ encoding.BinaryMarshaler   = (*CSVRecorder)(nil)
	_ encoding.BinaryUnmarshaler = (*CSVRecorder)(nil)
)

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// memoryRecorderWire is the encoded form of a MemoryRecorder. Metrics are
// lists, not gob maps, for the reason given at stateWire.
type memoryRecorderWire struct {
	Version int
	Records []recordWire
}

type recordWire struct {
	Iter          int
	Time          time.Duration
	Calls         oracle.Calls
	Upper         float64
	HypergradNorm float64
	HasMetrics    bool
	Metrics       []namedScalar
}

// MarshalBinary encodes every Record kept so far, for a checkpoint.
func (m *MemoryRecorder) MarshalBinary() ([]byte, error) {
	w := memoryRecorderWire{Version: 1, Records: make([]recordWire, len(m.Records))}
	for i, r := range m.Records {
		rw := recordWire{Iter: r.Iter, Time: r.Time, Calls: r.Calls, Upper: r.Upper, HypergradNorm: r.HypergradNorm, HasMetrics: r.Metrics != nil}
		for _, k := range slices.Sorted(maps.Keys(r.Metrics)) {
			rw.Metrics = append(rw.Metrics, namedScalar{k, r.Metrics[k]})
		}
		w.Records[i] = rw
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&w); err != nil {
		return nil, fmt.Errorf("MemoryRecorder: %w", err)
	}
	return buf.Bytes(), nil
}

// UnmarshalBinary replaces the kept Records by those encoded in data, so
// that a resumed run's MemoryRecorder holds the whole run.
func (m *MemoryRecorder) UnmarshalBinary(data []byte) error {
	var w memoryRecorderWire
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&w); err != nil {
		return fmt.Errorf("MemoryRecorder: decoding: %w", err)
	}
	if w.Version != 1 {
		return fmt.Errorf("MemoryRecorder: version %d, this package reads version 1", w.Version)
	}
	recs := make([]Record, len(w.Records))
	for i, rw := range w.Records {
		if i > 0 && rw.Iter != w.Records[i-1].Iter+1 {
			return fmt.Errorf("MemoryRecorder: record %d is for iteration %d, after iteration %d", i, rw.Iter, w.Records[i-1].Iter)
		}
		r := Record{Iter: rw.Iter, Time: rw.Time, Calls: rw.Calls, Upper: rw.Upper, HypergradNorm: rw.HypergradNorm}
		if rw.HasMetrics {
			r.Metrics = make(map[string]float64, len(rw.Metrics))
			for _, v := range rw.Metrics {
				r.Metrics[v.Name] = v.V
			}
		}
		recs[i] = r
	}
	m.Records = recs
	return nil
}

// csvRecorderWire is the encoded form of a CSVRecorder's position.
type csvRecorderWire struct {
	Version int
	Header  bool
	Offset  int64 // bytes written, header included
	Rows    int64 // data rows written
	Metrics []string
}

// MarshalBinary flushes the recorder and encodes its position: whether the
// header is written, the number of rows and of bytes written.
func (c *CSVRecorder) MarshalBinary() ([]byte, error) {
	if err := c.Flush(); err != nil {
		return nil, fmt.Errorf("CSVRecorder: %w", err)
	}
	var buf bytes.Buffer
	w := csvRecorderWire{Version: 1, Header: c.header, Offset: c.out.n, Rows: c.rows, Metrics: c.metrics}
	if err := gob.NewEncoder(&buf).Encode(&w); err != nil {
		return nil, fmt.Errorf("CSVRecorder: %w", err)
	}
	return buf.Bytes(), nil
}

// UnmarshalBinary moves the recorder to the position encoded in data, taken
// by MarshalBinary when a checkpoint was written: the header is not written
// again, and if the recorder's writer can be truncated and seeked (an
// *os.File opened for writing, say) it is cut back to the
// checkpoint's length, dropping the rows that a killed run wrote after its
// last checkpoint. The resumed run's CSV file is then the file an
// uninterrupted run would have written (times aside). Other writers are
// left as they are: new rows follow whatever they hold.
//
// The metric columns must be those of the checkpointed recorder.
func (c *CSVRecorder) UnmarshalBinary(data []byte) error {
	var w csvRecorderWire
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&w); err != nil {
		return fmt.Errorf("CSVRecorder: decoding: %w", err)
	}
	switch {
	case w.Version != 1:
		return fmt.Errorf("CSVRecorder: version %d, this package reads version 1", w.Version)
	case w.Offset < 0 || w.Rows < 0 || (!w.Header && (w.Rows > 0 || w.Offset > 0)):
		return fmt.Errorf("CSVRecorder: impossible position: header %t, %d rows, %d bytes", w.Header, w.Rows, w.Offset)
	case !slices.Equal(w.Metrics, c.metrics):
		return fmt.Errorf("CSVRecorder: the checkpoint's CSV has metric columns %q, this recorder %q: pass the same names to NewCSVRecorder", w.Metrics, c.metrics)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("CSVRecorder: %w", err)
	}
	if f, ok := c.out.w.(interface {
		Truncate(int64) error
		Seek(int64, int) (int64, error)
	}); ok {
		end, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			return fmt.Errorf("CSVRecorder: %w", err)
		}
		if end < w.Offset {
			return fmt.Errorf("CSVRecorder: the file holds %d bytes, fewer than the %d the checkpoint says were written: it is not the run's CSV file, or it was truncated", end, w.Offset)
		}
		if err := f.Truncate(w.Offset); err != nil {
			return fmt.Errorf("CSVRecorder: %w", err)
		}
		if _, err := f.Seek(w.Offset, io.SeekStart); err != nil {
			return fmt.Errorf("CSVRecorder: %w", err)
		}
	}
	c.header, c.rows, c.out.n = w.Header, w.Rows, w.Offset
	return nil
}
