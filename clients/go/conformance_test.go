package queuebox_test

// The conformance runner: every scenario of clients/conformance/scenarios.json against a fresh
// PostgreSQL database (QB_TEST_PG_URL), through this library's public API only.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
	_ "github.com/jackc/pgx/v5/stdlib"
)

const runnerName = "go"

type step struct {
	Do                  string `json:"do"`
	SQL                 string `json:"sql"`
	Record              string `json:"record"`
	Event               string `json:"event"`
	Error               string `json:"error"`
	Repeat              int    `json:"repeat"`
	ForMS               int    `json:"for_ms"`
	TimeoutMS           int    `json:"timeout_ms"`
	ExpectErrorContains string `json:"expect_error_contains"`
}

type retrySpec struct {
	MaxAttempts int     `json:"max_attempts"`
	BaseDelayMS int     `json:"base_delay_ms"`
	MaxDelayMS  int     `json:"max_delay_ms"`
	Jitter      float64 `json:"jitter"`
}

type workerSpec struct {
	BatchSize       *int              `json:"batch_size"`
	LeaseMS         *int              `json:"lease_ms"`
	MaxConcurrency  *int              `json:"max_concurrency"`
	PollIntervalMS  *int              `json:"poll_interval_ms"`
	ShutdownGraceMS *int              `json:"shutdown_grace_ms"`
	Retry           *retrySpec        `json:"retry"`
	Schema          map[string]string `json:"schema"`
}

type rowSpec struct {
	Key       string  `json:"key"`
	Aggregate *string `json:"aggregate"`
	AgeMS     *int    `json:"age_ms"`
}

type sqlCheck struct {
	SQL         string   `json:"sql"`
	Equals      *string  `json:"equals"`
	Contains    []string `json:"contains"`
	NotContains []string `json:"not_contains"`
}

type expectation struct {
	Events             []string       `json:"events"`
	EventsAbsent       []string       `json:"events_absent"`
	EventsAbsentPrefix []string       `json:"events_absent_prefix"`
	EventCounts        map[string]int `json:"event_counts"`
	EachKeyStarted     *int           `json:"each_key_started"`
	Order              []string       `json:"order"`
	Numbers            []struct {
		Event   string  `json:"event"`
		AtLeast float64 `json:"at_least"`
	} `json:"numbers"`
	SQL  []sqlCheck `json:"sql"`
	Logs *struct {
		NotEmpty    bool     `json:"not_empty"`
		NotContains []string `json:"not_contains"`
	} `json:"logs"`
}

type scenario struct {
	ID        string            `json:"id"`
	Kind      string            `json:"kind"`
	Skip      map[string]string `json:"skip"`
	SQLBefore []string          `json:"sql_before"`
	Rows      []rowSpec         `json:"rows"`
	Generate  *struct {
		Count      int    `json:"count"`
		KeyPrefix  string `json:"key_prefix"`
		Aggregates int    `json:"aggregates"`
	} `json:"generate"`
	SQLAfterRows []string          `json:"sql_after_rows"`
	Worker       workerSpec        `json:"worker"`
	Workers      int               `json:"workers"`
	Handlers     map[string][]step `json:"handlers"`
	Run          []step            `json:"run"`
	Expect       expectation       `json:"expect"`
	Samples      int               `json:"samples"`
	Policies     []struct {
		Policy json.RawMessage `json:"policy"`
		Cases  []struct {
			Attempt int     `json:"attempt"`
			MinMS   float64 `json:"min_ms"`
			MaxMS   float64 `json:"max_ms"`
			Dead    bool    `json:"dead"`
		} `json:"cases"`
	} `json:"policies"`
	Cases []struct {
		Input  string `json:"input"`
		Output string `json:"output"`
	} `json:"cases"`
	Cuts []struct {
		Repeat       string `json:"repeat"`
		Times        int    `json:"times"`
		MaxBytes     int    `json:"max_bytes"`
		OutputRepeat string `json:"output_repeat"`
		OutputTimes  int    `json:"output_times"`
	} `json:"cuts"`
}

