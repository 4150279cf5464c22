// The Go worker's job lifecycle rate against a delayq server: the peer of
// bench/bullmq/lifecycle.js in the repository. Producers add 100-byte jobs due now, at most
// WINDOW outstanding (added, not yet finished), while a Worker with a no-op handler at
// concurrency CONCURRENCY finishes them; counted: lifecycles (finishes the server accepted)
// over RUN_SECONDS after WARMUP_SECONDS. One JSON line on stdout; exit 1 on errors.
//
//	DELAYQ_SERVER=127.0.0.1:7701 go run ./bench/lifecycle.go        (from clients/go)
//
// Environment (defaults): DELAYQ_SERVER (127.0.0.1:7701), DELAYQ_AUTH_TOKEN, CONCURRENCY (50),
// WINDOW (1000), RUN_SECONDS (5), WARMUP_SECONDS (2), PRODUCERS (2 goroutines, each with one
// AddMany of up to BATCH (50) jobs at a time, as BullMQ's addBulk), BODY (100 bytes), TOPIC
// (bench.lifecycle.<pid>).
// PRODUCER=0: the worker alone (another process feeds the topic: give both the same TOPIC).
// ROLE=producer: the producers alone, keeping at most WINDOW jobs in the topic (read from
// STATS topic every 2 ms), counting adds. CPUPROFILE=path: a CPU profile of the measured window.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

func envInt(name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		fail(fmt.Errorf("%s: not an integer: %q", name, v))
	}
	return n
}

