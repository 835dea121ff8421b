package main

import (
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gobilevel/bilevel/dist"
	"github.com/gobilevel/bilevel/dist/catalog"
	"github.com/gobilevel/bilevel/graph"
)

// envMain makes the test binary run main, with the arguments after
// "--": the worker command itself.
const envMain = "WORKER_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestExternalServer runs two worker commands against a standalone
// nats-server (Debian's package) with a user and password per role and
// subject permissions, as across machines, and checks a distributed
// gradient against the one computed in this process. A worker with a wrong
// password fails with a clear error.
func TestExternalServer(t *testing.T) {
	server, err := exec.LookPath("nats-server")
	if err != nil {
		t.Skip("no nats-server installed (Debian package nats-server); the embedded server is tested in package dist")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	// The configuration of docs/distributed.md: a user per role, allowed
	// only the subjects of its role in pool ext.
	cfg := fmt.Sprintf(`listen: 127.0.0.1:%d
max_payload: 8MB
authorization {
  users = [
    { user: coordinator, password: c-s3cret,
      permissions: { publish: ["ext.w.>", "ext.p.>", "ext.discover"], subscribe: ["ext.c.>", "ext.hello"] } }
    { user: worker, password: s3cret,
      permissions: { publish: ["ext.c.>", "ext.hello"], subscribe: ["ext.w.>", "ext.p.>", "ext.discover"] } }
  ]
}
`, port)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(server, "-c", conf)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	ep := dist.Endpoint{URL: url, User: "coordinator", Password: "c-s3cret"}
	nc, err := dist.Dial(ep)
	for deadline := time.Now().Add(10 * time.Second); err != nil && time.Now().Before(deadline); nc, err = dist.Dial(ep) {
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pass := filepath.Join(dir, "pass")
	if err := os.WriteFile(pass, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	worker := func(name, passFile string) *exec.Cmd {
		c := exec.Command(exe, "-nats", url, "-user", "worker", "-password-file", passFile, "-pool", "ext", "-name", name, "-reconnect", "5s")
		c.Env = append(os.Environ(), envMain+"=1")
		c.Args[0] = "worker"
		return c
	}
	for _, name := range []string{"a", "b"} {
		c := worker(name, pass)
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { c.Process.Kill(); c.Wait() }()
	}

	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("guess"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := worker("c", bad).CombinedOutput()
	if !strings.Contains(strings.ToLower(string(out)), "authorization") || !strings.Contains(string(out), "result: status=failed") || err == nil {
		t.Errorf("worker with a wrong password: %v, output %q", err, out)
	}

	p := catalog.Params{Train: 50, Val: 20, Features: 4, Classes: 3, Seed: 9}
	s, err := catalog.Settings("logistic", p)
	if err != nil {
		t.Fatal(err)
	}
	s.Workers, s.Pool, s.JoinTimeout = 2, "ext", 30*time.Second
	d, err := dist.New(nc, s)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	x, y := d.X0(nil), d.Y0(nil)
	for i := range y {
		y[i] = math.Sin(float64(i))
	}
	got := make([]float64, len(y))
	d.GradG(nil, got, x, y, nil)

	obj, err := catalog.Objective("logistic", p) // the same problem, in this process
	if err != nil {
		t.Fatal(err)
	}
	ref, err := graph.Compile(obj)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float64, len(y))
	ref.GradG(nil, want, x, y, nil)
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12*math.Max(1, math.Abs(want[i])) {
			t.Fatalf("∇y g[%d] = %v on the workers, %v in process", i, got[i], want[i])
		}
	}
	if d.Err() != nil {
		t.Fatal(d.Err())
	}
}
