package delayq

// The tests' servers: the real `delayq serve` (DELAYQ_BINARY, else <repo>/build/bin/delayq
// found from this directory), and redis-server for the failover tests, each on free loopback
// ports, stopped by PID when the test ends.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// delayqBinary is the server the tests run.
func delayqBinary(t testing.TB) string {
	t.Helper()
	path := os.Getenv("DELAYQ_BINARY")
	if path == "" {
		// go test runs in the package's directory: clients/go.
		path = filepath.Join("..", "..", "build", "bin", "delayq")
	}
	abs, err := filepath.Abs(path)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		t.Fatalf("no delayq binary at %s (%v): build it (make build) or set DELAYQ_BINARY", path, err)
	}
	return abs
}

type testServer struct {
	t    testing.TB
	cmd  *exec.Cmd
	addr string // RESP, host:port

	mu     sync.Mutex
	stderr strings.Builder
	exited chan struct{}
}

var respLine = regexp.MustCompile(`serving RESP on (\S+)`)

// startServer runs `delayq serve` on free ports with the memory store, unless args name
// another, and waits for its RESP address.
func startServer(t testing.TB, args ...string) *testServer {
	t.Helper()
	all := []string{"serve", "--http-port", "0", "--resp-port", "0"}
	store := false
	for _, a := range args {
		store = store || a == "--store"
	}
	if !store {
		all = append(all, "--store", "memory")
	}
	all = append(all, args...)
	cmd := exec.Command(delayqBinary(t), all...)
	cmd.Env = serverEnv()
	cmd.SysProcAttr = diesWithUs()
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &testServer{t: t, cmd: cmd, exited: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.stderr.WriteString(line + "\n")
			s.mu.Unlock()
			if m := respLine.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, pipe)
		cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(s.stop)
	select {
	case s.addr = <-found:
	case <-s.exited:
		t.Fatalf("delayq serve %v exited at start:\n%s", args, s.log())
	case <-time.After(10 * time.Second):
		t.Fatalf("delayq serve %v: no RESP address within 10 s:\n%s", args, s.log())
	}
	return s
}

// diesWithUs: a child killed when the test binary dies without its cleanups (a panic).
func diesWithUs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// serverEnv is the environment without the DELAYQ_ settings a developer may have exported.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DELAYQ_") {
			env = append(env, kv)
		}
	}
	return env
}

func (s *testServer) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// stop sends SIGTERM and waits for the exit, SIGKILL after 10 s.
func (s *testServer) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// kill sends SIGKILL and waits for the exit.
func (s *testServer) kill() {
	s.cmd.Process.Kill()
	<-s.exited
}

// terminate sends SIGTERM (a graceful stop), without waiting.
func (s *testServer) terminate() { s.cmd.Process.Signal(syscall.SIGTERM) }

// freePort is a loopback port nothing listens on (as of now).
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startRedis runs a redis-server on a free loopback port, keeping nothing on disk.
func startRedis(t testing.TB) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	cmd.SysProcAttr = diesWithUs()
	if err := cmd.Start(); err != nil {
		t.Skipf("no redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	eventually(t, 10*time.Second, "redis-server answers PING", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		c.Write([]byte("PING\r\n"))
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line == "+PONG\r\n"
	})
	return addr
}

// waitFor polls cond until it holds or timeout passes; for goroutines other than the test's
// (handlers), which must not call t.Fatal.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// eventually polls cond until it holds, failing the test after timeout.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newClient is a client of the given servers, closed when the test ends.
func newClient(t testing.TB, o Options) *Client {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// startWithClient is startServer(t, args...), a client of it and a context for the calls.
func startWithClient(t testing.TB, args ...string) (*testServer, *Client, context.Context) {
	t.Helper()
	srv := startServer(t, args...)
	return srv, newClient(t, Options{Servers: []string{srv.addr}}), ctxT(t)
}

// onEachStore runs test, in parallel, on a server of the memory store and one of the
// embedded store (its data in a temporary directory).
func onEachStore(t *testing.T, test func(t *testing.T, srv *testServer)) {
	t.Parallel()
	for _, store := range []string{"memory", "embedded"} {
		store := store
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			args := []string{"--store", store}
			if store == "embedded" {
				args = append(args, "--data-dir", t.TempDir())
			}
			test(t, startServer(t, args...))
		})
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// must is v, or a panic (which fails the whole run, with its stack) on an unexpected error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("unexpected error: %v", err))
	}
	return v
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// fakeServer is a RESP listener whose connections a test serves by hand: for the answers a
// real server does not give on demand (ERR, malformed replies, a reply after a FIN).
type fakeServer struct {
	l     net.Listener
	conns chan net.Conn
}

