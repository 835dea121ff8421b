// Command worker serves the models of dist/catalog (logistic,
// binary-logistic, ridge, mlp) to dist coordinators: start one or more on
// each machine, pointed at the NATS server, then run the coordinator
// (docs/distributed.md).
//
//	go run ./dist/cmd/worker -nats nats://10.0.0.1:4222 -user worker -password-file /etc/bilevel/pass
//
// It builds the shards a coordinator attaches and answers their oracle
// calls until it is interrupted (SIGINT, SIGTERM), or the server stays
// unreachable for -reconnect. Secrets come from files or from the
// environment (BILEVEL_DIST_TOKEN, BILEVEL_DIST_PASSWORD), never from the
// command line, which other users can read.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gobilevel/bilevel/dist"
	_ "github.com/gobilevel/bilevel/dist/catalog" // the models it serves
	"github.com/nats-io/nats.go"
)

func main() {
	dist.ServeIfWorker() // when a coordinator's StartWorkers started it
	ep := dist.EndpointFromEnv()
	url := flag.String("nats", ep.URL, "URL of the NATS server, or servers separated by commas (default $"+dist.EnvURL+")")
	pool := flag.String("pool", dist.DefaultPool, "pool of the coordinator to serve (its Settings.Pool)")
	name := flag.String("name", "", "this worker's name, unique in the pool (default host-pid)")
	user := flag.String("user", ep.User, "NATS user (default $"+dist.EnvUser+"); the password comes from -password-file or $"+dist.EnvPassword)
	passFile := flag.String("password-file", "", "file holding the NATS password")
	tokenFile := flag.String("token-file", "", "file holding the NATS token (default $"+dist.EnvToken+")")
	nkey := flag.String("nkey", ep.NKeySeedFile, "nkey seed file to authenticate with")
	creds := flag.String("creds", ep.CredsFile, "credentials file (user JWT and seed) to authenticate with")
	ca := flag.String("tls-ca", ep.CAFile, "certificate authority of the server's TLS certificate (makes the connection TLS)")
	cert := flag.String("tls-cert", ep.CertFile, "client certificate, for a server that verifies clients")
	key := flag.String("tls-key", ep.KeyFile, "key of the client certificate")
	reconnect := flag.Duration("reconnect", 10*time.Minute, "how long to try to reconnect to a lost server before exiting")
	verbose := flag.Bool("v", false, "log every shard built and every message refused")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: worker -nats URL [flags]\n\nServes the models of dist/catalog (%s) to dist coordinators.\n\n",
			strings.Join(dist.Models(), ", "))
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected arguments %q", flag.Args()))
	}
	ep.URL, ep.User, ep.NKeySeedFile, ep.CredsFile, ep.CAFile, ep.CertFile, ep.KeyFile = *url, *user, *nkey, *creds, *ca, *cert, *key
	for _, f := range []struct {
		flag, path string
		dst        *string
	}{{"-password-file", *passFile, &ep.Password}, {"-token-file", *tokenFile, &ep.Token}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			fail(fmt.Errorf("%s: %w", f.flag, err))
		}
		*f.dst = strings.TrimSpace(string(b))
	}
	if ep.URL == "" {
		fail(fmt.Errorf("give the NATS server with -nats or $%s", dist.EnvURL))
	}
	if *reconnect <= 0 {
		fail(fmt.Errorf("-reconnect %v: want a positive duration", *reconnect))
	}
	nc, err := dist.Dial(ep, nats.Name("bilevel worker"), nats.ReconnectWait(2*time.Second),
		nats.MaxReconnects(int(*reconnect/(2*time.Second))+1))
	if err != nil {
		fail(err)
	}
	defer nc.Close()
	s := dist.WorkerSettings{Name: *name, Pool: *pool}
	if *verbose {
		s.Log = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "worker: serving pool %s on %s\n", *pool, nc.ConnectedUrlRedacted())
	if err := dist.Serve(ctx, nc, s); err != nil {
		fail(err)
	}
	fmt.Printf("result: pool=%s status=stopped\n", *pool)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "worker:", err)
	fmt.Printf("result: status=failed\n")
	os.Exit(1)
}
