package queuebox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Handler does the work for one message. Write every change through tx; never commit or roll
// it back (the worker owns both); fail the message by returning an error. ctx is cancelled when
// the lease is lost and when a stop runs out of grace: return promptly when it is done (the
// transaction, opened with ctx, is rolled back by database/sql at that moment anyway).
type Handler func(ctx context.Context, message Message, tx *sql.Tx) error

// InboxWorker claims and handles the rows of one pull source. Build it with NewInboxWorker.
type InboxWorker struct {
	db      *sql.DB
	options Options
	logger  Logger
	table   string
	columns string
	stmts   statements
}

// NewInboxWorker checks the options, renders the contract statements for the schema and returns
// the worker. It does not touch the database: the application registers the driver (for example
// github.com/jackc/pgx/v5/stdlib) and opens db.
func NewInboxWorker(db *sql.DB, options Options) (*InboxWorker, error) {
	if db == nil {
		return nil, errors.New("queuebox: NewInboxWorker needs a *sql.DB")
	}
	o, err := options.withDefaults()
	if err != nil {
		return nil, err
	}
	names, table, err := o.Schema.quoted()
	if err != nil {
		return nil, err
	}
	stmts, err := renderContract(names)
	if err != nil {
		return nil, err
	}
	return &InboxWorker{db: db, options: o, logger: o.Logger, table: table, columns: o.Schema.columnList(), stmts: stmts}, nil
}

// claimed is a row with the token that only the worker sees.
type claimed struct {
	message Message
	token   string
}

// errLeaseLost is the cancellation cause of a handler whose renewal changed no row or failed.
var errLeaseLost = errors.New("queuebox: the lease was lost (another worker owns the row, or the renewal failed)")

// errShutdown is the cancellation cause of a handler still running when the grace ran out.
var errShutdown = errors.New("queuebox: the shutdown grace ran out")

// Run claims and handles rows until ctx is cancelled, then stops claiming at once, hands back
// the claimed rows that no handler started (pending again, same attempt), waits up to
// ShutdownGrace for running handlers, cancels those still running (nothing is written for them:
// their rows keep their attempt and return when the lease runs out) and returns once every
// handler has returned.
//
// Each claim asks for a whole BatchSize. Rows beyond the free handler slots wait in the worker,
// under their own renewed lease, for a slot; the next claim runs once the rows held (waiting or
// running) are down to MaxConcurrency. The claim never returns a row of an aggregate that has a
// row in flight, so a waiting row never overtakes or runs beside another row of its aggregate.
//
// Before the first claim it checks that the table has every column the library reads (the V10
// schema or later); a missing column is the error Run returns. Later database errors are logged
// and retried after PollInterval.
func (w *InboxWorker) Run(ctx context.Context, handler Handler) error {
	if handler == nil {
		return errors.New("queuebox: Run needs a handler")
	}
	if err := w.checkSchema(ctx); err != nil {
		if ctx.Err() != nil {
			// Stopped before the first claim: nothing was claimed, nothing to drain.
			return nil
		}
		return err
	}
	batch := w.options.BatchSize
	// Rows this worker holds, waiting for a slot or running.
	held := make(chan struct{}, w.options.MaxConcurrency+batch)
	slots := make(chan struct{}, w.options.MaxConcurrency)
	stopping := make(chan struct{})
	base, cancelHandlers := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelHandlers(nil)
	var rows sync.WaitGroup
	// The turn of the last claimed row: closed once it has taken a slot or left.
	queue := make(chan struct{})
	close(queue)
	release := func(n int) {
		for i := 0; i < n; i++ {
			<-held
		}
	}

claims:
	for {
		// Room for a whole batch: smaller claims would pay a claim for a few rows.
		for room := 0; room < batch; room++ {
			select {
			case <-ctx.Done():
				release(room)
				break claims
			case held <- struct{}{}:
			}
		}
		got, err := w.claim(ctx, batch)
		if err != nil && ctx.Err() == nil {
			w.log(levelWarn, "inbox claim failed; waiting before the next claim", map[string]any{"error": err})
		}
		release(batch - len(got))
		for _, row := range got {
			rows.Add(1)
			// Rows take the handler slots in claim order (oldest first): each waits for its
			// predecessor to have taken a slot, or to have left, before it asks for one.
			turn := make(chan struct{})
			go func(row claimed, prev <-chan struct{}) {
				defer rows.Done()
				defer func() { <-held }()
				w.process(base, handler, row, slots, stopping, prev, turn)
			}(row, queue)
			queue = turn
		}
		if len(got) == 0 {
			select {
			case <-ctx.Done():
				break claims
			case <-time.After(w.options.PollInterval):
			}
		}
	}

	// Waiting rows see this and hand their row back.
	close(stopping)
	done := make(chan struct{})
	go func() {
		rows.Wait()
		close(done)
	}()
	grace := time.NewTimer(w.options.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		w.log(levelWarn, "shutdown grace ran out; cancelling running handlers, their rows return after the lease", nil)
		cancelHandlers(errShutdown)
		<-done
	}
	return nil
}

