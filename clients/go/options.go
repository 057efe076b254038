package queuebox

import (
	"fmt"
	"strings"
	"time"
)

// Dialect is the database dialect of a worker.
type Dialect string

const (
	// DialectPostgreSQL is the only dialect this build runs.
	DialectPostgreSQL Dialect = "postgresql"
	// DialectSQLServer is documented for QueueBox's SQL Server store. This build refuses it:
	// no SQL Server is available where the library is tested, and code nobody ran is not shipped.
	DialectSQLServer Dialect = "sqlserver"
)

// Options are the settings of an InboxWorker. A zero field takes its default.
type Options struct {
	// Source is the consumption: pull source whose rows this worker takes. Required.
	Source string
	// BatchSize is the most rows one claim takes (default 10). Rows beyond the free handler
	// slots wait in the worker, under their renewed lease, for a slot.
	BatchSize int
	// LeaseMS is how long a claim is valid without renewal, in milliseconds (default 30000,
	// at least 100). The lease is renewed every third of it while the row is held.
	LeaseMS int
	// MaxConcurrency is the most handlers running at once (default 1).
	MaxConcurrency int
	// PollInterval is the wait after a claim that found nothing or failed (default 1 second).
	PollInterval time.Duration
	// ShutdownGrace is how long a stop waits for running handlers before cancelling their
	// context (default 30 seconds).
	ShutdownGrace time.Duration
	// Dialect must be DialectPostgreSQL (the default).
	Dialect Dialect
	// Schema maps the table and column names; nil uses DefaultSchema().
	Schema *Schema
	// RetryPolicy decides what a failed row becomes (default NewDefaultRetryPolicy(5,
	// time.Second, 5*time.Minute, 0.2)).
	RetryPolicy RetryPolicy
	// Logger receives the library's log lines; nil prints nothing.
	Logger Logger
}

// withDefaults fills in the defaults and refuses what cannot work.
func (o Options) withDefaults() (Options, error) {
	fail := func(format string, args ...any) (Options, error) {
		return o, fmt.Errorf("queuebox: invalid option: "+format, args...)
	}
	if strings.TrimSpace(o.Source) == "" {
		return fail("Source is required")
	}
	if len(o.Source) > 255 {
		return fail("Source is longer than the 255 characters of the source column")
	}
	if o.BatchSize == 0 {
		o.BatchSize = 10
	}
	if o.BatchSize < 1 || o.BatchSize > 1000 {
		return fail("BatchSize must be between 1 and 1000, got %d", o.BatchSize)
	}
	if o.LeaseMS == 0 {
		o.LeaseMS = 30_000
	}
	// Below this a renewal every third of the lease races its own round trip.
	if o.LeaseMS < 100 {
		return fail("LeaseMS must be at least 100 ms, got %d", o.LeaseMS)
	}
	if o.LeaseMS > 24*3600*1000 {
		return fail("LeaseMS must be at most 24 hours, got %d", o.LeaseMS)
	}
	if o.MaxConcurrency == 0 {
		o.MaxConcurrency = 1
	}
	if o.MaxConcurrency < 0 {
		return fail("MaxConcurrency must be at least 1, got %d", o.MaxConcurrency)
	}
	if o.PollInterval == 0 {
		o.PollInterval = time.Second
	}
	if o.PollInterval < 0 {
		return fail("PollInterval must be above zero, got %s", o.PollInterval)
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = 30 * time.Second
	}
	if o.ShutdownGrace < 0 {
		return fail("ShutdownGrace must not be negative, got %s", o.ShutdownGrace)
	}
	switch o.Dialect {
	case "", DialectPostgreSQL:
		o.Dialect = DialectPostgreSQL
	case DialectSQLServer:
		return fail("Dialect %q is not supported by this build of the library (PostgreSQL only; see the README)", o.Dialect)
	default:
		return fail("Dialect %q is unknown; use DialectPostgreSQL", o.Dialect)
	}
	if o.Schema == nil {
		schema := DefaultSchema()
		o.Schema = &schema
	}
	if o.RetryPolicy == nil {
		o.RetryPolicy = NewDefaultRetryPolicy(5, time.Second, 5*time.Minute, 0.2)
	}
	return o, nil
}

// candLimit is the contract's candidate bound: three claims' worth, at least 50, at most 500.
func candLimit(batch int) int {
	return min(max(3*batch, 50), 500)
}
