// Command benchrun runs the Go benchmarks of bench/ and the PyTorch
// reference bench/torch_ref.py on the same data, measures this machine's
// memory bandwidth and peak multiply-add rate, checks that both sides
// compute the same numbers, and prints a table of times, ratios Go ÷
// PyTorch, memory, shares of the two bounds and the targets of issues 7
// and 16.
//
//	go run ./bench/cmd/benchrun                                          # pure-Go build
//	CGO_LDFLAGS=-lopenblas go run -tags openblas ./bench/cmd/benchrun    # Go side's wide products by OpenBLAS
//
// The rows are run one after the other, each first on the Go side (go test
// -bench for that row, from a test binary built once with the runner's
// build tags) and then on the PyTorch side, with the default environment
// and with OMP_WAIT_POLICY=PASSIVE (two long-lived torch_ref.py --serve
// processes, 2 threads each): on a shared machine both sides of a row then
// see about the same load. Each row is compared with PyTorch's better
// policy. The table goes to stdout and, with the raw figures as JSON, to
// -out.
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gobilevel/bilevel/bench"
)

var (
	outDir    = flag.String("out", "out/bench", "directory for the table, the JSON figures and the PyTorch vectors")
	python    = flag.String("python", "/usr/bin/python3", "Python interpreter with torch")
	benchtime = flag.String("benchtime", "0.5s", "go test -benchtime of a row (slow rows: 1x)")
	count     = flag.Int("count", 3, "go test -count of a row (slow rows: 2); the best run is kept")
	budget    = flag.Float64("budget", 0.5, "seconds per timing batch on the PyTorch side (3 batches, the best is kept)")
	rowsFlag  = flag.String("rows", ".", "regular expression selecting the rows by name (large/f64/grad, meta/f64/itd-bio, ...)")
	rounds    = flag.Int("rounds", 1, "passes over the rows; each side keeps its best time per row (for a machine shared with other work)")
)

// goRow is a Go row: the best of its go test runs.
type goRow struct {
	NsOp, BOp, AllocsOp, PeakRSS float64
	Runs                         int
}

// pyRow is one row of torch_ref.py.
type pyRow struct {
	S     float64 `json:"s"`
	Reps  int     `json:"reps"`
	Peak  float64 `json:"peak"`
	Error string  `json:"error"`
	Which string  `json:"-"`
}

type pyRun struct {
	Torch   string           `json:"torch"`
	Threads int              `json:"threads"`
	Policy  string           `json:"omp_wait_policy"`
	Rows    map[string]pyRow `json:"rows"`
}

// Bandwidth is the STREAM-like measurement of this machine.
type Bandwidth struct {
	Read1, Read2, Copy2 float64 // bytes/s: sum with 1 and 2 goroutines, copy with 2 (read+write bytes)
	Bytes               int64
}

type report struct {
	Date, Machine, GoVersion, BLAS, Tags string
	LoadBefore, LoadAfter                string
	Bandwidth                            Bandwidth
	Peak                                 bench.Peak
	Go                                   map[string]goRow
	Torch                                map[string]pyRun
	CrossCheck                           map[string]float64
	DurationS                            float64
	Phases                               []string // duration and load average after each phase
	Rounds                               int
}

func (r *report) phase(name string, t time.Time) {
	r.Phases = append(r.Phases, fmt.Sprintf("%s %.0f s (load after: %s)", name, time.Since(t).Seconds(), loadavg()))
}

var policies = []string{"default", "PASSIVE"}