// checkSchema reads no row but names every column the worker uses.
func (w *InboxWorker) checkSchema(ctx context.Context) error {
	rows, err := w.db.QueryContext(ctx, "SELECT "+w.columns+" FROM "+w.table+" WHERE false")
	if err != nil {
		return fmt.Errorf("queuebox: the inbox table %s lacks what this library needs (the V10 schema or later, which adds the headers column, and the mapped names of Options.Schema): %s", w.table, SanitizeError(err))
	}
	return rows.Close()
}

// claim runs the claim alone in its own transaction and commits it before any handler starts.
func (w *InboxWorker) claim(ctx context.Context, want int) (rows []claimed, err error) {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	// A claim lost in a crash only hands its rows back, and every later commit that depends on
	// it waits for the WAL up to its own record: the claim need not wait for its flush. A generic
	// plan spares planning the claim on every call. Both settings end with the transaction.
	if _, err = tx.ExecContext(ctx, "SELECT set_config('synchronous_commit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)"); err != nil {
		return nil, err
	}
	result, err := tx.QueryContext(ctx, w.stmts.claim.text, w.stmts.claim.args(map[string]any{
		"source":     w.options.Source,
		"batch":      want,
		"lease_ms":   int64(w.options.LeaseMS),
		"cand_limit": candLimit(w.options.BatchSize),
	})...)
	if err != nil {
		return nil, err
	}
	for result.Next() {
		var (
			c        claimed
			payload  []byte
			headers  []byte
			attempt  int64
			aggr     sql.NullString
			event    sql.NullString
			corr     sql.NullString
			idText   string
			tokenTxt string
		)
		// The contract's RETURNING order: id, claim_token, source, idempotency_key, aggregate_id,
		// event_type, payload, headers, attempt, correlation_id, created_at.
		if err = result.Scan(&idText, &tokenTxt, &c.message.Source, &c.message.IdempotencyKey, &aggr, &event,
			&payload, &headers, &attempt, &corr, &c.message.CreatedAt); err != nil {
			_ = result.Close()
			return nil, err
		}
		c.message.ID, c.token = idText, tokenTxt
		c.message.AggregateID, c.message.EventType, c.message.CorrelationID = optional(aggr), optional(event), optional(corr)
		c.message.Payload = append([]byte(nil), payload...)
		c.message.Headers = headersFromJSON(headers)
		c.message.Attempt = int(attempt)
		rows = append(rows, c)
	}
	if err = result.Err(); err != nil {
		return nil, err
	}
	if err = tx.Commit(); err != nil {
		return nil, err
	}
	// RETURNING comes in no particular order; the oldest rows start first.
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i].message, rows[j].message
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.Before(b.CreatedAt)
		}
		return a.ID < b.ID
	})
	return rows, nil
}

func optional(v sql.NullString) *string {
	if !v.Valid {
		return nil
	}
	s := v.String
	return &s
}

// keepLease renews every third of the lease until stop is closed; a renewal that changes no row
// or fails cancels the handler.
func (w *InboxWorker) keepLease(stop <-chan struct{}, row claimed, cancel context.CancelCauseFunc) {
	lease := time.Duration(w.options.LeaseMS) * time.Millisecond
	ticker := time.NewTicker(lease / 3)
	defer ticker.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ticker.C:
		}
		ctx, done := context.WithTimeout(context.Background(), lease)
		result, err := w.db.ExecContext(ctx, w.stmts.renew.text, w.stmts.renew.args(map[string]any{
			"id": row.message.ID, "token": row.token, "lease_ms": int64(w.options.LeaseMS),
		})...)
		done()
		var n int64
		if err == nil {
			n, err = result.RowsAffected()
		}
		if err != nil || n != 1 {
			reason := "the renewal found no row: another worker owns it"
			if err != nil {
				reason = "the renewal failed: " + SanitizeError(err)
			}
			w.log(levelWarn, "inbox lease lost; cancelling the handler, its writes roll back", map[string]any{"id": row.message.ID, "reason": reason})
			cancel(errLeaseLost)
			return
		}
	}
}

