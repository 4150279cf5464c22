package delayq

// TLS: a server started with --tls-cert-file (and --tls-ca-cert-file for mutual TLS), the
// certificates made by testCerts (harness_test.go).

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// localhost is addr with its host named localhost: the certificate's DNS SAN, not its IP one.
func localhost(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return net.JoinHostPort("localhost", port)
}

// wantError fails the test unless err is of sentinel and its message holds every part.
func wantError(t testing.TB, what string, err, sentinel error, parts ...string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: want %v, got %v", what, sentinel, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("%s: %q does not say %q", what, err, p)
		}
	}
}

// Over TLS, by the address's IP (its IP SAN) and by localhost (its DNS SAN): adds, a waiting
// reserve, finishes; a cancelled waiting reserve is withdrawn (close_notify, then FIN); a dead
// server before it in the list is failed over.
func TestTLSAddReserveFinish(t *testing.T) {
	t.Parallel()
	srv := startTLSServer(t, "server")
	ca := testCerts(t).path("ca.pem")
	ctx := ctxT(t)
	for _, addr := range []string{srv.addr, localhost(srv.addr)} {
		c := newClient(t, Options{Servers: []string{addr}, TLS: true, TLSCAFile: ca})
		added := must(c.Add(ctx, Job{Topic: "tls.orders", Body: []byte("over TLS")}))
		jobs := must(c.Reserve(ctx, ReserveOptions{Topics: []string{"tls.orders"}, Wait: 5 * time.Second}))
		if len(jobs) != 1 || jobs[0].ID != added.ID || string(jobs[0].Body) != "over TLS" {
			t.Fatalf("%s: reserved %+v, want %s", addr, jobs, added.ID)
		}
		check(t, c.Finish(ctx, jobs[0].ID, jobs[0].Receipt))
		if _, err := c.Get(ctx, added.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: after finish: %v", addr, err)
		}
	}

	c := newClient(t, Options{Servers: []string{srv.addr}, TLS: true, TLSCAFile: ca})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Reserve(rctx, ReserveOptions{Topics: []string{"tls.withdrawn"}, Wait: 20 * time.Second})
		done <- err
	}()
	eventually(t, 5*time.Second, "the reserve waits on the server", func() bool {
		return must(c.Stats(ctx)).Waiting == 1
	})
	cancel()
	select {
	case err := <-done:
		wantError(t, "cancelled reserve", err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled reserve over TLS did not return")
	}
	eventually(t, 5*time.Second, "the server withdraws the reserve", func() bool {
		return must(c.Stats(ctx)).Waiting == 0
	})

	dead := startFake(t)
	dead.l.Close()
	c = newClient(t, Options{Servers: []string{dead.addr(), srv.addr}, TLS: true, TLSCAFile: ca})
	for i := 0; i < 3; i++ { // the connection pooled, then used again
		check(t, c.Ping(ctx))
	}
}

// DELAYQ_TLS, DELAYQ_CACERT, DELAYQ_CERT and DELAYQ_KEY stand in for the options left unset, as
// for the delayq command; a file from them without TLS on is refused naming the variable.
func TestTLSOptionsComeFromTheEnvironment(t *testing.T) {
	certs := testCerts(t)
	srv := startTLSServer(t, "server", "--tls-ca-cert-file", certs.path("ca.pem"))
	ctx := ctxT(t)
	t.Setenv("DELAYQ_SERVER", srv.addr)
	t.Setenv("DELAYQ_TLS", "1")
	t.Setenv("DELAYQ_CACERT", certs.path("ca.pem"))
	t.Setenv("DELAYQ_CERT", certs.path("client.pem"))
	t.Setenv("DELAYQ_KEY", certs.path("client.key"))
	for _, on := range []string{"1", "yes", "true"} {
		t.Setenv("DELAYQ_TLS", on)
		c := newClient(t, Options{})
		check(t, c.Ping(ctx))
	}
	// The options win over the variables.
	t.Setenv("DELAYQ_CACERT", certs.path("other-ca.pem"))
	c := newClient(t, Options{TLSCAFile: certs.path("ca.pem")})
	check(t, c.Ping(ctx))

	for _, off := range []string{"0", "no", "false"} {
		t.Setenv("DELAYQ_TLS", off)
		_, err := New(Options{})
		wantError(t, "DELAYQ_TLS="+off, err, ErrInvalidArgument,
			"tls_ca_file ($DELAYQ_CACERT) given without tls")
	}
	t.Setenv("DELAYQ_CACERT", "")
	t.Setenv("DELAYQ_CERT", "")
	_, err := New(Options{TLS: true})
	wantError(t, "DELAYQ_KEY alone", err, ErrInvalidArgument,
		"tls_key_file ($DELAYQ_KEY) given without tls_cert_file")
	t.Setenv("DELAYQ_KEY", "")
	if c := must(New(Options{})); c.servers[0].tls != nil { // DELAYQ_TLS=false
		t.Fatal("DELAYQ_TLS=false: TLS on")
	}
}