func main() {
	flag.Parse()
	start := time.Now()
	sel, err := regexp.Compile(*rowsFlag)
	must(err)
	// Run from the module root: go test ./bench/ and bench/torch_ref.py.
	if gomod, err := exec.Command("go", "env", "GOMOD").Output(); err == nil && len(bytes.TrimSpace(gomod)) > 0 {
		must(os.Chdir(filepath.Dir(string(bytes.TrimSpace(gomod)))))
	}
	must(os.MkdirAll(*outDir, 0o755))
	blas, tags := "gonum", ""
	if bench.BLAS() == "netlib" { // this runner was built with -tags openblas: so is the test binary
		blas, tags = "openblas", "openblas"
	}
	r := &report{Date: time.Now().Format("2006-01-02 15:04 MST"), Machine: machine(), GoVersion: runtime.Version(),
		BLAS: blas, Tags: tags, LoadBefore: loadavg(), Go: map[string]goRow{}, Torch: map[string]pyRun{}, Rounds: *rounds}
	logf("machine: %s; load %s; Go BLAS %s", r.Machine, r.LoadBefore, blas)

	t := time.Now()
	logf("memory bandwidth (512 MiB, best of 5) ...")
	r.Bandwidth = bandwidth(512<<20, 5)
	logf("  read 1 goroutine %.1f GB/s, read 2 goroutines %.1f GB/s, copy 2 goroutines %.1f GB/s",
		r.Bandwidth.Read1/1e9, r.Bandwidth.Read2/1e9, r.Bandwidth.Copy2/1e9)
	r.phase("bandwidth", t)

	t = time.Now()
	logf("peak multiply-add rate (register-only loop, best of 5) ...")
	r.Peak = bench.MeasurePeak(5)
	logf("  %s: float64 %.1f GFLOPS on 1 core, %.1f on all; float32 %.1f, %.1f", r.Peak.ISA,
		r.Peak.F64One/1e9, r.Peak.F64All/1e9, r.Peak.F32One/1e9, r.Peak.F32All/1e9)
	r.phase("peak FMA rate", t)

	t = time.Now()
	testBin, err := filepath.Abs(filepath.Join(*outDir, "bench.test"))
	must(err)
	args := []string{"test", "-c", "-o", testBin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	gocmd := exec.Command("go", append(args, "./bench/")...)
	gocmd.Env = goEnv(tags)
	gocmd.Stdout, gocmd.Stderr = os.Stderr, os.Stderr
	logf("go %s", strings.Join(gocmd.Args[1:], " "))
	must(gocmd.Run())

	servers := map[string]*pyServer{}
	for _, pol := range policies {
		s, err := startPython(pol)
		must(err)
		defer s.close()
		servers[pol] = s
		var run pyRun
		must(s.request("info", &run))
		run.Rows = map[string]pyRow{}
		r.Torch[pol] = run
	}
	checkDir := filepath.Join(*outDir, "torch-vectors")
	must(os.MkdirAll(checkDir, 0o755))
	specs := map[string]bool{}
	for _, d := range rowDefs {
		if sel.MatchString(d.name) {
			specs[strings.SplitN(d.name, "/", 2)[0]] = true
		}
	}
	for _, spec := range []string{"large", "small", "mlp", "wide", "meta"} {
		if specs[spec] {
			var ok map[string]any
			must(servers["default"].request("check "+spec+" "+checkDir, &ok))
		}
	}
	r.phase("setup and PyTorch cross-check vectors", t)

	t = time.Now()
	for round := 1; round <= *rounds; round++ {
		for _, d := range rowDefs {
			if !sel.MatchString(d.name) {
				continue
			}
			line := fmt.Sprintf("%-26s", d.name)
			g, err := runGoRow(testBin, tags, d)
			must(err)
			if old, ok := r.Go[d.name]; ok {
				peak := max(g.PeakRSS, old.PeakRSS)
				if old.NsOp < g.NsOp {
					g = old
				}
				g.PeakRSS = peak
			}
			r.Go[d.name] = g
			line += fmt.Sprintf("  Go %10s", dur(g.NsOp/1e9))
			tn := d.torchName()
			for _, pol := range policies {
				run := r.Torch[pol]
				if _, done := run.Rows[tn]; done && d.torch != "" {
					continue // measured with its own row this round
				}
				var row pyRow
				must(servers[pol].request("row "+tn, &row))
				if row.Error != "" {
					fatal(fmt.Errorf("torch_ref.py, row %s: %s", tn, row.Error))
				}
				if old, ok := run.Rows[tn]; ok {
					peak := max(row.Peak, old.Peak)
					if old.S < row.S {
						row = old
					}
					row.Peak = peak
					row.Reps += old.Reps
				}
				run.Rows[tn] = row
				line += fmt.Sprintf("  PyTorch %s %10s", strings.ToLower(pol), dur(row.S))
			}
			logf("round %d  %s  (load %s)", round, line, loadavg())
		}
	}
	r.phase("rows", t)
	for _, s := range servers {
		s.close()
	}

	// Bandwidth again: on a shared machine the better of the two figures is
	// the closer to the machine's own.
	t = time.Now()
	bw := bandwidth(512<<20, 5)
	r.Bandwidth.Read1 = max(r.Bandwidth.Read1, bw.Read1)
	r.Bandwidth.Read2 = max(r.Bandwidth.Read2, bw.Read2)
	r.Bandwidth.Copy2 = max(r.Bandwidth.Copy2, bw.Copy2)
	r.phase("bandwidth again", t)

	t = time.Now()
	pk := bench.MeasurePeak(5)
	r.Peak.F64One, r.Peak.F64All = max(r.Peak.F64One, pk.F64One), max(r.Peak.F64All, pk.F64All)
	r.Peak.F32One, r.Peak.F32All = max(r.Peak.F32One, pk.F32One), max(r.Peak.F32All, pk.F32All)
	r.phase("peak FMA rate again", t)

	t = time.Now()
	r.CrossCheck = crossCheck(checkDir, specs)
	r.phase("Go cross-check vectors", t)
	r.LoadAfter = loadavg()
	r.DurationS = time.Since(start).Seconds()

	var md bytes.Buffer
	table(&md, r, sel)
	os.Stdout.Write(md.Bytes())
	must(os.WriteFile(filepath.Join(*outDir, "table-"+blas+".md"), md.Bytes(), 0o644))
	js, _ := json.MarshalIndent(r, "", " ")
	must(os.WriteFile(filepath.Join(*outDir, "results-"+blas+".json"), js, 0o644))
	logf("wrote %s/table-%s.md and results-%s.json in %.0f s", *outDir, blas, blas, r.DurationS)
}

func logf(format string, a ...any) { fmt.Fprintf(os.Stderr, "benchrun: "+format+"\n", a...) }

func fatal(err error) {
	logf("%v", err)
	os.Exit(1)
}

func must(err error) {
	if err != nil {
		fatal(err)
	}
}

// goEnv is the environment of go and the test binary: OpenBLAS needs
// CGO_LDFLAGS=-lopenblas unless the caller set it.
func goEnv(tags string) []string {
	env := os.Environ()
	if strings.Contains(tags, "openblas") && os.Getenv("CGO_LDFLAGS") == "" {
		env = append(env, "CGO_LDFLAGS=-lopenblas")
	}
	return env
}

// ---- machine ----------------------------------------------------------------

func machine() string {
	out, _ := exec.Command("lscpu").Output()
	var model, cpus, caches string
	for _, l := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "Model name":
			model = v
		case "CPU(s)":
			cpus = v
		case "L2 cache", "L3 cache":
			caches += " " + strings.TrimSpace(k) + " " + v + ";"
		}
	}
	var mem string
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		f := strings.Fields(string(b))
		if len(f) > 1 {
			kb, _ := strconv.ParseFloat(f[1], 64)
			mem = fmt.Sprintf("%.0f GiB RAM", kb/(1<<20))
		}
	}
	return fmt.Sprintf("%s, %s CPUs,%s %s", model, cpus, caches, mem)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// bandwidth measures read bandwidth (a sum with 8 accumulators per
