package data

import (
	"slices"
	"strings"
	"testing"
)

func TestSamplerEpochs(t *testing.T) {
	for _, test := range []struct {
		n, batch  int
		wantSizes []int // batch sizes of one epoch
	}{
		{10, 5, []int{5, 5}},
		{10, 3, []int{3, 3, 3, 1}},
		{4, 10, []int{4}},
		{1, 1, []int{1}},
		{7, 1, []int{1, 1, 1, 1, 1, 1, 1}},
	} {
		s := NewSampler(test.n, test.batch, 3)
		if got := s.BatchesPerEpoch(); got != len(test.wantSizes) {
			t.Errorf("n = %d, batch = %d: BatchesPerEpoch = %d, want %d", test.n, test.batch, got, len(test.wantSizes))
		}
		var batch []int
		var perms [][]int
		for epoch := 1; epoch <= 3; epoch++ {
			var all []int
			for _, size := range test.wantSizes {
				batch = s.Next(batch)
				if len(batch) != size {
					t.Fatalf("n = %d, batch = %d: batch of %d, want %d", test.n, test.batch, len(batch), size)
				}
				if s.Epoch() != epoch {
					t.Fatalf("Epoch = %d, want %d", s.Epoch(), epoch)
				}
				all = append(all, batch...)
			}
			perms = append(perms, all)
			sorted := slices.Sorted(slices.Values(all))
			for i, v := range sorted {
				if v != i {
					t.Fatalf("n = %d, batch = %d: epoch %d draws %v, not each index once", test.n, test.batch, epoch, all)
				}
			}
		}
		if test.n >= 7 && slices.Equal(perms[0], perms[1]) && slices.Equal(perms[1], perms[2]) {
			t.Errorf("n = %d: the same order in three epochs", test.n)
		}
	}
}

func TestSamplerDeterministic(t *testing.T) {
	draw := func(s interface{ Next([]int) []int }) []int {
		var all []int
		for range 10 {
			all = append(all, s.Next(nil)...)
		}
		return all
	}
	if a, b := draw(NewSampler(20, 6, 5)), draw(NewSampler(20, 6, 5)); !slices.Equal(a, b) {
		t.Errorf("Sampler with one seed: %v and %v", a, b)
	}
	if a, b := draw(NewSampler(20, 6, 5)), draw(NewSampler(20, 6, 6)); slices.Equal(a, b) {
		t.Errorf("Sampler with seeds 5 and 6 draws the same")
	}
	if a, b := draw(NewReplacementSampler(20, 6, 5)), draw(NewReplacementSampler(20, 6, 5)); !slices.Equal(a, b) {
		t.Errorf("ReplacementSampler with one seed: %v and %v", a, b)
	}
	if a, b := draw(NewReplacementSampler(20, 6, 5)), draw(NewReplacementSampler(20, 6, 6)); slices.Equal(a, b) {
		t.Errorf("ReplacementSampler with seeds 5 and 6 draws the same")
	}
}

func TestSamplerNextReusesDst(t *testing.T) {
	s := NewSampler(10, 4, 1)
	dst := make([]int, 0, 8)
	got := s.Next(dst)
	if len(got) != 4 || &got[0] != &dst[:1][0] {
		t.Errorf("Next did not reuse the destination's storage")
	}
	r := NewReplacementSampler(10, 4, 1)
	got = r.Next(dst)
	if len(got) != 4 || &got[0] != &dst[:1][0] {
		t.Errorf("ReplacementSampler.Next did not reuse the destination's storage")
	}
}

func TestReplacementSampler(t *testing.T) {
	const n, batch, batches = 5, 1000, 20
	s := NewReplacementSampler(n, batch, 11)
	counts := make([]int, n)
	for range batches {
		b := s.Next(nil)
		if len(b) != batch {
			t.Fatalf("batch of %d, want %d", len(b), batch)
		}
		for _, v := range b {
			counts[v]++ // panics if out of range
		}
	}
	if s.Batches() != batches {
		t.Errorf("Batches = %d, want %d", s.Batches(), batches)
	}
	// Each count is Binomial(20000, 0.2): mean 4000, sd 57.
	for i, c := range counts {
		if c < 4000-300 || c > 4000+300 {
			t.Errorf("index %d drawn %d times, want about 4000", i, c)
		}
	}
}

