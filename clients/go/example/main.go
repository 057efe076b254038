// A complete pull worker: it takes the rows of the "orders" pull source, writes each order into
// the application's own orders table and completes the inbox row in the same transaction.
//
//	DATABASE_URL=postgres://queuebox:queuebox@127.0.0.1:5432/queuebox go run ./example
//
// Ctrl+C stops it: claims end at once, running handlers get the shutdown grace.
package main

import (
	"context"
	"database/sql"
	"log"
	"os"
	"os/signal"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
	_ "github.com/jackc/pgx/v5/stdlib" // the application registers the driver, not the library
)

// stdLogger prints the library's log lines (already redacted) with the standard logger.
type stdLogger struct{}

func (stdLogger) Info(m string, f map[string]any)  { log.Println("INFO", m, f) }
func (stdLogger) Warn(m string, f map[string]any)  { log.Println("WARN", m, f) }
func (stdLogger) Error(m string, f map[string]any) { log.Println("ERROR", m, f) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Getenv("DATABASE_URL")); err != nil {
		log.Fatal(err)
	}
}

// run stores the orders of the "orders" pull source until ctx is cancelled.
func run(ctx context.Context, databaseURL string) error {
	db, err := sql.Open("pgx", databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	// The business table of this example; a real application has its own.
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, total INT NOT NULL)`); err != nil {
		return err
	}

	worker, err := queuebox.NewInboxWorker(db, queuebox.Options{
		Source:        "orders",
		BatchSize:     10,
		LeaseMS:       30_000,
		PollInterval:  200 * time.Millisecond,
		ShutdownGrace: 10 * time.Second,
		Logger:        stdLogger{},
	})
	if err != nil {
		return err
	}

	return worker.Run(ctx, func(ctx context.Context, message queuebox.Message, tx *sql.Tx) error {
		var order struct {
			ID    string `json:"id"`
			Total int    `json:"total"`
		}
		if err := message.UnmarshalPayload(&order); err != nil {
			return err // retried, then dead-lettered, by the retry policy
		}
		// Through tx only: the worker commits this insert with the completion of the row.
		_, err := tx.ExecContext(ctx,
			`INSERT INTO orders (id, total) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, order.ID, order.Total)
		if err == nil {
			log.Printf("order %s stored (inbox row %s, attempt %d)", order.ID, message.ID, message.Attempt)
		}
		return err
	})
}