type suite struct {
	Defaults struct {
		Source    string     `json:"source"`
		Worker    workerSpec `json:"worker"`
		TimeoutMS int        `json:"timeout_ms"`
	} `json:"defaults"`
	Scenarios []scenario `json:"scenarios"`
}

func repoPath(parts ...string) string {
	return filepath.Join(append([]string{"..", ".."}, parts...)...)
}

func loadSuite(t *testing.T) suite {
	raw, err := os.ReadFile(repoPath("clients", "conformance", "scenarios.json"))
	if err != nil {
		t.Fatalf("reading the scenarios: %v", err)
	}
	var s suite
	decoder := json.NewDecoder(strings.NewReader(string(raw)))
	if err := decoder.Decode(&s); err != nil {
		t.Fatalf("parsing the scenarios: %v", err)
	}
	if len(s.Scenarios) == 0 {
		t.Fatal("no scenarios")
	}
	return s
}

func TestConformance(t *testing.T) {
	s := loadSuite(t)
	for _, sc := range s.Scenarios {
		t.Run(sc.ID, func(t *testing.T) {
			if reason, ok := sc.Skip[runnerName]; ok {
				if strings.TrimSpace(reason) == "" {
					t.Fatal("a skip must give its reason")
				}
				t.Skip("skipped by the scenario data: " + reason)
			}
			switch sc.Kind {
			case "retry_policy":
				runPolicyScenario(t, sc)
			case "sanitize":
				runSanitizeScenario(t, sc)
			case "":
				runWorkerScenario(t, s, sc)
			default:
				t.Fatalf("unknown scenario kind %q", sc.Kind)
			}
		})
	}
}

func runPolicyScenario(t *testing.T, sc scenario) {
	for _, p := range sc.Policies {
		var policy queuebox.RetryPolicy
		var named string
		if json.Unmarshal(p.Policy, &named) == nil && named == "default" {
			// The library's default comes from Options; the documented values are these.
			policy = queuebox.NewDefaultRetryPolicy(5, time.Second, 5*time.Minute, 0.2)
		} else {
			var r retrySpec
			if err := json.Unmarshal(p.Policy, &r); err != nil {
				t.Fatalf("policy %s: %v", p.Policy, err)
			}
			policy = retryPolicy(r)
		}
		for _, c := range p.Cases {
			seen := map[time.Duration]bool{}
			for i := 0; i < sc.Samples; i++ {
				action := policy.Decide(queuebox.Message{Attempt: c.Attempt}, errors.New("boom"))
				if c.Dead {
					if !action.IsDeadLetter() {
						t.Fatalf("policy %s attempt %d: want a dead letter, got a retry after %s", p.Policy, c.Attempt, action.Delay())
					}
					continue
				}
				if action.IsDeadLetter() {
					t.Fatalf("policy %s attempt %d: want a retry, got a dead letter", p.Policy, c.Attempt)
				}
				ms := float64(action.Delay()) / float64(time.Millisecond)
				if ms < c.MinMS-1 || ms > c.MaxMS+1 {
					t.Fatalf("policy %s attempt %d: delay %.3f ms outside [%v, %v]", p.Policy, c.Attempt, ms, c.MinMS, c.MaxMS)
				}
				seen[action.Delay()] = true
			}
			if !c.Dead && c.MaxMS > c.MinMS && len(seen) < 2 {
				t.Fatalf("policy %s attempt %d: %d samples gave one delay; the jitter does not spread", p.Policy, c.Attempt, sc.Samples)
			}
		}
	}
}

