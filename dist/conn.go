package dist

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Endpoint says how to reach a NATS server and who to be there. Only the
// credentials the server asks for are needed; give at most one of Token,
// User/Password, NKeySeedFile and CredsFile.
type Endpoint struct {
	// URL is the server, "nats://host:4222", or several separated by
	// commas for a cluster; "tls://host:4222" insists on TLS.
	URL string
	// Token authenticates with a shared secret (server option
	// authorization { token }).
	Token string
	// User and Password authenticate as a user (authorization { user,
	// password }).
	User, Password string
	// NKeySeedFile authenticates with the nkey whose seed the file holds
	// (authorization { users = [{ nkey }] }).
	NKeySeedFile string
	// CredsFile authenticates with a user JWT and its nkey seed, as an
	// operator-mode server expects.
	CredsFile string
	// CAFile is the certificate authority that signed the server's TLS
	// certificate; setting it makes the connection TLS.
	CAFile string
	// CertFile and KeyFile are the client's certificate and key, for a
	// server that verifies its clients (tls { verify: true }).
	CertFile, KeyFile string
}

// Environment variables that carry an Endpoint to a worker process (see
// EndpointFromEnv): secrets in the environment stay out of process lists.
const (
	EnvURL      = "BILEVEL_DIST_URL"
	EnvToken    = "BILEVEL_DIST_TOKEN"
	EnvUser     = "BILEVEL_DIST_USER"
	EnvPassword = "BILEVEL_DIST_PASSWORD"
	EnvNKey     = "BILEVEL_DIST_NKEY"
	EnvCreds    = "BILEVEL_DIST_CREDS"
	EnvCA       = "BILEVEL_DIST_CA"
	EnvCert     = "BILEVEL_DIST_CERT"
	EnvKey      = "BILEVEL_DIST_KEY"
)

func (e *Endpoint) envFields() []struct {
	name string
	v    *string
} {
	return []struct {
		name string
		v    *string
	}{{EnvURL, &e.URL}, {EnvToken, &e.Token}, {EnvUser, &e.User}, {EnvPassword, &e.Password},
		{EnvNKey, &e.NKeySeedFile}, {EnvCreds, &e.CredsFile}, {EnvCA, &e.CAFile}, {EnvCert, &e.CertFile}, {EnvKey, &e.KeyFile}}
}

// EndpointFromEnv reads an Endpoint from the BILEVEL_DIST_* variables
// (EnvURL, …); unset variables leave their fields empty.
func EndpointFromEnv() Endpoint {
	var e Endpoint
	for _, f := range e.envFields() {
		*f.v = os.Getenv(f.name)
	}
	return e
}

// env returns e as NAME=value lines for a child's environment.
func (e Endpoint) env() []string {
	var r []string
	for _, f := range e.envFields() {
		if *f.v != "" {
			r = append(r, f.name+"="+*f.v)
		}
	}
	return r
}