// TestSamplerCheckpoint saves samplers mid-epoch, at an epoch boundary and
// before the first draw, and checks that restored samplers continue exactly
// like the originals.
func TestSamplerCheckpoint(t *testing.T) {
	for _, before := range []int{0, 1, 3, 4, 9} {
		s := NewSampler(10, 3, 8) // 4 batches an epoch
		for range before {
			s.Next(nil)
		}
		state, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var r Sampler
		if err := r.UnmarshalBinary(state); err != nil {
			t.Fatalf("after %d batches: %v", before, err)
		}
		if r.Epoch() != s.Epoch() {
			t.Errorf("after %d batches: restored epoch %d, want %d", before, r.Epoch(), s.Epoch())
		}
		for i := range 10 {
			if a, b := s.Next(nil), r.Next(nil); !slices.Equal(a, b) {
				t.Fatalf("after %d batches, batch %d: original %v, restored %v", before, i, a, b)
			}
		}
	}

	s := NewReplacementSampler(100, 7, 8)
	s.Next(nil)
	state, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var r ReplacementSampler
	if err := r.UnmarshalBinary(state); err != nil {
		t.Fatal(err)
	}
	if r.Batches() != 1 {
		t.Errorf("restored Batches = %d, want 1", r.Batches())
	}
	for range 5 {
		if a, b := s.Next(nil), r.Next(nil); !slices.Equal(a, b) {
			t.Fatalf("original %v, restored %v", a, b)
		}
	}
}

func TestSamplerUnmarshalErrors(t *testing.T) {
	s := NewSampler(4, 2, 1)
	s.Next(nil)
	good, _ := s.MarshalBinary()
	fresh, _ := NewSampler(4, 2, 1).MarshalBinary()
	rgood, _ := NewReplacementSampler(4, 2, 1).MarshalBinary()
	// Layout of good: "DSP1", n, batch, pos, epoch (one byte each), the PCG
	// state length and 20 bytes of PCG state, then the permutation of 4.
	mutate := func(b []byte, i int, v byte) []byte {
		b = slices.Clone(b)
		b[i] = v
		return b
	}
	for _, test := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "bad magic"},
		{"other magic", rgood, "bad magic"},
		{"truncated", good[:len(good)-1], "truncated"},
		{"trailing", append(slices.Clone(good), 0), "1 trailing bytes"},
		{"zero n", mutate(good, 4, 0), "inconsistent"},
		{"pos past n", mutate(good, 6, 5), "inconsistent"},
		{"not started but mid-epoch", mutate(fresh, 6, 1), "inconsistent"},
		{"bad PCG", mutate(good, 9, 'x'), "PCG"},
		{"repeated index", mutate(good, len(good)-1, good[len(good)-2]), "not a permutation"},
		{"index out of range", mutate(good, len(good)-1, 4), "not a permutation"},
	} {
		t.Run(test.name, func(t *testing.T) {
			var r Sampler
			err := r.UnmarshalBinary(test.in)
			if err == nil || !strings.Contains(err.Error(), test.want) {
				t.Errorf("error %v, want one containing %q", err, test.want)
			}
		})
	}
	var r ReplacementSampler
	if err := r.UnmarshalBinary(good); err == nil {
		t.Errorf("ReplacementSampler accepted a Sampler state")
	}
	if err := r.UnmarshalBinary(mutate(rgood, 4, 0)); err == nil {
		t.Errorf("ReplacementSampler accepted n = 0")
	}
}

func TestNewSamplerPanics(t *testing.T) {
	for _, f := range []func(){
		func() { NewSampler(0, 1, 1) },
		func() { NewSampler(1, 0, 1) },
		func() { NewReplacementSampler(-1, 1, 1) },
		func() { NewReplacementSampler(1, 0, 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic")
				}
			}()
			f()
		}()
	}
}

func BenchmarkSamplerNext(b *testing.B) {
	s := NewSampler(60000, 64, 1)
	dst := make([]int, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		dst = s.Next(dst)
	}
}
