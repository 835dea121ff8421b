package data

import (
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

var (
	_ encoding.BinaryMarshaler   = (*Sampler)(nil)
	_ encoding.BinaryUnmarshaler = (*Sampler)(nil)
	_ encoding.BinaryMarshaler   = (*ReplacementSampler)(nil)
	_ encoding.BinaryUnmarshaler = (*ReplacementSampler)(nil)
)

// Sampler draws minibatches of sample indices in [0, n) without replacement
// within an epoch. Each epoch is a fresh uniform random permutation of
// 0..n-1, cut into consecutive batches of the batch size; the last batch of
// an epoch is shorter when the batch size does not divide n, so that every
// index appears exactly once per epoch and no batch straddles two epochs.
//
// A Sampler is deterministic for a seed, and its whole state round-trips
// through MarshalBinary and UnmarshalBinary, so a run restored from a
// checkpoint draws the same batches as the original. A Sampler is not safe
// for concurrent use.
type Sampler struct {
	n, batch int
	r        *rng
	perm     []int
	pos      int // next position in perm; pos == n when the epoch is over
	epoch    int // epochs started
}

// NewSampler returns a Sampler of batches of size batch over n samples. A
// batch size larger than n gives one batch of n per epoch. NewSampler panics
// if n or batch is not positive.
func NewSampler(n, batch int, seed uint64) *Sampler {
	if n <= 0 || batch <= 0 {
		panic(fmt.Sprintf("data: NewSampler: n = %d, batch = %d, want both positive", n, batch))
	}
	return &Sampler{n: n, batch: batch, r: newRNG(seed, streamSampler), pos: n}
}

// Next stores the indices of the next batch in dst, reusing its storage and
// growing it if needed, and returns it. A new epoch starts, with a new
// permutation, when the previous one is exhausted.
func (s *Sampler) Next(dst []int) []int {
	if s.pos == s.n {
		if len(s.perm) != s.n {
			s.perm = make([]int, s.n)
		}
		for i := range s.perm {
			s.perm[i] = i
		}
		s.r.shuffle(s.perm)
		s.pos = 0
		s.epoch++
	}
	k := min(s.batch, s.n-s.pos)
	dst = append(dst[:0], s.perm[s.pos:s.pos+k]...)
	s.pos += k
	return dst
}

// Epoch returns the number of epochs started: 0 before the first call to
// Next, then 1 until the first epoch is exhausted, and so on.
func (s *Sampler) Epoch() int { return s.epoch }

// BatchesPerEpoch returns the number of batches in an epoch, ⌈n/batch⌉.
func (s *Sampler) BatchesPerEpoch() int { return (s.n + s.batch - 1) / s.batch }

const (
	samplerMagic     = "DSP1"
	replacementMagic = "DSR1"
)

// MarshalBinary encodes the state of s: its sizes, the PCG state, the epoch
// count and the remainder of the current epoch's permutation.
func (s *Sampler) MarshalBinary() ([]byte, error) {
	b := []byte(samplerMagic)
	for _, v := range []int{s.n, s.batch, s.pos, s.epoch} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	b, err := appendPCG(b, s.r.src)
	if err != nil {
		return nil, err
	}
	if s.pos < s.n {
		for _, v := range s.perm {
			b = binary.AppendUvarint(b, uint64(v))
		}
	}
	return b, nil
}

// UnmarshalBinary restores a state encoded by MarshalBinary. On error s is
// unchanged.
func (s *Sampler) UnmarshalBinary(b []byte) error {
	d := stateDecoder{b: b, what: "Sampler"}
	d.magic(samplerMagic)
	n := d.int(MaxIDXElements)
	batch := d.int(MaxIDXElements)
	pos := d.int(MaxIDXElements)
	epoch := d.int(math.MaxInt)
	src := d.pcg()
	if d.err != nil {
		return d.err
	}
	if n <= 0 || batch <= 0 || pos > n || (epoch == 0 && pos != n) {
		return fmt.Errorf("data: Sampler state: inconsistent n = %d, batch = %d, pos = %d, epoch = %d", n, batch, pos, epoch)
	}
	if pos < n && len(d.b) < n { // each index takes at least one byte
		return errors.New("data: Sampler state: truncated permutation")
	}
	var perm []int
	if pos < n {
		perm = make([]int, n)
		seen := make([]bool, n)
		for i := range perm {
			v := d.int(MaxIDXElements)
			if d.err != nil {
				return d.err
			}
			if v >= n || seen[v] {
				return fmt.Errorf("data: Sampler state: permutation entry %d is %d, not a permutation of 0..%d", i, v, n-1)
			}
			seen[v] = true
			perm[i] = v
		}
	}
	if err := d.end(); err != nil {
		return err
	}
	*s = Sampler{n: n, batch: batch, r: &rng{src: src}, perm: perm, pos: pos, epoch: epoch}
	return nil
}

// ReplacementSampler draws minibatches of sample indices uniformly from
// [0, n) with replacement: every index of every batch is an independent
// uniform draw. Like Sampler it is deterministic for a seed and its state
// round-trips through MarshalBinary and UnmarshalBinary. It is not safe for
// concurrent use.
type ReplacementSampler struct {
	n, batch int
	r        *rng
	batches  int
}

// NewReplacementSampler returns a ReplacementSampler of batches of size batch
// over n samples. It panics if n or batch is not positive.
func NewReplacementSampler(n, batch int, seed uint64) *ReplacementSampler {
	if n <= 0 || batch <= 0 {
		panic(fmt.Sprintf("data: NewReplacementSampler: n = %d, batch = %d, want both positive", n, batch))
	}
	return &ReplacementSampler{n: n, batch: batch, r: newRNG(seed, streamReplacement)}
}

// Next stores the indices of the next batch in dst, reusing its storage and
// growing it if needed, and returns it.
func (s *ReplacementSampler) Next(dst []int) []int {
	dst = dst[:0]
	for range s.batch {
		dst = append(dst, s.r.intn(s.n))
	}
	s.batches++
	return dst
}

// Batches returns the number of batches drawn so far.
func (s *ReplacementSampler) Batches() int { return s.batches }

// MarshalBinary encodes the state of s: its sizes, the number of batches
// drawn and the PCG state.
func (s *ReplacementSampler) MarshalBinary() ([]byte, error) {
	b := []byte(replacementMagic)
	for _, v := range []int{s.n, s.batch, s.batches} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	return appendPCG(b, s.r.src)
}

// UnmarshalBinary restores a state encoded by MarshalBinary. On error s is
// unchanged.
func (s *ReplacementSampler) UnmarshalBinary(b []byte) error {
	d := stateDecoder{b: b, what: "ReplacementSampler"}
	d.magic(replacementMagic)
	n := d.int(MaxIDXElements)
	batch := d.int(MaxIDXElements)
	batches := d.int(math.MaxInt)
	src := d.pcg()
	if err := d.end(); err != nil {
		return err
	}
	if n <= 0 || batch <= 0 {
		return fmt.Errorf("data: ReplacementSampler state: n = %d, batch = %d, want both positive", n, batch)
	}
	*s = ReplacementSampler{n: n, batch: batch, r: &rng{src: src}, batches: batches}
	return nil
}

func appendPCG(b []byte, src *rand.PCG) ([]byte, error) {
	st, err := src.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	b = binary.AppendUvarint(b, uint64(len(st)))
	return append(b, st...), nil
}

// stateDecoder decodes sampler states; the first error sticks.
type stateDecoder struct {
	b    []byte
	what string
	err  error
}

func (d *stateDecoder) fail(msg string) {
	if d.err == nil {
		d.err = fmt.Errorf("data: %s state: %s", d.what, msg)
	}
}

func (d *stateDecoder) magic(m string) {
	if len(d.b) < len(m) || string(d.b[:len(m)]) != m {
		d.fail("bad magic")
		return
	}
	d.b = d.b[len(m):]
}

// int decodes a uvarint of at most limit, so that no size read from a state
// can be absurd.
func (d *stateDecoder) int(limit uint64) int {
	if d.err != nil {
		return 0
	}
	v, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.fail("truncated or malformed integer")
		return 0
	}
	if v > limit {
		d.fail(fmt.Sprintf("integer %d out of range", v))
		return 0
	}
	d.b = d.b[k:]
	return int(v)
}

func (d *stateDecoder) pcg() *rand.PCG {
	k := d.int(1 << 16)
	if d.err != nil {
		return nil
	}
	if k > len(d.b) {
		d.fail("truncated PCG state")
		return nil
	}
	src := new(rand.PCG)
	if err := src.UnmarshalBinary(d.b[:k]); err != nil {
		d.fail(err.Error())
		return nil
	}
	d.b = d.b[k:]
	return src
}

func (d *stateDecoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Sprintf("%d trailing bytes", len(d.b)))
	}
	return d.err
}