func envFloat(name string, def float64) float64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		fail(fmt.Errorf("%s: not a number of seconds: %q", name, v))
	}
	return f
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "lifecycle.go:", err)
	os.Exit(1)
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func main() {
	concurrency := envInt("CONCURRENCY", 50)
	window := int64(envInt("WINDOW", 1000))
	producers := envInt("PRODUCERS", 2)
	batch := envInt("BATCH", 50)
	bodySize := envInt("BODY", 100)
	run := time.Duration(envFloat("RUN_SECONDS", 5) * float64(time.Second))
	warmup := time.Duration(envFloat("WARMUP_SECONDS", 2) * float64(time.Second))
	topic := os.Getenv("TOPIC")
	if topic == "" {
		topic = fmt.Sprintf("bench.lifecycle.%d", os.Getpid())
	}
	role := os.Getenv("ROLE")
	produce := os.Getenv("PRODUCER") != "0"
	work := role != "producer"

	client, err := delayq.New(delayq.Options{})
	if err != nil {
		fail(err)
	}
	defer client.Close()
	ctx := context.Background()
	if err := client.Ping(ctx); err != nil {
		fail(err)
	}

	var measuring atomic.Bool
	var outstanding, lifecycles, adds, errorsSeen atomic.Int64
	var firstError atomic.Value
	noteError := func(err error) {
		errorsSeen.Add(1)
		firstError.CompareAndSwap(nil, err.Error())
	}
	room := make(chan struct{}, 1) // a finish freed room in the window
	wake := func() {
		select {
		case room <- struct{}{}:
		default:
		}
	}

	// The worker.
	var worker *delayq.Worker
	workerCtx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan error, 1)
	if work {
		worker = delayq.NewWorker(client, delayq.WorkerOptions{Concurrency: concurrency,
			OnAcknowledged: func(job *delayq.Delivery, kind delayq.AckKind, err error) {
				if err != nil || kind != delayq.AckFinish {
					noteError(fmt.Errorf("ack of %s: %v %v", job.ID, kind, err))
					return
				}
				outstanding.Add(-1)
				if measuring.Load() {
					lifecycles.Add(1)
				}
				wake()
			}})
		worker.Handle(topic, func(context.Context, *delayq.Delivery) error { return nil })
		go func() { workerDone <- worker.Run(workerCtx) }()
	}

	// The producers. Alone (ROLE=producer), the window is the topic's jobs as STATS says.
	var stopping atomic.Bool
	var wg sync.WaitGroup
	if !work {
		go func() {
			for !stopping.Load() {
				if ts, err := client.TopicStats(ctx, topic); err == nil {
					outstanding.Store(int64(ts.Ready + ts.Reserved + ts.Delayed))
					wake()
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	body := make([]byte, bodySize)
	for i := range body {
		body[i] = 'x'
	}
	if produce {
		for p := 0; p < producers; p++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				jobs := make([]delayq.Job, 0, batch)
				for !stopping.Load() {
					// Room for up to BATCH jobs in the window: claim it, then add them.
					n := window - outstanding.Load()
					if n > int64(batch) {
						n = int64(batch)
					}
					if n <= 0 || outstanding.Add(n) > window {
						if n > 0 {
							outstanding.Add(-n)
						}
						select {
						case <-room:
						case <-time.After(5 * time.Millisecond):
						}
						continue
					}
					jobs = jobs[:0]
					for i := int64(0); i < n; i++ {
						jobs = append(jobs, delayq.Job{Topic: topic, Body: body})
					}
					_, errs := client.AddMany(ctx, jobs)
					for _, err := range errs {
						if err != nil {
							outstanding.Add(-1)
							noteError(err)
						} else if measuring.Load() {
							adds.Add(1)
						}
					}
				}
			}()
		}
	}

	time.Sleep(warmup)
	if path := os.Getenv("CPUPROFILE"); path != "" { // the measured window, for go tool pprof
		f, err := os.Create(path)
		if err != nil {
			fail(err)
		}
		pprof.StartCPUProfile(f)
		defer f.Close()
	}
	var s0 delayq.WorkerStats
	if worker != nil {
		s0 = worker.Stats()
	}
	cpu0 := cpuSeconds()
	t0 := time.Now()
	measuring.Store(true)
	time.Sleep(run)
	measuring.Store(false)
	pprof.StopCPUProfile()
	wall := time.Since(t0).Seconds()
	cpu := cpuSeconds() - cpu0
	var s1 delayq.WorkerStats
	if worker != nil {
		s1 = worker.Stats()
	}

	// Drain what is outstanding (the worker's side), then stop.
	stopping.Store(true)
	wg.Wait()
	left := int64(0)
	if work && produce {
		deadline := time.Now().Add(15 * time.Second)
		for outstanding.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		left = outstanding.Load()
	}
	stopWorker()
	if work {
		if err := <-workerDone; err != nil {
			noteError(err)
		}
	}

	n := lifecycles.Load()
	perLifecycle := func(x uint64) any {
		if n == 0 {
			return nil
		}
		return float64(int64(float64(x)/float64(n)*1000)) / 1000
	}
	first, _ := firstError.Load().(string)
	result := map[string]any{
		"lifecycles_per_s":          int64(float64(n) / wall),
		"lifecycles":                n,
		"seconds":                   float64(int64(wall*100)) / 100,
		"adds_per_s":                int64(float64(adds.Load()) / wall),
		"adds":                      adds.Load(),
		"reserves_per_lifecycle":    perLifecycle(s1.Reserves - s0.Reserves),
		"ack_batches_per_lifecycle": perLifecycle(s1.AckBatches - s0.AckBatches),
		"cpu_s":                     float64(int64(cpu*100)) / 100,
		"cpu_util":                  float64(int64(cpu/wall*100)) / 100,
		"errors":                    errorsSeen.Load(),
		"first_error":               first,
		"left_outstanding":          left,
		"concurrency":               concurrency,
		"window":                    window,
		"producers":                 producers,
		"batch":                     batch,
		"producer":                  produce,
		"role":                      map[bool]string{true: "worker", false: "producer"}[work],
		"body":                      bodySize,
		"warmup_s":                  warmup.Seconds(),
		"run_s":                     run.Seconds(),
		"servers":                   client.Servers(),
		"topic":                     topic,
		"go":                        runtime.Version(),
		"gomaxprocs":                runtime.GOMAXPROCS(0),
	}
	out, _ := json.Marshal(result)
	fmt.Println(string(out))
	if errorsSeen.Load() > 0 || left > 0 {
		os.Exit(1)
	}
}
