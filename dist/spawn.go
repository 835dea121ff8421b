package dist

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// Environment variables of a worker process (besides the Endpoint's, see
// EndpointFromEnv).
const (
	// EnvWorker, when set, makes ServeIfWorker serve as the worker its
	// value names.
	EnvWorker = "BILEVEL_DIST_WORKER"
	// EnvPool is the pool it serves (default DefaultPool).
	EnvPool = "BILEVEL_DIST_POOL"
	// EnvVerbose set to 1 makes it log every shard built and message
	// refused on standard error.
	EnvVerbose = "BILEVEL_DIST_VERBOSE"
	// envParent is the process id whose exit ends a worker started by
	// StartWorkers.
	envParent = "BILEVEL_DIST_PARENT"
)

// workerReconnect is how long a worker started by ServeIfWorker tries to
// reconnect to a server it lost before it exits.
const workerReconnect = time.Minute

// ServeIfWorker returns at once unless the environment variable EnvWorker
// is set. Then the process is a worker: it connects to the server that
// EndpointFromEnv describes, serves pool EnvPool under the name EnvWorker
// with the models this program registered, and exits — with status 0 when
// the process that started it (StartWorkers) exits, or 1, printing why on
// standard error, when the connection fails or is lost for a minute. Call
// it at the top of main (in tests, of TestMain), after registering the
// models and before anything else.
func ServeIfWorker() {
	name, ok := os.LookupEnv(EnvWorker)
	if !ok {
		return
	}
	if err := serveFromEnv(name); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveFromEnv(name string) error {
	nc, err := Dial(EndpointFromEnv(), nats.Name("bilevel worker "+name),
		nats.MaxReconnects(int(workerReconnect/time.Second)), nats.ReconnectWait(time.Second))
	if err != nil {
		return fmt.Errorf("dist: worker %s: %w", name, err)
	}
	defer nc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if v := os.Getenv(envParent); v != "" {
		parent, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("dist: worker %s: %s = %q is not a process id", name, envParent, v)
		}
		go watchParent(parent, cancel)
	}
	s := WorkerSettings{Name: name, Pool: os.Getenv(EnvPool)}
	if os.Getenv(EnvVerbose) == "1" {
		s.Log = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}
	return Serve(ctx, nc, s)
}

// watchParent calls stop once the process is no longer parent's child.
func watchParent(parent int, stop func()) {
	for os.Getppid() == parent {
		time.Sleep(200 * time.Millisecond)
	}
	stop()
}

// Workers are worker processes of this program started by StartWorkers on
// this machine.
type Workers struct {
	exe   string
	env   []string
	names []string
	procs []*exec.Cmd
	exits []chan struct{} // closed when the process has exited
}

var spawned atomic.Int64

// StartWorkers starts n processes of this very program (os.Executable)
// in worker mode, connected to e and serving pool, with env added to
// their environment. The program must call ServeIfWorker at the top of
// main (TestMain in tests): that is where they serve. Their output goes
// to this process's standard error. They exit when this process does, or
// on Close.
func StartWorkers(n int, e Endpoint, pool string, env ...string) (*Workers, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("dist: StartWorkers: finding this program: %w", err)
	}
	if pool == "" {
		pool = DefaultPool
	}
	ws := &Workers{exe: exe}
	ws.env = append(append(append(os.Environ(), e.env()...), EnvPool+"="+pool, envParent+"="+strconv.Itoa(os.Getpid())), env...)
	for range n {
		ws.names = append(ws.names, fmt.Sprintf("w%d-%d", os.Getpid(), spawned.Add(1)))
		ws.procs, ws.exits = append(ws.procs, nil), append(ws.exits, nil)
		if err := ws.Restart(len(ws.names) - 1); err != nil {
			ws.Close()
			return nil, err
		}
	}
	return ws, nil
}

// Names returns the workers' names.
func (ws *Workers) Names() []string { return ws.names }

// Running reports whether worker i's process is running.
func (ws *Workers) Running(i int) bool {
	if ws.exits[i] == nil {
		return false
	}
	select {
	case <-ws.exits[i]:
		return false
	default:
		return true
	}
}

// Restart starts worker i again, under its name, after it was killed or
// exited.
func (ws *Workers) Restart(i int) error {
	if ws.Running(i) {
		return fmt.Errorf("dist: worker %s is running", ws.names[i])
	}
	c := exec.Command(ws.exe)
	c.Env = append(ws.env[:len(ws.env):len(ws.env)], EnvWorker+"="+ws.names[i])
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	if err := c.Start(); err != nil {
		return fmt.Errorf("dist: starting worker %s: %w", ws.names[i], err)
	}
	exited := make(chan struct{})
	go func() {
		_ = c.Wait() // its status says only how it ended, which the caller chose or the worker printed
		close(exited)
	}()
	ws.procs[i], ws.exits[i] = c, exited
	return nil
}

// Kill kills worker i with SIGKILL, as a crash would, and waits until it
// is gone.
func (ws *Workers) Kill(i int) error {
	if !ws.Running(i) {
		return fmt.Errorf("dist: worker %s is not running", ws.names[i])
	}
	if err := ws.procs[i].Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("dist: killing worker %s: %w", ws.names[i], err)
	}
	<-ws.exits[i]
	return nil
}

// Close kills the workers still running and waits for them.
func (ws *Workers) Close() error {
	var errs []error
	for i := range ws.procs {
		if ws.Running(i) {
			errs = append(errs, ws.Kill(i))
		}
	}
	return errors.Join(errs...)
}
