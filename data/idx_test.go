package data

import (
	"bytes"
	"compress/gzip"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// encodeIDX returns the raw IDX encoding of m, failing the test on error.
func encodeIDX(t testing.TB, m *IDX) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteIDX(&b, m); err != nil {
		t.Fatalf("WriteIDX: %v", err)
	}
	return b.Bytes()
}

func gzipBytes(t testing.TB, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sameIDX reports whether a and b hold the same type, dimensions and
// elements (stored as bytes or given as values), comparing floats bit for
// bit.
func sameIDX(a, b *IDX) bool {
	if a.Type != b.Type || !slices.Equal(a.Dims, b.Dims) {
		return false
	}
	av, bv := a.Float64s(nil), b.Float64s(nil)
	for i := range av {
		if math.Float64bits(av[i]) != math.Float64bits(bv[i]) {
			return false
		}
	}
	return true
}

func TestIDXRoundTrip(t *testing.T) {
	for _, test := range []struct {
		name string
		m    *IDX
		size int // expected encoded length
	}{
		{"uint8 images", &IDX{Type: IDXUint8, Dims: []int{2, 2, 3}, Bytes: []byte{0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255}}, 4 + 12 + 12},
		{"uint8 labels", &IDX{Type: IDXUint8, Dims: []int{5}, Bytes: []byte{9, 0, 0, 3, 2}}, 4 + 4 + 5},
		{"uint8 from values", &IDX{Type: IDXUint8, Dims: []int{3}, Values: []float64{0, 128, 255}}, 4 + 4 + 3},
		{"int8", &IDX{Type: IDXInt8, Dims: []int{4}, Values: []float64{-128, -1, 0, 127}}, 4 + 4 + 4},
		{"int16", &IDX{Type: IDXInt16, Dims: []int{2, 2}, Values: []float64{-32768, -2, 3, 32767}}, 4 + 8 + 8},
		{"int32", &IDX{Type: IDXInt32, Dims: []int{3}, Values: []float64{math.MinInt32, 7, math.MaxInt32}}, 4 + 4 + 12},
		{"float32", &IDX{Type: IDXFloat32, Dims: []int{1, 4}, Values: []float64{0.5, -1.25, math.Inf(1), 3.4028234663852886e38}}, 4 + 8 + 16},
		{"float64", &IDX{Type: IDXFloat64, Dims: []int{2}, Values: []float64{math.Pi, -math.SmallestNonzeroFloat64}}, 4 + 4 + 16},
		{"empty", &IDX{Type: IDXFloat64, Dims: []int{0, 5}, Values: []float64{}}, 4 + 8},
		{"empty with a huge dimension", &IDX{Type: IDXInt16, Dims: []int{math.MaxUint32, 0}, Values: []float64{}}, 4 + 8},
	} {
		t.Run(test.name, func(t *testing.T) {
			raw := encodeIDX(t, test.m)
			if len(raw) != test.size {
				t.Errorf("encoded length %d, want %d", len(raw), test.size)
			}
			want := test.m
			for _, in := range [][]byte{raw, gzipBytes(t, raw)} {
				got, err := ReadIDX(bytes.NewReader(in))
				if err != nil {
					t.Fatalf("ReadIDX: %v", err)
				}
				if !sameIDX(got, want) {
					t.Errorf("ReadIDX = %+v, want %+v", got, want)
				}
				// The elements stay in their stored width.
				if len(got.Bytes) != got.Len()*got.Type.Size() || got.Values != nil {
					t.Errorf("ReadIDX holds %d bytes and %d values for %d elements of %v", len(got.Bytes), len(got.Values), got.Len(), got.Type)
				}
				if !bytes.Equal(got.Bytes, raw[len(raw)-len(got.Bytes):]) {
					t.Errorf("ReadIDX's bytes are not the stored payload")
				}
				if got.Len() != len(want.Float64s(nil)) {
					t.Errorf("Len = %d, want %d", got.Len(), len(want.Float64s(nil)))
				}
			}
		})
	}
}

func TestReadIDXFile(t *testing.T) {
	dir := t.TempDir()
	m := &IDX{Type: IDXUint8, Dims: []int{2, 3}, Bytes: []byte{1, 2, 3, 4, 5, 6}}
	for _, name := range []string{"a-idx2-ubyte", "a-idx2-ubyte.gz"} {
		path := filepath.Join(dir, name)
		if err := WriteIDXFile(path, m); err != nil {
			t.Fatal(err)
		}
		head, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if gz := head[0] == 0x1f && head[1] == 0x8b; gz != strings.HasSuffix(name, ".gz") {
			t.Errorf("%s: gzip-compressed = %v", name, gz)
		}
		got, err := ReadIDXFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !sameIDX(got, m) {
			t.Errorf("%s: read %+v, want %+v", name, got, m)
		}
		// A truncated file gives an error naming the file.
		if err := os.WriteFile(path, head[:len(head)-3], 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = ReadIDXFile(path)
		var ie *IDXError
		if !errors.As(err, &ie) || ie.File != path || !strings.Contains(err.Error(), path+": offset ") {
			t.Errorf("%s truncated: error %v, want an *IDXError naming the file", name, err)
		}
	}
	_, err := ReadIDXFile(filepath.Join(dir, "missing"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: error %v, want os.ErrNotExist", err)
	}
}

func TestReadIDXTruncated(t *testing.T) {
	// 2 images of 2×2 float32: header 4, dims 12, payload 32; 48 bytes in all.
	m := &IDX{Type: IDXFloat32, Dims: []int{2, 2, 2}, Values: []float64{1, 2, 3, 4, 5, 6, 7, 8}}
	raw := encodeIDX(t, m)
	if len(raw) != 48 {
		t.Fatalf("encoded length %d, want 48", len(raw))
	}
	for _, test := range []struct {
		cut  int
		want string
	}{
		{0, "offset 0: header truncated: want 4 bytes, have 0"},
		{3, "offset 0: header truncated: want 4 bytes, have 3"},
		{4, "offset 4: dimensions truncated: want 12 bytes, have 0"},
		{9, "offset 4: dimensions truncated: want 12 bytes, have 5"},
		{16, "offset 16: payload truncated: want 32 bytes, have 0"},
		{17, "offset 16: payload truncated: want 32 bytes, have 1"},
		{47, "offset 16: payload truncated: want 32 bytes, have 31"},
	} {
		for _, gz := range []bool{false, true} {
			in := raw[:test.cut]
			if gz {
				in = gzipBytes(t, in)
			}
			_, err := ReadIDX(bytes.NewReader(in))
			if err == nil {
				t.Errorf("cut %d gzip %v: no error", test.cut, gz)
				continue
			}
			if got, want := err.Error(), "data: "+test.want; got != want {
				t.Errorf("cut %d gzip %v: error %q, want %q", test.cut, gz, got, want)
			}
		}
	}
	// A gzip stream that is itself cut short: the offset is the start of
	// the section that could not be completed.
	zipped := gzipBytes(t, raw)
	_, err := ReadIDX(bytes.NewReader(zipped[:len(zipped)-4]))
	var ie *IDXError
	if !errors.As(err, &ie) {
		t.Fatalf("truncated gzip: error %v, want *IDXError", err)
	}
}

func TestReadIDXErrors(t *testing.T) {
	valid := encodeIDX(t, &IDX{Type: IDXUint8, Dims: []int{2}, Bytes: []byte{7, 8}})
	badCRC := gzipBytes(t, valid)
	badCRC[len(badCRC)-8] ^= 0xff
	for _, test := range []struct {
		name string
		in   []byte
		want string
	}{
		{"bad magic", []byte{1, 0, 8, 1, 0, 0, 0, 0}, "offset 0: bad magic number 0x01000801"},
		{"unknown type", []byte{0, 0, 0x0a, 1, 0, 0, 0, 0}, "offset 2: unknown element type 0x0a"},
		{"no dimensions", []byte{0, 0, 8, 0}, "offset 3: no dimensions"},
		{"too many elements", []byte{0, 0, 8, 3, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 3}, "offset 8: dimensions [65536 65536 3] hold more than 2147483648 elements"},
		{"huge declared payload", []byte{0, 0, 0x0e, 2, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2}, "offset 12: payload truncated: want 17179869184 bytes, have 2"},
		{"trailing data", append(slices.Clone(valid), 0), "offset 10: trailing data after the payload"},
		{"bad gzip header", []byte{0x1f, 0x8b, 0}, "offset 0: bad gzip header"},
		{"bad gzip checksum", badCRC, "offset 10: after the payload: gzip: invalid checksum"},
	} {
		t.Run(test.name, func(t *testing.T) {
			_, err := ReadIDX(bytes.NewReader(test.in))
			if err == nil || !strings.HasPrefix(err.Error(), "data: "+test.want) {
				t.Errorf("error %v, want prefix %q", err, "data: "+test.want)
			}
			var ie *IDXError
			if !errors.As(err, &ie) {
				t.Errorf("error of type %T, want *IDXError", err)
			}
		})
	}
}

func TestWriteIDXErrors(t *testing.T) {
	for _, test := range []struct {
		name string
		m    *IDX
		want string
	}{
		{"unknown type", &IDX{Type: 7, Dims: []int{1}, Values: []float64{1}}, "unknown element type"},
		{"no dimensions", &IDX{Type: IDXInt8}, "0 dimensions"},
		{"negative dimension", &IDX{Type: IDXInt8, Dims: []int{-1}}, "dimension 0 is -1"},
		{"wrong byte count", &IDX{Type: IDXUint8, Dims: []int{3}, Bytes: []byte{1}}, "hold 3 elements of 1 bytes, have 1 bytes"},
		{"wrong value count", &IDX{Type: IDXInt16, Dims: []int{2, 2}, Values: []float64{1}}, "hold 4 elements, have 1 values"},
		{"fraction", &IDX{Type: IDXInt32, Dims: []int{1}, Values: []float64{0.5}}, "value 0 is 0.5"},
		{"out of range", &IDX{Type: IDXInt8, Dims: []int{2}, Values: []float64{1, 128}}, "value 1 is 128"},
		{"negative byte", &IDX{Type: IDXUint8, Dims: []int{1}, Values: []float64{-1}}, "value 0 is -1"},
		{"NaN integer", &IDX{Type: IDXInt16, Dims: []int{1}, Values: []float64{math.NaN()}}, "value 0 is NaN"},
	} {
		t.Run(test.name, func(t *testing.T) {
			err := WriteIDX(&bytes.Buffer{}, test.m)
			if err == nil || !strings.Contains(err.Error(), test.want) {
				t.Errorf("error %v, want one containing %q", err, test.want)
			}
		})
	}
}

func TestIDXTypeString(t *testing.T) {
	for _, test := range []struct {
		t    IDXType
		name string
		size int
	}{
		{IDXUint8, "uint8", 1}, {IDXInt8, "int8", 1}, {IDXInt16, "int16", 2},
		{IDXInt32, "int32", 4}, {IDXFloat32, "float32", 4}, {IDXFloat64, "float64", 8},
		{0x0a, "IDXType(0x0a)", 0},
	} {
		if got := test.t.String(); got != test.name {
			t.Errorf("String() = %q, want %q", got, test.name)
		}
		if got := test.t.Size(); got != test.size {
			t.Errorf("%v.Size() = %d, want %d", test.t, got, test.size)
		}
	}
}

func TestIDXFloat64s(t *testing.T) {
	m := &IDX{Type: IDXUint8, Dims: []int{3}, Bytes: []byte{0, 7, 255}}
	if got, want := m.Float64s(nil), []float64{0, 7, 255}; !slices.Equal(got, want) {
		t.Errorf("Float64s = %v, want %v", got, want)
	}
	m = &IDX{Type: IDXInt8, Dims: []int{1, 2}, Values: []float64{-3, 4}}
	dst := make([]float64, 2)
	if got, want := m.Float64s(dst), []float64{-3, 4}; !slices.Equal(got, want) || &got[0] != &dst[0] {
		t.Errorf("Float64s = %v, want %v in dst", got, want)
	}
}

func BenchmarkReadIDX(b *testing.B) {
	m := &IDX{Type: IDXUint8, Dims: []int{1000, 28, 28}, Bytes: make([]byte, 1000*784)}
	for i := range m.Bytes {
		m.Bytes[i] = byte(i * 7)
	}
	raw := gzipBytes(b, encodeIDX(b, m))
	b.ReportAllocs()
	b.SetBytes(int64(len(m.Bytes)))
	for b.Loop() {
		if _, err := ReadIDX(bytes.NewReader(raw)); err != nil {
			b.Fatal(err)
		}
	}
}
