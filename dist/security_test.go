package dist

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCredentials checks that the servers refuse clients without the
// right token or password, that a worker process with a wrong token exits
// with an error naming it, and that errors never show a secret.
func TestCredentials(t *testing.T) {
	srv, err := StartServer(ServerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ep := srv.Endpoint()
	if !strings.HasPrefix(ep.URL, "nats://127.0.0.1:") || ep.Token == "" {
		t.Fatalf("embedded server at %s with token %q; want 127.0.0.1 and a random token", ep.URL, ep.Token)
	}
	good, err := Dial(ep)
	if err != nil {
		t.Fatal(err)
	}
	good.Close()
	for _, bad := range []Endpoint{{URL: ep.URL}, {URL: ep.URL, Token: "guess"}, {URL: ep.URL, User: "alice", Password: ep.Token}} {
		nc, err := Dial(bad)
		if err == nil {
			nc.Close()
			t.Fatalf("Dial with %s: admitted", bad.who())
		}
		if !strings.Contains(strings.ToLower(err.Error()), "authorization") || strings.Contains(err.Error(), ep.Token) {
			t.Errorf("Dial with %s: %v; want an authorization error without the secret", bad.who(), err)
		}
	}

	users, err := StartServer(ServerSettings{User: "alice", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer users.Close()
	uep := users.Endpoint()
	if nc, err := Dial(uep); err != nil {
		t.Fatal(err)
	} else {
		nc.Close()
	}
	wrong := uep
	wrong.Password = "guess"
	if nc, err := Dial(wrong); err == nil {
		nc.Close()
		t.Fatal("Dial with a wrong password: admitted")
	} else if !strings.Contains(err.Error(), "as user alice") || strings.Contains(err.Error(), "guess") {
		t.Errorf("Dial with a wrong password: %v; want it to name the user, not the password", err)
	}

	// A worker process with a wrong token exits 1, naming itself.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), EnvWorker+"=intruder", EnvURL+"="+ep.URL, EnvToken+"=guess")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("worker with a wrong token: %v, output %q; want exit status 1", err, out)
	}
	if !strings.Contains(string(out), "worker intruder") || !strings.Contains(strings.ToLower(string(out)), "authorization") {
		t.Errorf("worker with a wrong token printed %q; want its name and the refusal", out)
	}
}

// TestTLS starts the embedded server with a self-signed certificate: a
// client that trusts it connects, one that does not is refused.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	srv, err := StartServer(ServerSettings{CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ep := srv.Endpoint()
	if !strings.HasPrefix(ep.URL, "tls://127.0.0.1:") || ep.CAFile != cert {
		t.Fatalf("TLS server Endpoint %+v", ep)
	}
	nc, err := Dial(ep)
	if err != nil {
		t.Fatal(err)
	}
	if !nc.TLSRequired() {
		t.Error("the connection is not TLS")
	}
	nc.Close()
	if nc, err = srv.Dial(); err != nil {
		t.Fatalf("in-process connection to a TLS server: %v", err)
	}
	nc.Close()
	untrusting := ep
	untrusting.CAFile = ""
	if nc, err := Dial(untrusting); err == nil {
		nc.Close()
		t.Fatal("a client that does not trust the certificate connected")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted certificate: %v", err)
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bilevel test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for _, f := range []struct {
		path, kind string
		der        []byte
	}{{certFile, "CERTIFICATE", der}, {keyFile, "EC PRIVATE KEY", kder}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}