// goroutine) with one and two goroutines and copy bandwidth with two, over
// an array of size bytes, best of reps.
func bandwidth(size int, reps int) Bandwidth {
	n := size / 8
	a := make([]float64, n)
	for i := range a {
		a[i] = float64(i & 1023)
	}
	var sink float64
	read := func(workers int) float64 {
		best := math.Inf(1)
		for range reps {
			var wg sync.WaitGroup
			sums := make([]float64, workers)
			t := time.Now()
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sums[w] = sum8(a[w*n/workers : (w+1)*n/workers])
				}()
			}
			wg.Wait()
			best = min(best, time.Since(t).Seconds())
			for _, s := range sums {
				sink += s
			}
		}
		return float64(n*8) / best
	}
	bw := Bandwidth{Bytes: int64(n * 8)}
	bw.Read1, bw.Read2 = read(1), read(2)
	src, dst := a[:n/2], a[n/2:]
	best := math.Inf(1)
	for range reps {
		var wg sync.WaitGroup
		t := time.Now()
		for w := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lo, hi := w*len(src)/2, (w+1)*len(src)/2
				copy(dst[lo:hi], src[lo:hi])
			}()
		}
		wg.Wait()
		best = min(best, time.Since(t).Seconds())
	}
	bw.Copy2 = float64(2*len(src)*8) / best
	if sink == 42 {
		fmt.Fprint(io.Discard, sink)
	}
	return bw
}

func sum8(x []float64) float64 {
	var s0, s1, s2, s3, s4, s5, s6, s7 float64
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := x[i : i+8 : i+8]
		s0 += v[0]
		s1 += v[1]
		s2 += v[2]
		s3 += v[3]
		s4 += v[4]
		s5 += v[5]
		s6 += v[6]
		s7 += v[7]
	}
	for ; i < len(x); i++ {
		s0 += x[i]
	}
	return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7
}

// ---- Go ---------------------------------------------------------------------

var benchLine = regexp.MustCompile(`^BenchmarkRows/(\S+?)(-\d+)?\s+(\d+)\s+(.*)$`)

// runGoRow runs one row with the test binary and keeps the run with the
// smallest ns/op (and the largest peak RSS of the runs).
func runGoRow(testBin, tags string, d rowDef) (goRow, error) {
	parts := strings.Split(d.name, "/")
	pat := "^BenchmarkRows$"
	for _, p := range parts {
		pat += "/^" + regexp.QuoteMeta(p) + "$"
	}
	bt, cnt := *benchtime, *count
	if d.slow {
		bt, cnt = "1x", 2
	}
	cmd := exec.Command(testBin, "-test.run", "^$", "-test.bench", pat, "-test.benchmem",
		"-test.benchtime", bt, "-test.count", strconv.Itoa(cnt), "-test.timeout", "30m")
	cmd.Env = append(goEnv(tags), "BENCH_SPECS="+parts[0], "BENCH_TIER=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return goRow{}, fmt.Errorf("%s: %v\n%s", d.name, err, out.String())
	}
	var best goRow
	found := false
	for _, line := range strings.Split(out.String(), "\n") {
		m := benchLine.FindStringSubmatch(line)
		if m == nil || m[1] != d.name {
			continue
		}
		var g goRow
		g.Runs, _ = strconv.Atoi(m[3])
		f := strings.Fields(m[4])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				g.NsOp = v
			case "B/op":
				g.BOp = v
			case "allocs/op":
				g.AllocsOp = v
			case "peakRSS-B":
				g.PeakRSS = v
			}
		}
		peak := max(g.PeakRSS, best.PeakRSS)
		if !found || g.NsOp < best.NsOp {
			best = g
		}
		best.PeakRSS = peak
		found = true
	}
	if !found {
		return goRow{}, fmt.Errorf("%s: no benchmark line in\n%s", d.name, out.String())
	}
	return best, nil
}

// ---- PyTorch ----------------------------------------------------------------

