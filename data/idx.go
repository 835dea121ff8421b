package data

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// IDXType is the element type of an IDX file, the third byte of its magic
// number.
type IDXType byte

// The IDX element types. Multi-byte types are stored big-endian.
const (
	IDXUint8   IDXType = 0x08 // unsigned byte, the type of MNIST images and labels
	IDXInt8    IDXType = 0x09 // signed byte
	IDXInt16   IDXType = 0x0B // 2-byte signed integer
	IDXInt32   IDXType = 0x0C // 4-byte signed integer
	IDXFloat32 IDXType = 0x0D // IEEE 754 single precision
	IDXFloat64 IDXType = 0x0E // IEEE 754 double precision
)

// Size returns the number of bytes of one element of type t, or 0 if t is not
// a known IDX type.
func (t IDXType) Size() int {
	switch t {
	case IDXUint8, IDXInt8:
		return 1
	case IDXInt16:
		return 2
	case IDXInt32, IDXFloat32:
		return 4
	case IDXFloat64:
		return 8
	}
	return 0
}

// String returns the name of t, such as "uint8", or "IDXType(0x07)" for an
// unknown type.
func (t IDXType) String() string {
	switch t {
	case IDXUint8:
		return "uint8"
	case IDXInt8:
		return "int8"
	case IDXInt16:
		return "int16"
	case IDXInt32:
		return "int32"
	case IDXFloat32:
		return "float32"
	case IDXFloat64:
		return "float64"
	}
	return fmt.Sprintf("IDXType(0x%02x)", byte(t))
}

// MaxIDXElements is the largest number of elements ReadIDX accepts. A header
// that declares more is rejected before anything is allocated.
const MaxIDXElements = 1 << 31

// IDX is the content of an IDX file: an n-dimensional array stored in
// row-major order (the last dimension varies fastest).
//
// Bytes holds the elements as the file stores them: Type.Size() big-endian
// bytes each, so that an array takes in memory what it takes on disk (one
// byte a pixel for images). ReadIDX fills Bytes for every type; Float64s
// converts the elements to float64 when they are used. Values is the other
// way to give the elements, as float64, for WriteIDX to convert to Type; it
// is read only when Bytes is nil.
type IDX struct {
	Type   IDXType
	Dims   []int
	Bytes  []uint8
	Values []float64
}

// Len returns the number of elements, the product of m.Dims. An IDX with no
// dimensions has no elements.
func (m *IDX) Len() int {
	if len(m.Dims) == 0 {
		return 0
	}
	n := 1
	for _, d := range m.Dims {
		n *= d
	}
	return n
}

// Float64s stores the elements of m, converted exactly to float64, in dst
// and returns it. If dst is nil a new slice is allocated; otherwise len(dst)
// must be m.Len(). Unsigned bytes are converted to their values 0..255, not
// scaled.
func (m *IDX) Float64s(dst []float64) []float64 {
	n := m.Len()
	if dst == nil {
		dst = make([]float64, n)
	}
	if len(dst) != n {
		panic(fmt.Sprintf("data: IDX.Float64s: destination length %d, want %d", len(dst), n))
	}
	if m.Bytes == nil {
		copy(dst, m.Values[:n])
		return dst
	}
	p, be := m.Bytes, binary.BigEndian
	for i := range dst {
		switch m.Type {
		case IDXUint8:
			dst[i] = float64(p[i])
		case IDXInt8:
			dst[i] = float64(int8(p[i]))
		case IDXInt16:
			dst[i] = float64(int16(be.Uint16(p[2*i:])))
		case IDXInt32:
			dst[i] = float64(int32(be.Uint32(p[4*i:])))
		case IDXFloat32:
			dst[i] = float64(math.Float32frombits(be.Uint32(p[4*i:])))
		case IDXFloat64:
			dst[i] = math.Float64frombits(be.Uint64(p[8*i:]))
		}
	}
	return dst
}

// IDXError is the error returned for a malformed IDX stream. Offset is the
// byte offset in the decompressed stream where the problem is: the start of
// the truncated section for a truncated file, or the offending field.
type IDXError struct {
	File   string // name of the file, or "" when reading from an io.Reader
	Offset int64  // byte offset in the (decompressed) stream
	Msg    string // what is wrong
	Err    error  // underlying error, if any
}

// Error returns a message of the form
// "data: FILE: offset N: MSG[: ERR]".
func (e *IDXError) Error() string {
	var b strings.Builder
	b.WriteString("data: ")
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "offset %d: %s", e.Offset, e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *IDXError) Unwrap() error { return e.Err }

