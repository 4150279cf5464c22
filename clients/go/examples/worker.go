// A worker that closes orders: the same program as examples/worker.py and worker.mjs.
//
//	DELAYQ_SERVER=127.0.0.1:7701 go run ./examples/worker.go      (from clients/go)
//
// It handles the topic $DELAYQ_TOPIC (default orders.close), four jobs at a time, and prints
// "done <id>" for each job whose finish the server accepted. On SIGTERM or SIGINT it stops
// taking jobs, lets running ones finish for up to 30 s, and exits 0.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	delayq "github.com/delayq/delayq/clients/go"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// Servers from $DELAYQ_SERVER (else 127.0.0.1:7701), token from $DELAYQ_AUTH_TOKEN, TLS
	// from $DELAYQ_TLS, $DELAYQ_CACERT, $DELAYQ_CERT and $DELAYQ_KEY.
	client, err := delayq.New(delayq.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	topic := os.Getenv("DELAYQ_TOPIC")
	if topic == "" {
		topic = "orders.close"
	}
	worker := delayq.NewWorker(client, delayq.WorkerOptions{
		Concurrency: 4,
		Drain:       30 * time.Second,
		// Called once the server has answered the job's outcome: "done" means the finish landed.
		OnAcknowledged: func(job *delayq.Delivery, kind delayq.AckKind, err error) {
			if kind == delayq.AckFinish && err == nil {
				fmt.Printf("done %s\n", job.ID)
			}
		},
	})
	worker.Handle(topic, func(ctx context.Context, job *delayq.Delivery) error {
		return nil // close the order here; return an error to retry it later
	})
	if err := worker.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