// A server whose certificate the CA did not sign, or that names another host, or that speaks
// no TLS: the connect fails saying why, nothing is sent, and the server is not used.
func TestTLSServerTheClientCannotTrustIsRefused(t *testing.T) {
	t.Parallel()
	certs := testCerts(t)
	srv := startTLSServer(t, "server")
	elsewhere := startTLSServer(t, "elsewhere")
	plain := startServer(t)
	ctx := ctxT(t)
	ping := func(addr, ca string) error {
		c := newClient(t, Options{Servers: []string{addr}, TLS: true, TLSCAFile: ca})
		return c.Ping(ctx)
	}
	wantError(t, "another CA", ping(srv.addr, certs.path("other-ca.pem")), ErrUnavailable,
		srv.addr, "TLS handshake: x509: certificate signed by unknown authority")
	wantError(t, "the system's trust store", ping(srv.addr, ""), ErrUnavailable,
		"TLS handshake: x509: certificate signed by unknown authority")
	wantError(t, "another host's certificate, by name", ping(localhost(elsewhere.addr),
		certs.path("ca.pem")), ErrUnavailable,
		"TLS handshake: x509: certificate is valid for elsewhere.example, not localhost")
	wantError(t, "another host's certificate, by IP", ping(elsewhere.addr, certs.path("ca.pem")),
		ErrUnavailable, "TLS handshake: x509: cannot validate certificate for 127.0.0.1")
	wantError(t, "a plaintext server", ping(plain.addr, certs.path("ca.pem")), ErrUnavailable,
		plain.addr, "TLS handshake: ")
	// And a TLS server with a trusted certificate after them takes the request.
	c := newClient(t, Options{Servers: []string{elsewhere.addr, srv.addr}, TLS: true,
		TLSCAFile: certs.path("ca.pem")})
	must(c.Add(ctx, Job{Topic: "tls.failover", ID: "f1"}))
}

// Mutual TLS (--tls-ca-cert-file): a client certificate that CA signed is let in; none, or one
// of another CA, is refused at the connect, saying so, with or without a token.
func TestTLSMutual(t *testing.T) {
	t.Parallel()
	certs := testCerts(t)
	srv := startTLSServer(t, "server", "--tls-ca-cert-file", certs.path("ca.pem"),
		"--auth-token", "secret")
	ctx := ctxT(t)
	client := func(cert, token string) *Client {
		o := Options{Servers: []string{srv.addr}, TLS: true, TLSCAFile: certs.path("ca.pem"),
			AuthToken: token}
		if cert != "" {
			o.TLSCertFile, o.TLSKeyFile = certs.path(cert+".pem"), certs.path(cert+".key")
		}
		return newClient(t, o)
	}
	c := client("client", "secret")
	added := must(c.Add(ctx, Job{Topic: "tls.mutual", Body: []byte("x")}))
	jobs := must(c.Reserve(ctx, ReserveOptions{Topics: []string{"tls.mutual"}}))
	if len(jobs) != 1 || jobs[0].ID != added.ID {
		t.Fatalf("reserved %+v", jobs)
	}
	check(t, c.Finish(ctx, jobs[0].ID, jobs[0].Receipt))

	wantError(t, "the token still applies", client("client", "wrong").Ping(ctx), ErrUnauthorized)
	// crypto/tls sends no certificate of a CA the server's list does not name: both read
	// "certificate required".
	for _, token := range []string{"secret", ""} {
		wantError(t, "no certificate, token "+token, client("", token).Ping(ctx), ErrUnavailable,
			srv.addr, "TLS handshake refused by the server: tls: certificate required")
		wantError(t, "another CA's certificate, token "+token, client("other-client", token).Ping(ctx),
			ErrUnavailable, srv.addr, "TLS handshake refused by the server: tls: certificate required")
	}
	// Refused by the server: nothing was sent, so even a call that is not repeated says so.
	err := client("", "secret").Delete(ctx, "some-id")
	wantError(t, "delete without a certificate", err, ErrUnavailable,
		"no delayq server answered", "TLS handshake")
}

// The options that do not fit are refused by New, naming them.
func TestTLSOptionErrors(t *testing.T) {
	t.Parallel()
	certs := testCerts(t)
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{TLSCAFile: certs.path("ca.pem")}, "tls_ca_file given without tls"},
		{Options{TLSCertFile: certs.path("client.pem"), TLSKeyFile: certs.path("client.key")},
			"tls_cert_file given without tls"},
		{Options{TLSKeyFile: certs.path("client.key")}, "tls_key_file given without tls"},
		{Options{TLS: true, TLSCertFile: certs.path("client.pem")},
			"tls_cert_file given without tls_key_file"},
		{Options{TLS: true, TLSKeyFile: certs.path("client.key")},
			"tls_key_file given without tls_cert_file"},
		{Options{TLS: true, TLSCAFile: certs.path("missing.pem")},
			"tls_ca_file: cannot read " + certs.path("missing.pem") + ": no such file"},
		{Options{TLS: true, TLSCAFile: certs.path("client.ext")}, "tls_ca_file: no PEM certificate in"},
		{Options{TLS: true, TLSCertFile: certs.path("client.pem"), TLSKeyFile: certs.path("server.key")},
			"tls_cert_file, tls_key_file: cannot load"},
	} {
		_, err := New(c.o)
		wantError(t, c.want, err, ErrInvalidArgument, c.want)
	}
}
