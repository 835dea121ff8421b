package dist

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/nats-io/nats.go"
)

// ClusterSettings configure StartCluster.
type ClusterSettings struct {
	// URL is an external NATS server, reached with the credentials of the
	// environment (EndpointFromEnv); "" starts an embedded server on
	// 127.0.0.1.
	URL string
	// Workers is the number of worker processes of this program to start
	// on this machine, connected to the server. With an external server
	// the workers may instead be started anywhere (docs/distributed.md);
	// 0 starts none.
	Workers int
	// Pool is the workers' pool (default DefaultPool).
	Pool string
}

// Cluster is a connection to a NATS server and the worker processes this
// program started on it: what a program that offers -workers and -nats
// flags needs before dist.New.
type Cluster struct {
	// Conn is the coordinator's connection (in process to an embedded
	// server).
	Conn *nats.Conn
	// Workers are the worker processes started here (nil if none).
	Workers *Workers
	srv     *Server
}

// StartCluster connects to the server of s.URL, or starts an embedded
// one, and starts s.Workers worker processes of this program on it (its
// main must call ServeIfWorker first). Close stops what it started.
func StartCluster(s ClusterSettings) (*Cluster, error) {
	if s.Workers < 0 {
		return nil, fmt.Errorf("dist: ClusterSettings.Workers = %d: want ≥ 0", s.Workers)
	}
	c := &Cluster{}
	var ep Endpoint
	var err error
	if s.URL == "" {
		if c.srv, err = StartServer(ServerSettings{}); err != nil {
			return nil, err
		}
		ep = c.srv.Endpoint()
		c.Conn, err = c.srv.Dial()
	} else {
		if err := CheckURL(s.URL); err != nil {
			return nil, err
		}
		ep = EndpointFromEnv()
		ep.URL = s.URL
		c.Conn, err = Dial(ep)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	if s.Workers > 0 {
		if c.Workers, err = StartWorkers(s.Workers, ep, s.Pool); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Close stops the workers started here, closes the connection and stops
// an embedded server.
func (c *Cluster) Close() {
	if c.Workers != nil {
		_ = c.Workers.Close() // a worker that already exited is no error here
	}
	if c.Conn != nil {
		c.Conn.Close()
	}
	if c.srv != nil {
		c.srv.Close()
	}
}

// CheckURL reports whether s is a NATS server URL, or several separated by
// commas: nats://, tls://, ws:// or wss:// with a host.
func CheckURL(s string) error {
	if s == "" {
		return errors.New("an empty URL")
	}
	for _, u := range strings.Split(s, ",") {
		p, err := url.Parse(u)
		if err != nil {
			return fmt.Errorf("%q: %v", u, err)
		}
		switch p.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("%q: want a nats://, tls://, ws:// or wss:// URL", u)
		}
		if p.Host == "" {
			return fmt.Errorf("%q has no host", u)
		}
		if p.User != nil {
			return fmt.Errorf("%q carries credentials: give them in the environment (%s, %s or %s) so that they stay out of process lists", u, EnvToken, EnvUser, EnvPassword)
		}
	}
	return nil
}
