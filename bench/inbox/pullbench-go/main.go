// Pull-claim throughput of the Go pull client (clients/go), the counterpart of pullbench (Rust):
// WORKERS InboxWorkers on one source in one process, one *sql.DB (pgx stdlib), a no-op handler,
// run until EXPECT rows were handled (or TIMEOUT seconds).
//
// Prints the lines of pullbench: `handled=N rate=R first_ms=F wall_ms=W processed=P left=L
// timed_out=B`, rate = (N-1) / (time of the N-th handler call - time of the 1st), then `cpu
// worker_cpu_ms=.. pg_cpu_ms=.. worker_us_per_row=.. pg_us_per_row=..`.
//
//	qb-inbox-pullbench-go -url URL -source S -expect N [-workers 4] [-batch 10] [-concurrency 1] [-timeout 120]
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
	_ "github.com/jackc/pgx/v5/stdlib"
)

func main() {
	url := flag.String("url", "postgres://queuebox:queuebox@127.0.0.1:5432/queuebox", "database URL")
	source := flag.String("source", "bench", "pull source")
	expect := flag.Int64("expect", 50000, "rows to handle")
	workers := flag.Int("workers", 4, "workers")
	batch := flag.Int("batch", 10, "BatchSize")
	concurrency := flag.Int("concurrency", 1, "MaxConcurrency")
	timeout := flag.Int("timeout", 120, "seconds")
	flag.Parse()

	db, err := sql.Open("pgx", *url)
	if err != nil {
		log.Fatal(err)
	}
	// Each worker: one claim connection, one per running handler, and renewals.
	size := *workers*(*concurrency+1) + 2
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(size)
	db.SetConnMaxIdleTime(0)

	started := time.Now()
	var handled, firstNS, lastNS atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < *workers; i++ {
		worker, err := queuebox.NewInboxWorker(db, queuebox.Options{
			Source: *source, BatchSize: *batch, MaxConcurrency: *concurrency,
			PollInterval: 100 * time.Millisecond, ShutdownGrace: 10 * time.Second,
		})
		if err != nil {
			log.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := worker.Run(ctx, func(context.Context, queuebox.Message, *sql.Tx) error {
				n := handled.Add(1)
				now := time.Since(started).Nanoseconds()
				if n == 1 {
					firstNS.Store(now)
				}
				if n == *expect {
					lastNS.Store(now)
					stop()
				}
				return nil
			})
			if err != nil {
				log.Fatal(err)
			}
		}()
	}
	timedOut := false
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(*timeout) * time.Second):
		timedOut = true
	}
	cutNS, handledAtCut := time.Since(started).Nanoseconds(), handled.Load()
	stop()
	wg.Wait()
	wall := time.Since(started)

	n := handled.Load()
	last, counted := lastNS.Load(), *expect
	if timedOut {
		last, counted = cutNS, handledAtCut
	}
	span := float64(last-firstNS.Load()) / 1e9
	rate := 0.0
	if span > 0 {
		rate = float64(counted-1) / span
	}
	workerTicks := cpuTicks("self")
	var pgTicks int64
	rows, err := db.Query("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
	if err != nil {
		log.Fatal(err)
	}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			log.Fatal(err)
		}
		pgTicks += cpuTicks(strconv.Itoa(pid))
	}
	_ = rows.Close()
	var processed, left int64
	if err := db.QueryRow(`SELECT count(*) FILTER (WHERE state = 'processed'), count(*) FILTER (WHERE state <> 'processed')
		FROM inbox WHERE source = $1`, *source).Scan(&processed, &left); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("handled=%d rate=%.0f first_ms=%d wall_ms=%d processed=%d left=%d timed_out=%t\n",
		n, rate, firstNS.Load()/1e6, wall.Milliseconds(), processed, left, timedOut)
	perRow := func(ms int64) float64 {
		if n == 0 {
			return 0
		}
		return float64(ms) * 1000 / float64(n)
	}
	// Linux reports 100 ticks a second (USER_HZ).
	wms, pms := workerTicks*10, pgTicks*10
	fmt.Printf("cpu worker_cpu_ms=%d pg_cpu_ms=%d worker_us_per_row=%.0f pg_us_per_row=%.0f\n", wms, pms, perRow(wms), perRow(pms))
}

// cpuTicks is the user + system CPU ticks of a process (`self` or a pid), 0 when unreadable.
func cpuTicks(pid string) int64 {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	text := string(stat)
	rest := text[strings.LastIndexByte(text, ')')+1:]
	fields := strings.Fields(rest)
	if len(fields) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(fields[11], 10, 64)
	s, _ := strconv.ParseInt(fields[12], 10, 64)
	return u + s
}