func startFake(t testing.TB) *fakeServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{l: l, conns: make(chan net.Conn, 16)}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			f.conns <- c
		}
	}()
	t.Cleanup(func() { l.Close() })
	return f
}

func (f *fakeServer) addr() string { return f.l.Addr().String() }

// accept waits for the next connection.
func (f *fakeServer) accept(t testing.TB) (net.Conn, *bufio.Reader) {
	t.Helper()
	select {
	case c := <-f.conns:
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	case <-time.After(5 * time.Second):
		t.Fatal("no connection to the fake server within 5 s")
		return nil, nil
	}
}

// readCommand reads one command (an array of bulk strings) from a client.
func readCommand(t testing.TB, r *bufio.Reader) []string {
	t.Helper()
	var n int
	if _, err := fmt.Fscanf(r, "*%d\r\n", &n); err != nil {
		t.Fatalf("reading a command: %v", err)
	}
	args := make([]string, n)
	for i := range args {
		var size int
		if _, err := fmt.Fscanf(r, "$%d\r\n", &size); err != nil {
			t.Fatalf("reading a command: %v", err)
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			t.Fatalf("reading a command: %v", err)
		}
		args[i] = string(b[:size])
	}
	return args
}

// proxy forwards connections to a server, and can be taken down (every connection closed, new
// ones closed at once) and brought back: an outage without losing the server's jobs.
type proxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target}
	t.Cleanup(func() { l.Close(); p.setDown(true) })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			down := p.down
			p.mu.Unlock()
			if down {
				c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// certs are the TLS tests' certificates, made once per test binary with the openssl command
// (as tests/integration/tls_test.py's Certs): a CA (EC P-256) signing a server certificate for
// localhost and 127.0.0.1 ("server"), one for another host only ("elsewhere") and a client
// certificate ("client"); and another CA with a client of its own ("other-client"). Paths:
// certs.path("server.pem"), certs.path("server.key").
type certs struct{ dir string }

var (
	certsOnce sync.Once
	certsMade *certs
	certsErr  error
	certsDir  string // removed by TestMain
)

func testCerts(t testing.TB) *certs {
	t.Helper()
	certsOnce.Do(func() {
		certsDir, certsErr = os.MkdirTemp("", "delayq-go-tls-")
		if certsErr == nil {
			certsMade, certsErr = makeCerts(certsDir)
		}
	})
	if certsErr != nil {
		t.Fatalf("making the TLS certificates: %v", certsErr)
	}
	return certsMade
}

func (c *certs) path(name string) string { return filepath.Join(c.dir, name) }

func makeCerts(dir string) (*certs, error) {
	c := &certs{dir: dir}
	run := func(args ...string) error {
		cmd := exec.Command("openssl", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	newKey := []string{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"}
	ca := func(name, cn string) error {
		return run(append(append([]string{"req", "-x509"}, newKey...), "-keyout", name+".key",
			"-out", name+".pem", "-days", "30", "-subj", "/CN="+cn)...)
	}
	leaf := func(name, ca, cn, ext string) error {
		if err := run(append(append([]string{"req"}, newKey...), "-keyout", name+".key",
			"-out", name+".csr", "-subj", "/CN="+cn)...); err != nil {
			return err
		}
		if err := os.WriteFile(c.path(name+".ext"), []byte(ext+"\n"), 0o600); err != nil {
			return err
		}
		return run("x509", "-req", "-in", name+".csr", "-CA", ca+".pem", "-CAkey", ca+".key",
			"-CAcreateserial", "-out", name+".pem", "-days", "30", "-extfile", name+".ext")
	}
	for _, step := range []func() error{
		func() error { return ca("ca", "delayq test CA") },
		func() error { return ca("other-ca", "another CA") },
		func() error { return leaf("server", "ca", "localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1") },
		func() error { return leaf("elsewhere", "ca", "elsewhere", "subjectAltName=DNS:elsewhere.example") },
		func() error { return leaf("client", "ca", "worker-1", "extendedKeyUsage=clientAuth") },
		func() error { return leaf("other-client", "other-ca", "stranger", "extendedKeyUsage=clientAuth") },
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// startTLSServer runs `delayq serve` speaking TLS with the certificate `cert` (certs.path(cert +
// ".pem")), and args (--tls-ca-cert-file for mutual TLS).
func startTLSServer(t testing.TB, cert string, args ...string) *testServer {
	t.Helper()
	c := testCerts(t)
	return startServer(t, append([]string{"--tls-cert-file", c.path(cert + ".pem"),
		"--tls-key-file", c.path(cert + ".key")}, args...)...)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if certsDir != "" {
		os.RemoveAll(certsDir)
	}
	os.Exit(code)
}