// pyServer is a torch_ref.py --serve process.
type pyServer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startPython(policy string) (*pyServer, error) {
	script := filepath.Join("bench", "torch_ref.py")
	cmd := exec.Command(*python, script, "--serve", "--budget", fmt.Sprint(*budget), "--threads", "2")
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "OMP_WAIT_POLICY=") {
			env = append(env, e)
		}
	}
	if policy == "PASSIVE" {
		env = append(env, "OMP_WAIT_POLICY=PASSIVE")
	}
	cmd.Env = env
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	logf("%s %s (OMP_WAIT_POLICY %s)", *python, strings.Join(cmd.Args[1:], " "), map[bool]string{true: "PASSIVE", false: "unset"}[policy == "PASSIVE"])
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &pyServer{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

// request sends one request and decodes its JSON answer into v.
func (s *pyServer) request(req string, v any) error {
	if _, err := fmt.Fprintln(s.in, req); err != nil {
		return err
	}
	line, err := s.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("torch_ref.py: %q: %v", req, err)
	}
	return json.Unmarshal(line, v)
}

func (s *pyServer) close() {
	if s.in != nil {
		s.in.Close()
		s.in = nil
		s.cmd.Wait()
	}
}

// best returns the PyTorch row with the smaller time of the two policies.
func best(r *report, name string) (pyRow, bool) {
	var b pyRow
	ok := false
	for _, pol := range policies {
		run, has := r.Torch[pol]
		if !has {
			continue
		}
		if row, has := run.Rows[name]; has && (!ok || row.S < b.S) {
			b, ok = row, true
			b.Which = pol
		}
	}
	return b, ok
}

// ---- cross-check ------------------------------------------------------------

// crossCheck compares the Go results with the vectors torch_ref.py wrote:
// max_i |go_i − torch_i| / max_i |torch_i| per vector.
func crossCheck(dir string, specs map[string]bool) map[string]float64 {
	out := map[string]float64{}
	for _, s := range bench.Specs {
		if !specs[s.Name] {
			continue
		}
		for _, f32 := range []bool{false, true} {
			in, err := bench.NewInstance(s, f32)
			must(err)
			res, err := in.Results()
			must(err)
			for name, v := range res {
				out[s.Name+"/"+name] = compare(v, filepath.Join(dir, s.Name+"-"+name+".bin"))
			}
		}
	}
	if specs["meta"] {
		res, err := bench.MetaResults()
		must(err)
		for name, v := range res {
			out["meta/"+name] = compare(v, filepath.Join(dir, "meta-"+name+".bin"))
		}
	}
	return out
}

// compare returns max_i |v_i − t_i| / max_i |t_i| for the vector t stored
// in path as little-endian float64, or NaN.
func compare(v []float64, path string) float64 {
	b, err := os.ReadFile(path)
	if err != nil || len(b) != 8*len(v) {
		return math.NaN()
	}
	var diff, norm float64
	for i, g := range v {
		t := math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		diff = max(diff, math.Abs(g-t))
		norm = max(norm, math.Abs(t))
	}
	return diff / norm
}

// ---- table ------------------------------------------------------------------

type rowDef struct {
	name, label string
	torch       string // PyTorch row compared with ("" = name)
	pass        bool   // two-pass bound applies
	slow        bool   // seconds per call: go test -benchtime 1x -count 2
	// flops is the row's nominal number of floating-point operations (see
	// nominalFlops), for the fraction of the peak rate; 0 where the row is
	// not bound by its products.
	flops float64
}

// float32 reports whether the row computes in float32 (spec/f32/…):
// its peak rate is float32's. The spec/f32d/… rows hold their data in
// float32 and compute in float64.
func (d rowDef) float32() bool { return strings.Contains(d.name, "/f32/") }

// data32 reports whether the row's data are in float32 (spec/f32/… and
// spec/f32d/…): half the bytes of the two-pass bound.
func (d rowDef) data32() bool { return d.float32() || strings.Contains(d.name, "/f32d/") }

func (d rowDef) torchName() string {
	if d.torch != "" {
		return d.torch
	}
	return d.name
}