func runSanitizeScenario(t *testing.T, sc scenario) {
	if len(sc.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range sc.Cases {
		if got := queuebox.Sanitize(c.Input); got != c.Output {
			t.Errorf("Sanitize(%q)\n got %q\nwant %q", c.Input, got, c.Output)
		}
	}
	for _, c := range sc.Cuts {
		got := queuebox.Sanitize(strings.Repeat(c.Repeat, c.Times))
		want := strings.Repeat(c.OutputRepeat, c.OutputTimes)
		if got != want || len(got) > c.MaxBytes {
			t.Errorf("cut of %d x %q: got %d bytes, want %d bytes (max %d)", c.Times, c.Repeat, len(got), len(want), c.MaxBytes)
		}
	}
	if got := queuebox.SanitizeError(errors.New(sc.Cases[0].Input)); got != sc.Cases[0].Output {
		t.Errorf("SanitizeError gives %q", got)
	}
}

func retryPolicy(r retrySpec) queuebox.RetryPolicy {
	return queuebox.NewDefaultRetryPolicy(r.MaxAttempts, time.Duration(r.BaseDelayMS)*time.Millisecond,
		time.Duration(r.MaxDelayMS)*time.Millisecond, r.Jitter)
}

// ---- the database ----

type testDB struct {
	db    *sql.DB
	admin *sql.DB
	name  string
}

func newTestDB(t *testing.T) *testDB {
	raw := os.Getenv("QB_TEST_PG_URL")
	if raw == "" {
		t.Fatal("QB_TEST_PG_URL is not set: start PostgreSQL and export it with `eval \"$(bash scripts/services.sh)\"` from the repository root")
	}
	admin, err := sql.Open("pgx", raw)
	if err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix)
	name := "qb_conf_go_" + hex.EncodeToString(suffix)
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("CREATE DATABASE: %v", err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	tdb := &testDB{db: db, admin: admin, name: name}
	t.Cleanup(func() {
		_ = db.Close()
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
		_ = admin.Close()
	})
	files, err := filepath.Glob(repoPath("migrations", "postgres", "V*__*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations found: %v", err)
	}
	version := func(f string) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(filepath.Base(f), "__", 2)[0], "V"))
		return n
	}
	sort.Slice(files, func(i, j int) bool { return version(files[i]) < version(files[j]) })
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(string(text)); err != nil {
			t.Fatalf("migration %s: %v", filepath.Base(f), err)
		}
	}
	mustExec(t, db, "CREATE TABLE conformance_writes (key TEXT NOT NULL)")
	return tdb
}

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// queryText runs a one-value query and returns its text ("<null>" for NULL).
func queryText(ctx context.Context, db *sql.DB, query string, id string) (string, error) {
	var args []any
	if strings.Contains(query, "$1") {
		args = append(args, id)
	}
	var v any
	if err := db.QueryRowContext(ctx, query, args...).Scan(&v); err != nil {
		return "", err
	}
	switch x := v.(type) {
	case nil:
		return "<null>", nil
	case []byte:
		return string(x), nil
	default:
		return fmt.Sprint(x), nil
	}
}

// ---- events, logs and the in-flight check ----

type recorder struct {
	mu      sync.Mutex
	events  []string
	logs    []string
	byKey   map[string]int
	byAgg   map[string]int
	changed chan struct{}
}

func newRecorder() *recorder {
	return &recorder{byKey: map[string]int{}, byAgg: map[string]int{}, changed: make(chan struct{}, 1)}
}

func (r *recorder) add(event string) {
	r.mu.Lock()
	r.events = append(r.events, event)
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func (r *recorder) has(event string) bool {
	for _, e := range r.snapshot() {
		if e == event {
			return true
		}
	}
	return false
}

func (r *recorder) enter(m queuebox.Message) {
	r.mu.Lock()
	r.byKey[m.IdempotencyKey]++
	overlapKey := r.byKey[m.IdempotencyKey] > 1
	overlapAgg := false
	if m.AggregateID != nil {
		r.byAgg[*m.AggregateID]++
		overlapAgg = r.byAgg[*m.AggregateID] > 1
	}
	r.mu.Unlock()
	r.add("start:" + m.IdempotencyKey)
	if overlapKey {
		r.add("overlap:key:" + m.IdempotencyKey)
	}
	if overlapAgg {
		r.add("overlap:aggregate:" + *m.AggregateID)
	}
}

func (r *recorder) leave(m queuebox.Message) {
	r.add("end:" + m.IdempotencyKey)
	r.mu.Lock()
	r.byKey[m.IdempotencyKey]--
	if m.AggregateID != nil {
		r.byAgg[*m.AggregateID]--
	}
	r.mu.Unlock()
}

type testLogger struct{ r *recorder }

func (l testLogger) line(level, message string, fields map[string]any) {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(level + " " + message)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%v", k, fields[k])
	}
	l.r.mu.Lock()
	l.r.logs = append(l.r.logs, b.String())
	l.r.mu.Unlock()
}

