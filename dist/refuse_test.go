package dist

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"
)

// TestNewRefuses checks that New refuses, with an error saying why, the
// models dist cannot split — batch statistics, an objective reading the
// other level's data — and settings that cannot work; the workers then
// serve the next problem.
func TestNewRefuses(t *testing.T) {
	c := newCluster(t, 2)
	tp := testParams{N: 40, NVal: 20, D: 4, C: 3, Seed: 3}
	ok := Settings{Model: "logistic", Params: tp.bytes(), NumLower: tp.N, NumUpper: tp.NVal, Shards: 2, Pool: c.pool, JoinTimeout: 10 * time.Second}
	for _, tc := range []struct {
		name string
		edit func(*Settings)
		want string
	}{
		{"batch norm", func(s *Settings) { s.Model = "batchnorm" },
			"the lower objective g is not a mean over samples plus terms that do not depend on them: on samples ["},
		{"other level's data", func(s *Settings) { s.Model = "crosslevel" },
			`the upper objective f reads "X", data of the lower level`},
		{"upper data undeclared", func(s *Settings) { s.Model = "penalized" },
			"Settings.NumUpper is 20, but the upper objective f declares no per-sample data"},
		{"unknown model", func(s *Settings) { s.Model = "nonesuch" }, "these do not know model nonesuch"},
		{"no workers", func(s *Settings) { s.Shards = 0 }, "set Workers (or Shards)"},
		{"too few samples", func(s *Settings) { s.NumUpper, s.Shards = 1, 2 }, "Settings.NumUpper = 1 samples cannot fill 2 shards"},
		{"replicas", func(s *Settings) { s.Replicas, s.Workers = 3, 2 }, "2 workers cannot hold 2 shards 3 times each"},
		{"pool", func(s *Settings) { s.Pool = "a.b" }, "Settings.Pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.edit(&s)
			if tc.name == "unknown model" {
				s.JoinTimeout = 300 * time.Millisecond
			}
			p, err := New(c.nc, s)
			if err == nil {
				p.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
	p := c.problem(t, ok)
	if err := p.CheckBatch(true, 5); err != nil {
		t.Fatalf("the workers no longer serve: %v", err)
	}
}

// TestMessageTooLarge checks that a message beyond the server's
// max_payload is an error that says so, not a lost message.
func TestMessageTooLarge(t *testing.T) {
	srv, err := StartServer(ServerSettings{MaxPayload: 2048})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ws, err := StartWorkers(1, srv.Endpoint(), "large")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	nc, err := Dial(srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	tp := testParams{N: 10, NVal: 5, D: 6, C: 3, Seed: 3}
	params, err := json.Marshal(struct {
		testParams
		Padding string
	}{tp, strings.Repeat("x", 3000)})
	if err != nil {
		t.Fatal(err)
	}
	s := Settings{Model: "logistic", Params: params, NumLower: tp.N, NumUpper: tp.NVal, Workers: 1, Pool: "large", JoinTimeout: 30 * time.Second}
	_, err = New(nc, s)
	if err == nil || !strings.Contains(err.Error(), "exceeds the server's max_payload of 2048 bytes") {
		t.Fatalf("New with 3 KB of parameters on a 2 KB server: %v", err)
	}
	// A reply too large: the dense 18×18 Hessian takes 2.6 KB.
	s.Params = tp.bytes()
	p, err := New(nc, s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var h mat.SymDense
	p.HessYY(&h, p.X0(nil), p.Y0(nil), nil)
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "its result reply of 26") || !strings.Contains(err.Error(), "bytes exceeds the server's max_payload of 2048 bytes") {
		t.Fatalf("HessYY of 2.6 KB on a 2 KB server: %v", err)
	}
}