var rowDefs = append([]rowDef{
	{name: "large/f64/grad", label: "gradient ∇_W g", pass: true},
	{name: "large/f64/hvp", label: "HVP ∇_WW g·v (fresh point)", pass: true},
	{name: "large/f64/hvp-fixed", label: "HVP at a fixed point (one CG/Neumann step)", pass: true},
	{name: "large/f64/mixed", label: "mixed ∇_λW g·v"},
	{name: "large/f32/grad", label: "gradient, float32", pass: true},
	{name: "large/f32/hvp", label: "HVP, float32", pass: true},
	{name: "large/f32/hvp-fixed", label: "HVP at a fixed point, float32", pass: true},
	{name: "large/f32/mixed", label: "mixed, float32"},
	{name: "large/f32d/grad", label: "gradient, float32 data, float64 arithmetic", torch: "large/f32/grad", pass: true},
	{name: "large/f64/aid-cg10", label: "AID hypergradient, CG 10 (Go: Problem.HVP)", slow: true},
	{name: "large/f64/aid-cg10-lin", label: "AID hypergradient, CG 10 (Go: Linearize)", torch: "large/f64/aid-cg10", slow: true},
	{name: "large/f64/itd-t10", label: "ITD hypergradient, T = 10", slow: true},
	{name: "large/f64/itd-t100", label: "ITD hypergradient, T = 100", slow: true},
	{name: "small/f64/grad", label: "gradient ∇_W g"},
	{name: "small/f64/hvp", label: "HVP ∇_WW g·v (fresh point)"},
	{name: "small/f64/hvp-fixed", label: "HVP at a fixed point"},
	{name: "small/f64/mixed", label: "mixed ∇_λW g·v"},
	{name: "small/f32/grad", label: "gradient, float32"},
	{name: "small/f32/hvp", label: "HVP, float32"},
	{name: "small/f32/hvp-fixed", label: "HVP at a fixed point, float32"},
	{name: "small/f32/mixed", label: "mixed, float32"},
	{name: "small/f32d/grad", label: "gradient, float32 data, float64 arithmetic", torch: "small/f32/grad"},
	{name: "small/f64/aid-cg10", label: "AID, CG 10 (Go: Problem.HVP)"},
	{name: "small/f64/aid-cg10-lin", label: "AID, CG 10 (Go: Linearize)", torch: "small/f64/aid-cg10"},
	{name: "small/f64/aid-cg100", label: "AID, CG 100 (Go: Problem.HVP)"},
	{name: "small/f64/aid-cg100-lin", label: "AID, CG 100 (Go: Linearize)", torch: "small/f64/aid-cg100"},
	{name: "small/f64/itd-t10", label: "ITD, T = 10"},
	{name: "small/f64/itd-t100", label: "ITD, T = 100"},
}, append(wideRows(bench.MLP, "∇_W2 g", "∇_W2W2 g·v", "∇_W1W2 g·v"), append(wideRows(bench.Wide, "∇_W g", "∇_WW g·v", "∇_λW g·v"),
	rowDef{name: "meta/f64/itd-bio", label: "outer step, ITD-BiO (4 tasks, 5-way 5-shot, 15 queries, 10 head steps, Adam)", slow: true},
	rowDef{name: "meta/f64/aid-bio", label: "outer step, AID-BiO (same, CG 10)", slow: true},
	rowDef{name: "meta/f32/itd-bio", label: "outer step, ITD-BiO, float32", slow: true},
	rowDef{name: "meta/f32/aid-bio", label: "outer step, AID-BiO, float32", slow: true},
)...)...)

// wideRows returns the rows of a problem whose products go to graph's
// general product: the four oracles in float64 and float32, AID with CG 10
// and ITD with T = 10, with their nominal flop counts.
func wideRows(s bench.Spec, grad, hvp, mixed string) []rowDef {
	var rs []rowDef
	for _, prec := range []string{"f64", "f32"} {
		suffix := map[string]string{"f64": "", "f32": ", float32"}[prec]
		for _, r := range []struct{ what, label string }{{"grad", "gradient " + grad}, {"hvp", "HVP " + hvp + " (fresh point)"},
			{"hvp-fixed", "HVP at a fixed point"}, {"mixed", "mixed " + mixed}} {
			name := s.Name + "/" + prec + "/" + r.what
			rs = append(rs, rowDef{name: name, label: r.label + suffix, flops: nominalFlops(s, r.what)})
		}
	}
	rs = append(rs, rowDef{name: s.Name + "/f32d/grad", label: "gradient " + grad + ", float32 data, float64 arithmetic", torch: s.Name + "/f32/grad", flops: nominalFlops(s, "grad")})
	return append(rs,
		rowDef{name: s.Name + "/f64/aid-cg10", label: "AID hypergradient, CG 10 (Go: Problem.HVP)", slow: true, flops: nominalFlops(s, "aid-cg10")},
		rowDef{name: s.Name + "/f64/aid-cg10-lin", label: "AID hypergradient, CG 10 (Go: Linearize)", torch: s.Name + "/f64/aid-cg10", slow: true, flops: nominalFlops(s, "aid-cg10")},
		rowDef{name: s.Name + "/f64/itd-t10", label: "ITD hypergradient, T = 10", slow: true, flops: nominalFlops(s, "itd-t10")},
		rowDef{name: s.Name + "/f64/itd-t10-per-step", label: "ITD, T = 10 (Go: one mixed product per step, without FixX)", torch: s.Name + "/f64/itd-t10", slow: true})
}

// nominalFlops counts the floating-point operations of a row's products
// (2mnk each) as the least work computes it; the rest of the work is
// lower order. Logistic regression (P = 2·N·D·C, Pv the same on the
// validation rows): a gradient XW and Xᵀ(S − Y), 2P; a fresh HVP XW, XV
// and one product back, 3P; at a fixed point XV and back, 2P; the mixed
// product reads no data (0: not bound by products); AID with CG 10 is ∇_W f
// (2Pv), the point's XW and ten products at the fixed point, 21P + 2Pv; ITD
// with T = 10 ten gradients and ten products back, 40P + 2Pv. The MLP (L =
// 2·N·D·H for the first layer, Lv on the validation rows, ℓ = 2·N·H·C for
// the head): a gradient L + 2ℓ; a fresh HVP L + 4ℓ; a product at a fixed
// point 2ℓ (0: not bound by the first layer); the mixed product, forward
// and back through the first layer, 2L + 4ℓ; AID the first layer forward
// and back once for the mixed product, ∇f through it (2Lv) and 22ℓ; ITD
// with T = 10, the features once forward and once back (as PyTorch does),
// 2L + 2Lv + 40ℓ.
func nominalFlops(s bench.Spec, what string) float64 {
	n, nv, d, c := float64(s.N), float64(s.NVal), float64(s.D), float64(s.C)
	if s.Hidden == 0 {
		p, pv := 2*n*d*c, 2*nv*d*c
		return map[string]float64{"grad": 2 * p, "hvp": 3 * p, "hvp-fixed": 2 * p, "mixed": 0,
			"aid-cg10": 21*p + 2*pv, "itd-t10": 40*p + 2*pv}[what]
	}
	h := float64(s.Hidden)
	l, lv, head := 2*n*d*h, 2*nv*d*h, 2*n*h*c
	return map[string]float64{"grad": l + 2*head, "hvp": l + 4*head, "hvp-fixed": 0, "mixed": 2*l + 4*head,
		"aid-cg10": 2*l + 2*lv + 22*head, "itd-t10": 2*l + 2*lv + 40*head}[what]
}