// ReadIDX reads an IDX file from r. Gzip-compressed input, recognized by the
// gzip magic bytes 0x1f 0x8b, is decompressed on the fly. The whole stream is
// consumed: trailing bytes after the payload and, for gzip input, a bad
// checksum are errors. Errors are of type *IDXError.
//
// The elements stay as stored (IDX.Bytes): a file takes its decompressed
// size in memory, and a header that declares more than MaxIDXElements
// elements is refused before anything is allocated.
func ReadIDX(r io.Reader) (*IDX, error) {
	return readIDX(r, "", MaxIDXElements)
}

// ReadIDXFile reads the raw or gzip-compressed IDX file at path. Format
// errors are of type *IDXError and name the file.
func ReadIDXFile(path string) (*IDX, error) {
	return readIDXFile(path, MaxIDXElements)
}

// readIDXFile reads the file at path, refusing more than limit elements.
func readIDXFile(path string, limit uint64) (*IDX, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	return readIDX(f, path, limit)
}

// idxDecoder reads an IDX stream and keeps track of the offset.
type idxDecoder struct {
	r    io.Reader
	name string
	off  int64
}

func (d *idxDecoder) errorf(off int64, err error, format string, args ...any) error {
	return &IDXError{File: d.name, Offset: off, Msg: fmt.Sprintf(format, args...), Err: err}
}

// readSection reads exactly len(buf) bytes of the named section.
func (d *idxDecoder) readSection(buf []byte, section string) error {
	n, err := io.ReadFull(d.r, buf)
	start := d.off
	d.off += int64(n)
	if err == nil {
		return nil
	}
	return d.sectionError(start, section, len(buf), n, err)
}

func (d *idxDecoder) sectionError(start int64, section string, want, have int, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return d.errorf(start, nil, "%s truncated: want %d bytes, have %d", section, want, have)
	}
	return d.errorf(start+int64(have), err, "%s: read error after %d of %d bytes", section, have, want)
}

// readPayload reads need bytes, growing the buffer as data arrives so that a
// truncated stream with a large declared size allocates little.
func (d *idxDecoder) readPayload(need int) ([]byte, error) {
	const chunk = 1 << 20
	buf := make([]byte, 0, min(need, chunk))
	start := d.off
	for len(buf) < need {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(need, 2*cap(buf))-len(buf))
		}
		n, err := io.ReadFull(d.r, buf[len(buf):min(cap(buf), need)])
		buf = buf[:len(buf)+n]
		d.off += int64(n)
		if err != nil {
			return nil, d.sectionError(start, "payload", need, len(buf), err)
		}
	}
	return buf, nil
}

// readIDX decodes an IDX stream whose header declares at most limit
// elements (checked before the payload is read).
func readIDX(r io.Reader, name string, limit uint64) (*IDX, error) {
	br := bufio.NewReader(r)
	var in io.Reader = br
	if head, _ := br.Peek(2); len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &IDXError{File: name, Offset: 0, Msg: "bad gzip header", Err: err}
		}
		defer zr.Close()
		in = zr
	}
	d := &idxDecoder{r: in, name: name}

	var magic [4]byte
	if err := d.readSection(magic[:], "header"); err != nil {
		return nil, err
	}
	if magic[0] != 0 || magic[1] != 0 {
		return nil, d.errorf(0, nil, "bad magic number 0x%02x%02x%02x%02x: the first two bytes must be zero", magic[0], magic[1], magic[2], magic[3])
	}
	typ := IDXType(magic[2])
	size := typ.Size()
	if size == 0 {
		return nil, d.errorf(2, nil, "unknown element type 0x%02x", magic[2])
	}
	ndim := int(magic[3])
	if ndim == 0 {
		return nil, d.errorf(3, nil, "no dimensions")
	}

	raw := make([]byte, 4*ndim)
	if err := d.readSection(raw, "dimensions"); err != nil {
		return nil, err
	}
	dims := make([]int, ndim)
	empty := false
	for i := range dims {
		v := binary.BigEndian.Uint32(raw[4*i:])
		if uint64(v) > math.MaxInt {
			return nil, d.errorf(int64(4+4*i), nil, "dimension %d is %d, too large for this platform", i, v)
		}
		dims[i] = int(v)
		empty = empty || v == 0
	}
	total := uint64(0)
	if !empty {
		total = 1
		for i, v := range dims {
			total *= uint64(v) // at most 2^31 · (2^32-1): no overflow
			if total > limit {
				return nil, d.errorf(int64(4+4*i), nil, "dimensions %v hold more than %d elements", dims, limit)
			}
		}
	}
	if total*uint64(size) > math.MaxInt {
		return nil, d.errorf(4, nil, "dimensions %v are too large for this platform", dims)
	}
	n := int(total)

	payload, err := d.readPayload(n * size)
	if err != nil {
		return nil, err
	}
	end := d.off
	var one [1]byte
	for {
		k, err := in.Read(one[:])
		if k > 0 {
			return nil, d.errorf(end, nil, "trailing data after the payload")
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, d.errorf(end, err, "after the payload")
		}
	}

	return &IDX{Type: typ, Dims: dims, Bytes: payload}, nil
}