// process runs the handler for one claimed row under a renewed lease, then completes the row in
// the handler's transaction, or records the failure.
func (w *InboxWorker) process(base context.Context, handler Handler, row claimed, slots chan struct{}, stopping, prev <-chan struct{}, turn chan struct{}) {
	ctx, cancel := context.WithCancelCause(base)
	defer cancel(nil)
	// One renewal schedule from the claim to the end, across the wait and the handler.
	stopRenewal := make(chan struct{})
	renewalDone := make(chan struct{})
	go func() {
		defer close(renewalDone)
		w.keepLease(stopRenewal, row, cancel)
	}()
	endRenewal := func() {
		close(stopRenewal)
		<-renewalDone
	}

	// Wait for the predecessor's turn, then for a handler slot; a stop meanwhile hands the row
	// back, a lost lease leaves it to its new owner.
	var passed sync.Once
	pass := func() { passed.Do(func() { close(turn) }) }
	defer pass()
	for _, wait := range []string{"turn", "slot"} {
		var slot chan struct{}
		var predecessor <-chan struct{}
		if wait == "turn" {
			predecessor = prev
		} else {
			slot = slots
		}
		select {
		case <-stopping:
			endRenewal()
			w.release(row)
			return
		case <-ctx.Done():
			endRenewal()
			w.log(levelWarn, "inbox lease lost before the handler started; the row is left to its new owner", map[string]any{"id": row.message.ID})
			return
		case <-predecessor:
		case slot <- struct{}{}:
		}
	}
	pass()
	defer func() { <-slots }()
	select {
	case <-stopping:
		endRenewal()
		w.release(row)
		return
	default:
	}

	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		endRenewal()
		w.log(levelWarn, "could not open the handler transaction; the row returns after its lease", map[string]any{"id": row.message.ID, "error": err})
		return
	}
	failure := callHandler(ctx, handler, row.message, tx)
	endRenewal()

	if ctx.Err() != nil {
		_ = tx.Rollback()
		w.log(levelWarn, "inbox handler cancelled; its writes rolled back and nothing written for the row", map[string]any{"id": row.message.ID, "reason": context.Cause(ctx).Error()})
		return
	}
	if failure != nil {
		_ = tx.Rollback()
		w.fail(row, failure)
		return
	}
	w.complete(ctx, row, tx)
}

// release hands a row that never reached a handler back to the claims: pending again, same
// attempt, fenced on the token. When it fails the row still returns, after its lease.
func (w *InboxWorker) release(row claimed) {
	ctx, done := context.WithTimeout(context.Background(), 30*time.Second)
	defer done()
	if _, err := w.db.ExecContext(ctx, w.stmts.release.text, w.stmts.release.args(map[string]any{
		"id": row.message.ID, "token": row.token,
	})...); err != nil {
		w.log(levelWarn, "could not hand an unstarted row back; it returns after its lease", map[string]any{"id": row.message.ID, "error": err})
	}
}

// callHandler turns a panic into an error, so the row is failed like any other failure.
func callHandler(ctx context.Context, handler Handler, message Message, tx *sql.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("queuebox: the handler panicked: %v", p)
		}
	}()
	return handler(ctx, message, tx)
}

// complete runs the completion in the handler's transaction: one row changed commits the
// business writes with it; none means the claim was lost, and everything rolls back.
func (w *InboxWorker) complete(ctx context.Context, row claimed, tx *sql.Tx) {
	result, err := tx.ExecContext(ctx, w.stmts.complete.text, w.stmts.complete.args(map[string]any{
		"id": row.message.ID, "token": row.token,
	})...)
	var n int64
	if err == nil {
		n, err = result.RowsAffected()
	}
	switch {
	case err != nil:
		_ = tx.Rollback()
		w.log(levelWarn, "completion failed; handler writes rolled back, the row returns after its lease", map[string]any{"id": row.message.ID, "error": err})
	case n != 1:
		_ = tx.Rollback()
		w.log(levelWarn, "completion found no row: claim lost, handler writes rolled back", map[string]any{"id": row.message.ID})
	default:
		if err := tx.Commit(); err != nil {
			w.log(levelWarn, "commit of the handler transaction failed; the row returns after its lease", map[string]any{"id": row.message.ID, "error": err})
		}
	}
}

// fail writes the retry or the dead letter the policy chose, fenced on the token.
func (w *InboxWorker) fail(row claimed, failure error) {
	text := SanitizeError(failure)
	action := w.options.RetryPolicy.Decide(row.message, failure)
	values := map[string]any{"id": row.message.ID, "token": row.token, "error": text}
	stmt, verdict := w.stmts.dead, "dead letter"
	if !action.IsDeadLetter() {
		stmt, verdict = w.stmts.retry, "retry"
		values["delay_ms"] = action.Delay().Milliseconds()
	}
	ctx, done := context.WithTimeout(context.Background(), 30*time.Second)
	defer done()
	result, err := w.db.ExecContext(ctx, stmt.text, stmt.args(values)...)
	var n int64
	if err == nil {
		n, err = result.RowsAffected()
	}
	fields := map[string]any{"id": row.message.ID, "attempt": row.message.Attempt, "action": verdict, "error": text}
	if row.message.CorrelationID != nil {
		fields["correlation_id"] = *row.message.CorrelationID
	}
	switch {
	case err != nil:
		fields["database_error"] = SanitizeError(err)
		w.log(levelError, "recording the handler failure failed; the row returns after its lease", fields)
	case n != 1:
		w.log(levelWarn, "claim lost before the failure could be recorded; the new owner has the row", fields)
	default:
		w.log(levelWarn, "inbox handler failed", fields)
	}
}