func dur(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.2f ms", s*1e3)
	default:
		return fmt.Sprintf("%.0f µs", s*1e6)
	}
}

func mem(b float64) string {
	switch {
	case math.IsNaN(b):
		return "?"
	case b < 0:
		return "−" + mem(-b)
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", b)
	}
}

func table(w io.Writer, r *report, sel *regexp.Regexp) {
	impl := "pure Go and assembly: graph's own products"
	if r.BLAS == "openblas" {
		impl = "wide products by OpenBLAS"
	}
	fmt.Fprintf(w, "### Go (%s) against PyTorch %s, %s\n\n", impl, r.Torch["default"].Torch, r.Date)
	fmt.Fprintf(w, "Machine: %s. Go %s. Load average before %s, after %s. Runner time %.0f s, %d round(s) over the rows.\n\n",
		r.Machine, r.GoVersion, r.LoadBefore, r.LoadAfter, r.DurationS, r.Rounds)
	if len(r.Phases) > 0 {
		fmt.Fprintf(w, "Phases: %s.\n\n", strings.Join(r.Phases, "; "))
	}
	bw := r.Bandwidth
	fmt.Fprintf(w, "Memory bandwidth (%d MiB array, best of 5 at the start and 5 at the end of the run): read %.1f GB/s with 1 goroutine, %.1f GB/s with 2; copy %.1f GB/s with 2 (read+write bytes). The two-pass bound uses the best read figure, %.1f GB/s.\n\n",
		bw.Bytes>>20, bw.Read1/1e9, bw.Read2/1e9, bw.Copy2/1e9, max(bw.Read1, bw.Read2)/1e9)
	bwBest := max(bw.Read1, bw.Read2)
	large := bench.Large
	xBytes := float64(large.N * large.D * 8)
	fmt.Fprintf(w, "Large: X %d×%d, %d classes, validation %d rows (|y| = %d, X = %.1f MB float64); small: X %d×%d, %d classes, validation %d rows (|y| = %d). Two-pass bound for large float64 = 2·%.1f MB / %.1f GB/s = %.2f ms (float32: half).\n\n",
		large.N, large.D, large.C, large.NVal, large.D*large.C, xBytes/1e6,
		bench.Small.N, bench.Small.D, bench.Small.C, bench.Small.NVal, bench.Small.D*bench.Small.C,
		xBytes/1e6, bwBest/1e9, 2*xBytes/bwBest*1e3)
	ml, wd := bench.MLP, bench.Wide
	fmt.Fprintf(w, "MLP: X %d×%d, a tanh hidden layer of %d units (outer W1, |x| = %d), head %d×%d (inner, |y| = %d), validation %d rows; wide: logistic regression, X %d×%d, %d classes (|y| = %d), validation %d rows.\n\n",
		ml.N, ml.D, ml.Hidden, ml.D*ml.Hidden, ml.Hidden, ml.C, ml.Hidden*ml.C, ml.NVal, wd.N, wd.D, wd.C, wd.D*wd.C, wd.NVal)
	pk := r.Peak
	fmt.Fprintf(w, "Peak multiply-add rate (%s register-only loop, best of 5 at the start and 5 at the end of the run): float64 %.1f GFLOPS on one core, %.1f on both; float32 %.1f and %.1f. The share of peak of a row is its nominal flop count (the products, as the least work computes them) over its time and the peak of both cores in its arithmetic: float32 for the float32 rows (Go computes them with graph.Objective.Float32), float64 for the others, the float32-data rows included (graph.Objective.Float32Data computes in float64).\n\n",
		pk.ISA, pk.F64One/1e9, pk.F64All/1e9, pk.F32One/1e9, pk.F32All/1e9)
	fmt.Fprintln(w, "| problem | row | Go | PyTorch (best policy) | Go ÷ PyTorch | Go B/op | Go allocs/op | Go peak ΔRSS | PyTorch peak ΔRSS | two-pass bound: Go / PyTorch | share of peak: Go / PyTorch |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, d := range rowDefs {
		prob := strings.SplitN(d.name, "/", 2)[0]
		if !sel.MatchString(d.name) {
			continue
		}
		t, tok := best(r, d.torchName())
		g, gok := r.Go[d.name]
		gs, ts, ratio := "n/a", "—", ""
		if !gok {
			gs = "not run"
		}
		if gok {
			gs = dur(g.NsOp / 1e9)
		}
		if tok {
			ts = fmt.Sprintf("%s (%s)", dur(t.S), strings.ToLower(t.Which))
		}
		if gok && tok {
			ratio = fmt.Sprintf("%.2f", g.NsOp/1e9/t.S)
		}
		bop, aop, gpk, tpk, frac := "", "", "", "", ""
		if gok {
			bop, aop, gpk = mem(g.BOp), fmt.Sprintf("%.0f", g.AllocsOp), mem(g.PeakRSS)
		}
		if tok {
			tpk = mem(t.Peak)
		}
		if d.pass && prob == "large" {
			xb := xBytes
			if d.data32() {
				xb /= 2
			}
			bound := 2 * xb / bwBest
			gf := "—"
			if gok {
				gf = fmt.Sprintf("%.0f%%", 100*bound/(g.NsOp/1e9))
			}
			tf := "—"
			if tok {
				tf = fmt.Sprintf("%.0f%%", 100*bound/t.S)
			}
			frac = gf + " / " + tf
		}
		share := ""
		if gShare, tShare, ok := peakShares(r, d); ok {
			share = gShare + " / " + tShare
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", prob, d.label, gs, ts, ratio, bop, aop, gpk, tpk, frac, share)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "PyTorch per policy (s/op):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| row | default | OMP_WAIT_POLICY=PASSIVE |")
	fmt.Fprintln(w, "|---|---:|---:|")
	for _, d := range rowDefs {
		if d.torch != "" {
			continue
		}
		a, aok := r.Torch["default"].Rows[d.name]
		b, bok := r.Torch["PASSIVE"].Rows[d.name]
		if !aok && !bok {
			continue
		}
		fs := func(x pyRow, ok bool) string {
			if !ok {
				return "—"
			}
			return dur(x.S)
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", d.name, fs(a, aok), fs(b, bok))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Cross-check, max_i |Go_i − PyTorch_i| / max_i |PyTorch_i| (same data; f32-: both sides computing in float32):")
	fmt.Fprintln(w)
	for _, s := range append(bench.Specs, bench.Spec{Name: "meta"}) {
		var parts []string
		for _, k := range []string{"grad", "hvp", "mixed", "aid-cg10", "itd-t10", "itd-bio", "aid-bio", "f32-grad", "f32-hvp", "f32-mixed", "f32-itd-bio", "f32-aid-bio"} {
			if v, ok := r.CrossCheck[s.Name+"/"+k]; ok {
				parts = append(parts, fmt.Sprintf("%s %.1e", k, v))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, "- %s: %s\n", s.Name, strings.Join(parts, ", "))
		}
	}
	fmt.Fprintln(w)
	targets(w, r, bwBest, xBytes)
}

// peakShares returns the shares of the peak rate of a row with a nominal
// flop count, on the Go side and the PyTorch side ("—" for a side not run).
func peakShares(r *report, d rowDef) (goShare, torchShare string, ok bool) {
	if d.flops == 0 || r.Peak.F64All == 0 {
		return "", "", false
	}
	goShare, torchShare = "—", "—"
	goPeak, torchPeak := r.Peak.F64All, r.Peak.F64All
	if d.float32() {
		goPeak = r.Peak.F32All
	}
	if strings.Contains(d.torchName(), "/f32/") {
		torchPeak = r.Peak.F32All
	}
	if g, ok := r.Go[d.name]; ok {
		goShare = fmt.Sprintf("%.0f%%", 100*d.flops/(g.NsOp/1e9)/goPeak)
	}
	if t, ok := best(r, d.torchName()); ok {
		torchShare = fmt.Sprintf("%.0f%%", 100*d.flops/t.S/torchPeak)
	}
	return goShare, torchShare, true
}

func targets(w io.Writer, r *report, bw, xBytes float64) {
	fmt.Fprintln(w, "Targets:")
	fmt.Fprintln(w)
	yes := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	ratio := func(goName, tName string) (float64, bool) {
		g, gok := r.Go[goName]
		t, tok := best(r, tName)
		if !gok || !tok {
			return 0, false
		}
		return g.NsOp / 1e9 / t.S, true
	}
	// every row ≤ 0.67 (OpenBLAS build) / small rows ≤ 0.33
	var worst, worstSmall float64
	var worstName, worstSmallName string
	for _, d := range rowDefs {
		q, ok := ratio(d.name, d.torchName())
		if !ok || d.flops > 0 || strings.HasPrefix(d.name, bench.MLP.Name+"/") || strings.HasPrefix(d.name, bench.Wide.Name+"/") {
			continue // issue 7's rows only: the wide problems have targets of their own
		}
		if q > worst {
			worst, worstName = q, d.name
		}
		if (strings.HasPrefix(d.name, "small") || strings.HasPrefix(d.name, "meta")) && q > worstSmall {
			worstSmall, worstSmallName = q, d.name
		}
	}
	if worstName != "" {
		fmt.Fprintf(w, "- every row of large, small and meta ≤ 0.67 × PyTorch (%s build): worst %.2f (%s): %s\n", r.BLAS, worst, worstName, yes(worst <= 0.67))
	}
	if worstSmallName != "" {
		fmt.Fprintf(w, "- small rows (d ≤ 100) and meta-learning rows ≤ 0.33 × PyTorch (%s build): worst %.2f (%s): %s\n", r.BLAS, worstSmall, worstSmallName, yes(worstSmall <= 0.33))
	}
	for _, s := range bench.Specs {
		g, ok1 := r.Go[s.Name+"/f64/grad"]
		h, ok2 := r.Go[s.Name+"/f64/hvp"]
		f, ok3 := r.Go[s.Name+"/f64/hvp-fixed"]
		if ok1 && ok2 && ok3 {
			fmt.Fprintf(w, "- %s: HVP ≤ 1.5 × gradient: %.2f: %s; HVP at a fixed point (CG/Neumann iteration) ≤ 1.0 × gradient: %.2f: %s\n",
				s.Name, h.NsOp/g.NsOp, yes(h.NsOp <= 1.5*g.NsOp), f.NsOp/g.NsOp, yes(f.NsOp <= g.NsOp))
		}
	}
	if a, ok := r.Go["small/f64/aid-cg10-lin"]; ok {
		if b, ok := r.Go["small/f64/aid-cg100-lin"]; ok {
			if g, ok := r.Go["small/f64/grad"]; ok {
				it := (b.NsOp - a.NsOp) / 90
				fmt.Fprintf(w, "- small: one CG iteration inside AID (Linearize), (t(CG100) − t(CG10))/90 = %s = %.2f × gradient: %s\n", dur(it/1e9), it/g.NsOp, yes(it <= g.NsOp))
			}
		}
	}
	if g, ok := r.Go["large/f64/grad"]; ok {
		frac := 2 * xBytes / bw / (g.NsOp / 1e9)
		fmt.Fprintf(w, "- large gradient ≥ 70%% of the two-pass bound (issue 16; 50%% before): %.0f%%: %s\n", 100*frac, yes(frac >= 0.7))
	}
	// Issue 16: rows bound by their products at most 1.0 × PyTorch, and at
	// most 0.33 × where PyTorch runs at less than a third of its peak.
	for _, prec := range []string{"f64", "f32"} {
		var worst1, worst3 float64
		var name1, name3 string
		for _, d := range rowDefs {
			q, ok := ratio(d.name, d.torchName())
			t, tok := best(r, d.torchName())
			if !ok || !tok || d.flops == 0 || !strings.Contains(d.name, "/"+prec+"/") || strings.HasSuffix(d.name, "aid-cg10") {
				continue // (the AID rows count with the products users get, -lin)
			}
			pk := r.Peak.F64All
			if prec == "f32" {
				pk = r.Peak.F32All
			}
			if d.flops/t.S < pk/3 {
				if q > worst3 {
					worst3, name3 = q, d.name
				}
			} else if q > worst1 {
				worst1, name1 = q, d.name
			}
		}
		if name1 != "" {
			fmt.Fprintf(w, "- %s rows bound by their products, PyTorch at ≥ 1/3 of its peak: ≤ 1.0 × PyTorch: worst %.2f (%s): %s\n", prec, worst1, name1, yes(worst1 <= 1))
		}
		if name3 != "" {
			fmt.Fprintf(w, "- %s rows bound by their products, PyTorch below 1/3 of its peak: ≤ 0.33 × PyTorch: worst %.2f (%s): %s\n", prec, worst3, name3, yes(worst3 <= 0.33))
		}
	}
	for _, m := range []string{"itd-bio", "aid-bio"} {
		if q, ok := ratio("meta/f32/"+m, "meta/f32/"+m); ok {
			fmt.Fprintf(w, "- float32 meta-learning step, %s, ≤ 0.33 × PyTorch's float32 step (issue 16): %.2f: %s\n", m, q, yes(q <= 0.33))
		}
	}
	for _, s := range bench.Specs {
		a, ok1 := r.Go[s.Name+"/f64/itd-t10"]
		b, ok2 := r.Go[s.Name+"/f64/itd-t100"]
		if ok1 && ok2 {
			y := float64(s.D * s.C * 8)
			slope := (b.BOp - a.BOp) / 90
			rss := (b.PeakRSS - a.PeakRSS) / 90
			line := fmt.Sprintf("- %s: ITD memory slope in T (Go B/op) %s per step against |y|·8 = %s (%.2f×); Go peak ΔRSS slope %s per step",
				s.Name, mem(slope), mem(y), slope/y, mem(rss))
			ta, ok3 := best(r, s.Name+"/f64/itd-t10")
			tb, ok4 := best(r, s.Name+"/f64/itd-t100")
			if ok3 && ok4 {
				line += fmt.Sprintf("; PyTorch peak ΔRSS slope %s per step", mem((tb.Peak-ta.Peak)/90))
			}
			fmt.Fprintf(w, "%s: %s (within 25%% of |y|·8)\n", line, yes(slope >= 0.9*y && slope <= 1.25*y))
		}
	}
	if a, ok := r.Go["small/f64/aid-cg10-lin"]; ok {
		if b, ok := r.Go["small/f64/aid-cg100-lin"]; ok {
			y := float64(bench.Small.D * bench.Small.C * 8)
			per := (b.BOp - a.BOp) / 90
			fmt.Fprintf(w, "- small: AID memory flat in the number of CG steps: B/op %s (CG 10) and %s (CG 100), %s per extra CG step against |y|·8 = %s (short-lived per-call allocations, not storage); peak ΔRSS %s and %s: %s (growth per step < 10%% of |y|·8)\n",
				mem(a.BOp), mem(b.BOp), mem(per), mem(y), mem(a.PeakRSS), mem(b.PeakRSS), yes(per < 0.1*y))
		}
	}
}