// WriteIDX writes m to w as an uncompressed IDX stream; wrap w in a
// gzip.Writer for a compressed file. If m.Bytes is not nil, it is written as
// the payload, which must hold Len()·Type.Size() bytes; otherwise m.Values is
// converted to m.Type, and a value that the type cannot hold exactly (a
// fraction or an out-of-range value for an integer type) is an error. Float
// values are not checked: float32 rounds.
func WriteIDX(w io.Writer, m *IDX) error {
	size := m.Type.Size()
	if size == 0 {
		return fmt.Errorf("data: WriteIDX: unknown element type %v", m.Type)
	}
	if len(m.Dims) == 0 || len(m.Dims) > 255 {
		return fmt.Errorf("data: WriteIDX: %d dimensions, want 1 to 255", len(m.Dims))
	}
	for i, d := range m.Dims {
		if d < 0 || uint64(d) > math.MaxUint32 {
			return fmt.Errorf("data: WriteIDX: dimension %d is %d, want 0 to %d", i, d, uint64(math.MaxUint32))
		}
	}
	n := m.Len()
	useBytes := m.Bytes != nil
	if have := len(m.Values); useBytes {
		if have = len(m.Bytes); have != n*size {
			return fmt.Errorf("data: WriteIDX: dimensions %v hold %d elements of %d bytes, have %d bytes", m.Dims, n, size, have)
		}
	} else if have != n {
		return fmt.Errorf("data: WriteIDX: dimensions %v hold %d elements, have %d values", m.Dims, n, have)
	}

	bw := bufio.NewWriter(w)
	header := make([]byte, 4+4*len(m.Dims))
	header[2] = byte(m.Type)
	header[3] = byte(len(m.Dims))
	for i, d := range m.Dims {
		binary.BigEndian.PutUint32(header[4+4*i:], uint32(d))
	}
	if _, err := bw.Write(header); err != nil {
		return fmt.Errorf("data: WriteIDX: %w", err)
	}
	if useBytes {
		if _, err := bw.Write(m.Bytes); err != nil {
			return fmt.Errorf("data: WriteIDX: %w", err)
		}
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("data: WriteIDX: %w", err)
		}
		return nil
	}

	var lo, hi float64
	switch m.Type {
	case IDXUint8:
		lo, hi = 0, math.MaxUint8
	case IDXInt8:
		lo, hi = math.MinInt8, math.MaxInt8
	case IDXInt16:
		lo, hi = math.MinInt16, math.MaxInt16
	case IDXInt32:
		lo, hi = math.MinInt32, math.MaxInt32
	}
	var buf [8]byte
	be := binary.BigEndian
	for i, v := range m.Values {
		switch m.Type {
		case IDXFloat32:
			be.PutUint32(buf[:], math.Float32bits(float32(v)))
		case IDXFloat64:
			be.PutUint64(buf[:], math.Float64bits(v))
		default:
			if !(v >= lo && v <= hi) || v != math.Trunc(v) {
				return fmt.Errorf("data: WriteIDX: value %d is %v, not representable as %v", i, v, m.Type)
			}
			switch m.Type {
			case IDXUint8:
				buf[0] = uint8(v)
			case IDXInt8:
				buf[0] = byte(int8(v))
			case IDXInt16:
				be.PutUint16(buf[:], uint16(int16(v)))
			case IDXInt32:
				be.PutUint32(buf[:], uint32(int32(v)))
			}
		}
		if _, err := bw.Write(buf[:size]); err != nil {
			return fmt.Errorf("data: WriteIDX: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("data: WriteIDX: %w", err)
	}
	return nil
}

// WriteIDXFile writes m to the file at path, creating or truncating it. The
// file is gzip-compressed at the best compression level if path ends in
// ".gz".
func WriteIDXFile(path string, m *IDX) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("data: %w", cerr)
		}
	}()
	if !strings.HasSuffix(path, ".gz") {
		return WriteIDX(f, m)
	}
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if err := WriteIDX(zw, m); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("data: %s: %w", path, err)
	}
	return nil
}
