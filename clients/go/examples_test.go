package delayq

// The README's first example and examples/worker.go, built and run as a user would: the README
// example in a scratch module of its own that points at this directory exactly as the README
// says (go mod edit -require ... -replace ...), offline.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const modulePath = "github.com/delayq/delayq/clients/go"

func goTool() string { return filepath.Join(runtime.GOROOT(), "bin", "go") }

// goEnv: offline, whatever the caller's environment says.
func goEnv(extra ...string) []string {
	env := append(serverEnv(), "GOPROXY=off", "GOFLAGS=-mod=mod")
	return append(env, extra...)
}

func runGo(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(goTool(), args...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
}

// program is a started example whose stdout lines a goroutine collects.
type program struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	stderr strings.Builder
	exited chan struct{}
}

func startProgram(t *testing.T, path string, env ...string) *program {
	t.Helper()
	p := &program{cmd: exec.Command(path), exited: make(chan struct{})}
	p.cmd.Env = append(serverEnv(), env...)
	p.cmd.SysProcAttr = diesWithUs()
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	check(t, err)
	check(t, p.cmd.Start())
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		io.Copy(io.Discard, out)
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
		p.cmd.Wait()
	})
	return p
}

func (p *program) output() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// stop sends sig and returns the exit code.
func (p *program) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(40 * time.Second):
		t.Fatal("the program did not exit after the signal")
	}
	p.cmd.Wait()
	return p.cmd.ProcessState.ExitCode()
}

func TestExampleWorkerPrintsDoneAndStopsOnSignals(t *testing.T) {
	t.Parallel()
	srv, c, ctx := startWithClient(t)
	bin := filepath.Join(t.TempDir(), "worker")
	runGo(t, ".", "build", "-o", bin, "./examples/worker.go")

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		topic := "example." + strings.ToLower(sig.String()[:4])
		want := map[string]bool{}
		for i := 0; i < 30; i++ {
			id := fmt.Sprintf("%s-%d", topic, i)
			must(c.Add(ctx, Job{Topic: topic, ID: id, Body: []byte(fmt.Sprintf(`{"order":%d}`, i))}))
			want["done "+id] = true
		}
		p := startProgram(t, bin, "DELAYQ_SERVER="+srv.addr, "DELAYQ_TOPIC="+topic)
		eventually(t, 20*time.Second, "a done line per job", func() bool { return len(p.output()) >= 30 })
		if code := p.stop(t, sig); code != 0 {
			t.Fatalf("exit code %d after %v; stderr:\n%s", code, sig, p.stderr.String())
		}
		lines := p.output()
		if len(lines) != 30 {
			t.Fatalf("%d lines on stdout, want 30: %q", len(lines), lines)
		}
		for _, line := range lines {
			if !want[line] {
				t.Fatalf("unexpected stdout line %q", line)
			}
			delete(want, line)
		}
	}
	if st := must(c.Stats(ctx)); st.Jobs != 0 || st.Finished != 60 {
		t.Fatalf("after the examples: %+v", st)
	}
}

// The README's first Go code block, in a module of its own, required and replaced as the
// README tells a user outside this repository.
func TestReadmeFirstExampleRunsAsWritten(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	check(t, err)
	block := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no ```go block")
	}
	// The commands the README gives, with this directory in place of the user's clone.
	here, err := filepath.Abs(".")
	check(t, err)
	steps := regexp.MustCompile("(?m)^go mod edit .*$").FindAll(readme, -1)
	if len(steps) != 1 || !strings.Contains(string(steps[0]), "-replace="+modulePath+"=") {
		t.Fatalf("README.md: want one `go mod edit -require ... -replace ...` line, got %q", steps)
	}
	edit := strings.Fields(string(steps[0]))
	for i, arg := range edit {
		if strings.HasPrefix(arg, "-replace="+modulePath+"=") {
			edit[i] = "-replace=" + modulePath + "=" + here
		}
	}
	dir := t.TempDir()
	runGo(t, dir, "mod", "init", "example.com/orders")
	runGo(t, dir, edit[1:]...)
	check(t, os.WriteFile(filepath.Join(dir, "main.go"), block[1], 0o644))
	bin := filepath.Join(dir, "orders")
	runGo(t, dir, "build", "-o", bin, ".")

	srv := startServer(t)
	p := startProgram(t, bin, "DELAYQ_SERVER="+srv.addr)
	eventually(t, 20*time.Second, "the order closed", func() bool {
		out := p.output()
		return len(out) > 0 && out[0] == `closed order {"order":42}`
	})
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderr.String())
	}
	c := newClient(t, Options{Servers: []string{srv.addr}})
	if st := must(c.Stats(context.Background())); st.Finished != 1 || st.Jobs != 0 {
		t.Fatalf("after the README example: %+v", st)
	}
}

// The benchmark builds and runs (briefly), printing its one JSON line.
func TestBenchmarkRunsAndPrintsOneJSONLine(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	bin := filepath.Join(t.TempDir(), "lifecycle")
	runGo(t, ".", "build", "-o", bin, "./bench/lifecycle.go")
	cmd := exec.Command(bin)
	cmd.Env = append(serverEnv(), "DELAYQ_SERVER="+srv.addr, "RUN_SECONDS=0.5", "WARMUP_SECONDS=0.2",
		"CONCURRENCY=8", "WINDOW=200")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lifecycle: %v\n%s", err, out)
	}
	var result struct {
		LifecyclesPerS float64 `json:"lifecycles_per_s"`
		Lifecycles     int64   `json:"lifecycles"`
		Seconds        float64 `json:"seconds"`
		Errors         int64   `json:"errors"`
	}
	if err := json.Unmarshal(out, &result); err != nil || result.Lifecycles == 0 || result.LifecyclesPerS == 0 ||
		result.Errors != 0 || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Fatalf("lifecycle printed %q (%v)", out, err)
	}
}