func (l testLogger) Info(m string, f map[string]any)  { l.line("INFO", m, f) }
func (l testLogger) Warn(m string, f map[string]any)  { l.line("WARN", m, f) }
func (l testLogger) Error(m string, f map[string]any) { l.line("ERROR", m, f) }

// ---- the worker scenarios ----

func opt(v *int, fallback *int) int {
	if v != nil {
		return *v
	}
	if fallback != nil {
		return *fallback
	}
	return 0
}

func buildOptions(t *testing.T, s suite, sc scenario, r *recorder) queuebox.Options {
	d, w := s.Defaults.Worker, sc.Worker
	o := queuebox.Options{
		Source:         s.Defaults.Source,
		BatchSize:      opt(w.BatchSize, d.BatchSize),
		LeaseMS:        opt(w.LeaseMS, d.LeaseMS),
		MaxConcurrency: opt(w.MaxConcurrency, d.MaxConcurrency),
		PollInterval:   time.Duration(opt(w.PollIntervalMS, d.PollIntervalMS)) * time.Millisecond,
		ShutdownGrace:  time.Duration(opt(w.ShutdownGraceMS, d.ShutdownGraceMS)) * time.Millisecond,
		Logger:         testLogger{r},
	}
	if w.Retry != nil {
		o.RetryPolicy = retryPolicy(*w.Retry)
	}
	if w.Schema != nil {
		schema := queuebox.DefaultSchema()
		fields := map[string]*string{
			"namespace": &schema.Namespace, "table": &schema.Table, "id": &schema.ID,
			"source": &schema.Source, "idempotency_key": &schema.IdempotencyKey,
			"aggregate_id": &schema.AggregateID, "event_type": &schema.EventType,
			"payload": &schema.Payload, "headers": &schema.Headers, "state": &schema.State,
			"consumption": &schema.Consumption, "attempt": &schema.Attempt,
			"last_error": &schema.LastError, "scheduled_at": &schema.ScheduledAt,
			"created_at": &schema.CreatedAt, "processed_at": &schema.ProcessedAt,
			"claimed_at": &schema.ClaimedAt, "claim_token": &schema.ClaimToken,
			"lease_expires_at": &schema.LeaseExpiresAt, "correlation_id": &schema.CorrelationID,
		}
		for k, v := range w.Schema {
			field, ok := fields[k]
			if !ok {
				t.Fatalf("unknown schema field %q in the scenario", k)
			}
			*field = v
		}
		o.Schema = &schema
	}
	return o
}

func insertRows(t *testing.T, db *sql.DB, source string, sc scenario) []string {
	rows := append([]rowSpec(nil), sc.Rows...)
	if g := sc.Generate; g != nil {
		for i := 1; i <= g.Count; i++ {
			age := (g.Count - i + 1) * 10
			row := rowSpec{Key: fmt.Sprintf("%s%d", g.KeyPrefix, i), AgeMS: &age}
			if g.Aggregates > 0 {
				agg := fmt.Sprintf("g-%d", i%g.Aggregates)
				row.Aggregate = &agg
			}
			rows = append(rows, row)
		}
	}
	keys := make([]string, 0, len(rows))
	for _, row := range rows {
		age := 1000
		if row.AgeMS != nil {
			age = *row.AgeMS
		}
		mustExec(t, db, `INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, headers,
			consumption, correlation_id, created_at, scheduled_at)
			VALUES ($1::text, $2::text, $3::text, 'test.event', jsonb_build_object('key', $2::text), '{"x-test": "1"}',
			'pull', 'corr-' || $2::text, now() - $4::bigint * interval '1 millisecond',
			now() - $4::bigint * interval '1 millisecond')`, source, row.Key, row.Aggregate, age)
		keys = append(keys, row.Key)
	}
	return keys
}