// Dial connects to the server of e. opts come after the Endpoint's own
// options, so they can override them (reconnection, handlers).
func Dial(e Endpoint, opts ...nats.Option) (*nats.Conn, error) {
	if e.URL == "" {
		return nil, errors.New("dist: Dial: Endpoint.URL is empty: give the NATS server's URL, or start one with StartServer")
	}
	o := []nats.Option{nats.Timeout(10 * time.Second)}
	creds := 0
	if e.Token != "" {
		o = append(o, nats.Token(e.Token))
		creds++
	}
	if e.User != "" || e.Password != "" {
		o = append(o, nats.UserInfo(e.User, e.Password))
		creds++
	}
	if e.NKeySeedFile != "" {
		opt, err := nats.NkeyOptionFromSeed(e.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("dist: nkey seed file: %w", err)
		}
		o = append(o, opt)
		creds++
	}
	if e.CredsFile != "" {
		o = append(o, nats.UserCredentials(e.CredsFile))
		creds++
	}
	if creds > 1 {
		return nil, errors.New("dist: Dial: the Endpoint gives more than one of Token, User/Password, NKeySeedFile and CredsFile")
	}
	if e.CAFile != "" {
		o = append(o, nats.RootCAs(e.CAFile))
	}
	if e.CertFile != "" || e.KeyFile != "" {
		o = append(o, nats.ClientCert(e.CertFile, e.KeyFile))
	}
	nc, err := nats.Connect(e.URL, append(o, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("dist: connecting to %s%s: %w", e.URL, e.who(), err)
	}
	return nc, nil
}

// who describes the identity e presents, never its secret.
func (e Endpoint) who() string {
	switch {
	case e.User != "":
		return " as user " + e.User
	case e.Token != "":
		return " with a token"
	case e.NKeySeedFile != "":
		return " with the nkey of " + e.NKeySeedFile
	case e.CredsFile != "":
		return " with the credentials of " + e.CredsFile
	}
	return " without credentials"
}

// DefaultMaxPayload is the largest message an embedded server accepts
// when ServerSettings.MaxPayload is 0: 8 MiB, the largest NATS advises.
const DefaultMaxPayload = 8 << 20

// ServerSettings configure an embedded NATS server. The zero value listens
// on 127.0.0.1 at a random free port and admits only clients that present
// a random token, which the Server's Endpoint carries.
type ServerSettings struct {
	// Port is the port to listen on; 0 picks a free one.
	Port int
	// Token is the secret clients must present; "" (with no User) draws a
	// random one.
	Token string
	// User and Password, when User is set, replace the token.
	User, Password string
	// CertFile and KeyFile make the server speak TLS only, with this
	// certificate; its Endpoint then trusts CertFile as the authority (a
	// self-signed certificate).
	CertFile, KeyFile string
	// MaxPayload is the largest message in bytes (default
	// DefaultMaxPayload).
	MaxPayload int
}

// Server is an embedded NATS server, for running on one machine with
// nothing to install: it listens on 127.0.0.1 only. Across machines, run
// nats-server (see docs/distributed.md) and Dial it.
type Server struct {
	ns *server.Server
	ep Endpoint
}

// StartServer starts an embedded NATS server on 127.0.0.1 and waits until
// it accepts connections.
func StartServer(s ServerSettings) (*Server, error) {
	if s.Port < 0 || s.Port > 65535 {
		return nil, fmt.Errorf("dist: ServerSettings.Port = %d: want 0 (any free port) to 65535", s.Port)
	}
	if s.MaxPayload < 0 || s.MaxPayload > 64<<20 {
		return nil, fmt.Errorf("dist: ServerSettings.MaxPayload = %d: want 0 (%d) to 64 MiB", s.MaxPayload, DefaultMaxPayload)
	}
	if s.MaxPayload == 0 {
		s.MaxPayload = DefaultMaxPayload
	}
	port := s.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true,
		MaxPayload: int32(s.MaxPayload), MaxPending: int64(max(8*s.MaxPayload, 64<<20))}
	ep := Endpoint{}
	if s.User != "" {
		opts.Username, opts.Password = s.User, s.Password
		ep.User, ep.Password = s.User, s.Password
	} else {
		if s.Token == "" {
			s.Token = randomHex(16)
		}
		opts.Authorization = s.Token
		ep.Token = s.Token
	}
	scheme := "nats"
	if s.CertFile != "" || s.KeyFile != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: s.CertFile, KeyFile: s.KeyFile})
		if err != nil {
			return nil, fmt.Errorf("dist: embedded server TLS: %w", err)
		}
		opts.TLSConfig, opts.TLS, opts.TLSTimeout = tc, true, 5
		ep.CAFile, scheme = s.CertFile, "tls"
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("dist: embedded NATS server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("dist: the embedded NATS server did not accept connections within 10 s")
	}
	addr := ns.Addr().String()
	ep.URL = scheme + "://" + addr
	return &Server{ns: ns, ep: ep}, nil
}

// Endpoint returns the server's URL and the credentials it admits.
func (s *Server) Endpoint() Endpoint { return s.ep }

// Dial connects to the server from this process without a socket (no
// system calls, no copies through the kernel), with its credentials; opts
// are as for the package's Dial. Coordinators beside their embedded server
// connect this way.
func (s *Server) Dial(opts ...nats.Option) (*nats.Conn, error) {
	return Dial(s.ep, append([]nats.Option{nats.InProcessServer(s.ns)}, opts...)...)
}

// Close shuts the server down and waits until it has.
func (s *Server) Close() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}

// randomBytes returns n random bytes.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand's contract)
	return b
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string { return hex.EncodeToString(randomBytes(n)) }

// subject joins NATS subject tokens.
func subject(tokens ...string) string { return strings.Join(tokens, ".") }