func describe(db *sql.DB, ctx context.Context, m queuebox.Message) string {
	key, err := queryText(ctx, db, "SELECT idempotency_key FROM inbox WHERE id = $1::uuid", m.ID)
	if err != nil {
		key = err.Error()
	}
	text := func(p *string) string {
		if p == nil {
			return "-"
		}
		return *p
	}
	var payload struct {
		Key string `json:"key"`
	}
	if err := m.UnmarshalPayload(&payload); err != nil {
		payload.Key = "unparsable"
	}
	return fmt.Sprintf("id_matches=%t source=%s key=%s aggregate=%s event_type=%s payload_key=%s header_x_test=%s attempt=%d correlation=%s",
		key == m.IdempotencyKey, m.Source, m.IdempotencyKey, text(m.AggregateID), text(m.EventType), payload.Key,
		m.Headers["x-test"], m.Attempt, text(m.CorrelationID))
}

func pollUntil(ctx context.Context, deadline time.Duration, check func() (bool, error)) error {
	until := time.Now().Add(deadline)
	for {
		ok, err := check()
		if err == nil && ok {
			return nil
		}
		if time.Now().After(until) {
			if err != nil {
				return fmt.Errorf("timed out after %s (last error: %v)", deadline, err)
			}
			return fmt.Errorf("timed out after %s", deadline)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func queryBool(ctx context.Context, db *sql.DB, query, id string) (bool, error) {
	text, err := queryText(ctx, db, query, id)
	return text == "true", err
}

func makeHandler(db *sql.DB, sc scenario, r *recorder, timeout time.Duration) queuebox.Handler {
	return func(ctx context.Context, m queuebox.Message, tx *sql.Tx) error {
		key := m.IdempotencyKey
		r.enter(m)
		defer r.leave(m)
		steps, ok := sc.Handlers[key]
		if !ok {
			steps = sc.Handlers["*"]
		}
		for _, st := range steps {
			switch st.Do {
			case "write":
				if _, err := tx.ExecContext(ctx, "INSERT INTO conformance_writes (key) VALUES ($1)", key); err != nil {
					return err
				}
			case "sql":
				if st.Record == "" {
					var args []any
					if strings.Contains(st.SQL, "$1") {
						args = append(args, m.ID)
					}
					if _, err := db.ExecContext(ctx, st.SQL, args...); err != nil {
						return err
					}
					continue
				}
				v, err := queryText(ctx, db, st.SQL, m.ID)
				if err != nil {
					return err
				}
				r.add(st.Record + ":" + key + "=" + v)
			case "mark":
				r.add(st.Event + ":" + key)
			case "fail":
				return errors.New(strings.Repeat(st.Error, max(st.Repeat, 1)))
			case "await_cancel":
				select {
				case <-ctx.Done():
					r.add("cancelled:" + key)
					return ctx.Err()
				case <-time.After(timeout):
					r.add("not_cancelled:" + key)
					return errors.New("the handler was never cancelled")
				}
			case "await_sql":
				if err := pollUntil(ctx, timeout, func() (bool, error) { return queryBool(ctx, db, st.SQL, m.ID) }); err != nil {
					return fmt.Errorf("await_sql %q: %w", st.SQL, err)
				}
				if st.Record != "" {
					r.add(st.Record + ":" + key)
				}
			case "watch_sql":
				minLeft, rises, prev, first := int64(0), 0, int64(0), true
				until := time.Now().Add(time.Duration(st.ForMS) * time.Millisecond)
				for time.Now().Before(until) {
					text, err := queryText(ctx, db, st.SQL, m.ID)
					if err != nil {
						return err
					}
					v, err := strconv.ParseInt(text, 10, 64)
					if err != nil {
						return fmt.Errorf("watch_sql gave %q", text)
					}
					if first || v < minLeft {
						minLeft = v
					}
					if !first && v > prev+100 {
						rises++
					}
					prev, first = v, false
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(20 * time.Millisecond):
					}
				}
				r.add(fmt.Sprintf("%s.min:%s=%d", st.Record, key, minLeft))
				r.add(fmt.Sprintf("%s.rises:%s=%d", st.Record, key, rises))
			case "record_message":
				r.add("message:" + key + "=" + describe(db, ctx, m))
			case "check_token_hidden":
				token, err := queryText(ctx, db, "SELECT claim_token::text FROM inbox WHERE id = $1::uuid", m.ID)
				if err != nil {
					return err
				}
				visible := token == "<null>" || strings.Contains(fmt.Sprintf("%#v", m), token)
				for _, f := range reflect.VisibleFields(reflect.TypeOf(m)) {
					if strings.Contains(strings.ToLower(f.Name), "token") {
						visible = true
					}
				}
				if visible {
					r.add("token_visible:" + key)
				} else {
					r.add("token_hidden:" + key)
				}
			default:
				return fmt.Errorf("unknown handler step %q", st.Do)
			}
		}
		return nil
	}
}

type runningWorker struct {
	cancel context.CancelFunc
	done   chan error
}

func runWorkerScenario(t *testing.T, s suite, sc scenario) {
	timeout := time.Duration(s.Defaults.TimeoutMS) * time.Millisecond
	tdb := newTestDB(t)
	db := tdb.db
	for _, q := range sc.SQLBefore {
		mustExec(t, db, q)
	}
	keys := insertRows(t, db, s.Defaults.Source, sc)
	for _, q := range sc.SQLAfterRows {
		mustExec(t, db, q)
	}
	r := newRecorder()
	ctx := context.Background()
	var workers []runningWorker
	stopAll := func() {
		for _, w := range workers {
			w.cancel()
		}
	}
	waitAll := func() {
		for _, w := range workers {
			select {
			case err := <-w.done:
				if err != nil {
					t.Fatalf("Run returned an error: %v", err)
				}
			case <-time.After(timeout):
				t.Fatalf("Run did not return within %s of the stop", timeout)
			}
		}
		workers = nil
	}
	defer func() {
		stopAll()
		for _, w := range workers {
			select {
			case <-w.done:
			case <-time.After(timeout):
			}
		}
	}()

	for _, st := range sc.Run {
		switch st.Do {
		case "start":
			count := max(sc.Workers, 1)
			for i := 0; i < count; i++ {
				worker, err := queuebox.NewInboxWorker(db, buildOptions(t, s, sc, r))
				if st.ExpectErrorContains != "" {
					if err == nil {
						runCtx, cancel := context.WithTimeout(ctx, timeout)
						err = worker.Run(runCtx, makeHandler(db, sc, r, timeout))
						cancel()
					}
					if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(st.ExpectErrorContains)) {
						t.Fatalf("want an error containing %q from NewInboxWorker or Run, got %v", st.ExpectErrorContains, err)
					}
					t.Logf("refused as expected: %v", err)
					continue
				}
				if err != nil {
					t.Fatalf("NewInboxWorker: %v", err)
				}
				runCtx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				handler := makeHandler(db, sc, r, timeout)
				go func() { done <- worker.Run(runCtx, handler) }()
				workers = append(workers, runningWorker{cancel: cancel, done: done})
			}
		case "wait_sql":
			if err := pollUntil(ctx, timeout, func() (bool, error) { return queryBool(ctx, db, st.SQL, "") }); err != nil {
				t.Fatalf("waiting for %q: %v\nevents: %v\nlogs: %v", st.SQL, err, r.snapshot(), r.logs)
			}
		case "wait_event":
			if err := pollUntil(ctx, timeout, func() (bool, error) { return r.has(st.Event), nil }); err != nil {
				t.Fatalf("waiting for the event %q: %v\nevents: %v", st.Event, err, r.snapshot())
			}
		case "sql":
			mustExec(t, db, st.SQL)
		case "stop":
			stopAll()
			waitAll()
		case "stop_async":
			stopAll()
		case "wait_stopped":
			waitAll()
		default:
			t.Fatalf("unknown run step %q", st.Do)
		}
	}
	stopAll()
	waitAll()
	check(t, db, sc, r, keys)
}

func check(t *testing.T, db *sql.DB, sc scenario, r *recorder, keys []string) {
	e := sc.Expect
	events := r.snapshot()
	count := func(event string) int {
		n := 0
		for _, ev := range events {
			if ev == event {
				n++
			}
		}
		return n
	}
	checked := 0
	for _, want := range e.Events {
		checked++
		if count(want) == 0 {
			t.Errorf("missing event %q\nevents: %v", want, events)
		}
	}
	for _, absent := range e.EventsAbsent {
		checked++
		if count(absent) > 0 {
			t.Errorf("unexpected event %q", absent)
		}
	}
	for _, prefix := range e.EventsAbsentPrefix {
		checked++
		for _, ev := range events {
			if strings.HasPrefix(ev, prefix) {
				t.Errorf("unexpected event %q", ev)
			}
		}
	}
	for event, want := range e.EventCounts {
		checked++
		if got := count(event); got != want {
			t.Errorf("event %q seen %d times, want %d", event, got, want)
		}
	}
	if e.EachKeyStarted != nil {
		checked++
		for _, k := range keys {
			if got := count("start:" + k); got != *e.EachKeyStarted {
				t.Errorf("row %s handled %d times, want %d", k, got, *e.EachKeyStarted)
			}
		}
	}
	if len(e.Order) > 0 {
		checked++
		last := -1
		for _, want := range e.Order {
			at := -1
			for i, ev := range events {
				if ev == want {
					at = i
					break
				}
			}
			if at <= last {
				t.Errorf("event %q is missing or out of order\nevents: %v", want, events)
				break
			}
			last = at
		}
	}
	numberPattern := regexp.MustCompile(`^-?[0-9.]+$`)
	for _, n := range e.Numbers {
		checked++
		found := false
		for _, ev := range events {
			if value, ok := strings.CutPrefix(ev, n.Event+"="); ok && numberPattern.MatchString(value) {
				found = true
				v, _ := strconv.ParseFloat(value, 64)
				if v < n.AtLeast {
					t.Errorf("%s = %v, want at least %v", n.Event, v, n.AtLeast)
				}
			}
		}
		if !found {
			t.Errorf("no number recorded for %s\nevents: %v", n.Event, events)
		}
	}
	for _, c := range e.SQL {
		checked++
		got, err := queryText(context.Background(), db, c.SQL, "")
		if err != nil {
			t.Errorf("%s: %v", c.SQL, err)
			continue
		}
		if c.Equals != nil && got != *c.Equals {
			t.Errorf("%s\n got %q\nwant %q\nevents: %v\nlogs: %v", c.SQL, got, *c.Equals, events, r.logs)
		}
		for _, want := range c.Contains {
			if !strings.Contains(got, want) {
				t.Errorf("%s\n got %q, which lacks %q", c.SQL, got, want)
			}
		}
		for _, not := range c.NotContains {
			if strings.Contains(got, not) {
				t.Errorf("%s\n got %q, which holds %q", c.SQL, got, not)
			}
		}
	}
	if e.Logs != nil {
		checked++
		r.mu.Lock()
		logs := append([]string(nil), r.logs...)
		r.mu.Unlock()
		if e.Logs.NotEmpty && len(logs) == 0 {
			t.Error("the logger received nothing")
		}
		for _, line := range logs {
			for _, not := range e.Logs.NotContains {
				if strings.Contains(line, not) {
					t.Errorf("a log line holds %q: %s", not, line)
				}
			}
		}
	}
	start := false
	for _, st := range sc.Run {
		start = start || st.ExpectErrorContains != ""
	}
	if checked == 0 && !start {
		t.Fatal("the scenario checks nothing")
	}
}
