package queuebox_test

// The outbox-writer conformance runner: every scenario of clients/conformance/writer-scenarios.json
// against a fresh database, through this library's public API, with the real queuebox binary
// delivering what the writer wrote. Rust, TypeScript and Python run the same file.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
	"github.com/jackc/pgx/v5"
)

type expectedDelivery struct {
	Topic   string            `json:"topic"`
	Body    json.RawMessage   `json:"body"`
	Headers map[string]string `json:"headers"`
}

type writerScenario struct {
	ID        string            `json:"id"`
	Kind      string            `json:"kind"`
	Skip      map[string]string `json:"skip"`
	SQLBefore []string          `json:"sql_before"`
	Writer    struct {
		Schema         map[string]json.RawMessage `json:"schema"`
		HeaderHookAdds map[string]string          `json:"header_hook_adds"`
	} `json:"writer"`
	Transactions []struct {
		BusinessKey *string                      `json:"business_key"`
		End         string                       `json:"end"`
		Writes      []map[string]json.RawMessage `json:"writes"`
	} `json:"transactions"`
	Binary *struct {
		Database []string `json:"database"`
	} `json:"binary"`
	Expect struct {
		Deliveries *struct {
			SettledSQL string                        `json:"settled_sql"`
			ByKey      map[string][]expectedDelivery `json:"by_key"`
		} `json:"deliveries"`
		SQL []struct {
			SQL    string `json:"sql"`
			Equals string `json:"equals"`
		} `json:"sql"`
	} `json:"expect"`
	Cases []struct {
		Schema map[string]json.RawMessage `json:"schema"`
		Error  string                     `json:"error"`
	} `json:"cases"`
}

type writerSuite struct {
	Defaults struct {
		TimeoutMS int `json:"timeout_ms"`
	} `json:"defaults"`
	Scenarios []writerScenario `json:"scenarios"`
}

// scenarioText reads a text field: a string, or {"repeat": text, "times": n}.
func scenarioText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var r struct {
		Repeat string `json:"repeat"`
		Times  int    `json:"times"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("not a text field: %s", raw)
	}
	return strings.Repeat(r.Repeat, r.Times)
}

func outboxSchemaOf(t *testing.T, mapping map[string]json.RawMessage) queuebox.OutboxSchema {
	s := queuebox.DefaultOutboxSchema()
	fields := map[string]*string{
		"namespace": &s.Namespace, "table": &s.Table, "id": &s.ID, "topic": &s.Topic, "key": &s.Key,
		"aggregate_type": &s.AggregateType, "payload": &s.Payload, "headers": &s.Headers,
		"max_attempts": &s.MaxAttempts, "scheduled_at": &s.ScheduledAt,
	}
	for field, raw := range mapping {
		target, ok := fields[field]
		if !ok {
			t.Fatalf("unknown schema field %s", field)
		}
		*target = scenarioText(t, raw)
	}
	return s
}

func outboxMessageOf(t *testing.T, w map[string]json.RawMessage) queuebox.OutboxMessage {
	m := queuebox.OutboxMessage{Topic: scenarioText(t, w["topic"])}
	if raw, ok := w["payload_text"]; ok {
		m.Payload = []byte(scenarioText(t, raw))
	} else if raw, ok := w["payload"]; ok {
		var value any
		if err := json.Unmarshal(raw, &value); err != nil {
			t.Fatal(err)
		}
		m.Payload = value
	} else {
		t.Fatal("a write has a payload")
	}
	if raw, ok := w["key"]; ok {
		m.Key = scenarioText(t, raw)
	}
	if raw, ok := w["aggregate_type"]; ok {
		m.AggregateType = scenarioText(t, raw)
	}
	if raw, ok := w["headers"]; ok {
		if err := json.Unmarshal(raw, &m.Headers); err != nil {
			t.Fatalf("headers: %v", err)
		}
	}
	if raw, ok := w["max_attempts"]; ok {
		if err := json.Unmarshal(raw, &m.MaxAttempts); err != nil {
			t.Fatalf("max_attempts: %v", err)
		}
	}
	if raw, ok := w["traceparent"]; ok {
		m.TraceParent = scenarioText(t, raw)
	}
	if raw, ok := w["tracestate"]; ok {
		m.TraceState = scenarioText(t, raw)
	}
	if raw, ok := w["scheduled_in_ms"]; ok {
		var ms int64
		if err := json.Unmarshal(raw, &ms); err != nil {
			t.Fatal(err)
		}
		m.ScheduledAt = time.Now().Add(time.Duration(ms) * time.Millisecond)
	}
	return m
}

func queueboxBinary() (string, error) {
	var tried []string
	if p := os.Getenv("QB_BIN"); p != "" {
		tried = append(tried, p)
	}
	if d := os.Getenv("CARGO_TARGET_DIR"); d != "" {
		tried = append(tried, filepath.Join(d, "debug", "queuebox"))
	}
	tried = append(tried, repoPath("target", "debug", "queuebox"))
	for _, p := range tried {
		if info, err := os.Stat(p); err == nil && !info.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("the queuebox binary was not found (tried %s): build it with `cargo build -p queuebox`", strings.Join(tried, ", "))
}

type receivedRequest struct {
	headers map[string]string
	body    []byte
}

func TestWriterConformance(t *testing.T) {
	raw, err := os.ReadFile(repoPath("clients", "conformance", "writer-scenarios.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s writerSuite
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("writer-scenarios.json: %v", err)
	}
	timeout := time.Duration(s.Defaults.TimeoutMS) * time.Millisecond
	for _, sc := range s.Scenarios {
		t.Run(sc.ID, func(t *testing.T) {
			if reason, ok := sc.Skip[runnerName]; ok {
				if reason == "" {
					t.Fatal("a skip must give its reason")
				}
				t.Skip(reason)
			}
			if sc.Kind == "schema_refusal" {
				for _, c := range sc.Cases {
					_, err := queuebox.NewOutboxWriter(outboxSchemaOf(t, c.Schema), queuebox.OutboxWriterOptions{})
					if err == nil || !strings.Contains(err.Error(), c.Error) {
						t.Errorf("schema %v: got %v, expected an error containing %q", c.Schema, err, c.Error)
					}
				}
				return
			}
			runWriterScenario(t, sc, timeout)
		})
	}
}

func runWriterScenario(t *testing.T, sc writerScenario, timeout time.Duration) {
	ctx := context.Background()
	tdb := newTestDB(t)
	for _, q := range sc.SQLBefore {
		mustExec(t, tdb.db, q)
	}
	schema := outboxSchemaOf(t, sc.Writer.Schema)
	var options queuebox.OutboxWriterOptions
	if len(sc.Writer.HeaderHookAdds) > 0 {
		options.HeaderHook = func(_ context.Context, headers map[string]string) {
			for name, value := range sc.Writer.HeaderHookAdds {
				headers[name] = value
			}
		}
	}
	writer, err := queuebox.NewOutboxWriter(schema, options)
	if err != nil {
		t.Fatal(err)
	}
	table := `"` + schema.Table + `"`
	if schema.Namespace != "" {
		table = `"` + schema.Namespace + `".` + table
	}
	idCheck := fmt.Sprintf(`SELECT count(*) FROM %s WHERE "%s"::text = $1`, table, schema.ID)
	var committed []string
	for ti, tr := range sc.Transactions {
		tx, err := tdb.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tr.BusinessKey != nil {
			if _, err := tx.ExecContext(ctx, "INSERT INTO conformance_writes (key) VALUES ($1)", *tr.BusinessKey); err != nil {
				t.Fatalf("business write: %v", err)
			}
		}
		var ids []string
		for wi, w := range tr.Writes {
			id, err := writer.Write(ctx, tx, outboxMessageOf(t, w))
			var expected string
			if raw, ok := w["error"]; ok {
				expected = scenarioText(t, raw)
			}
			switch {
			case expected != "" && err == nil:
				t.Fatalf("transaction %d write %d: expected an error containing %q, the row %s was written", ti, wi, expected, id)
			case expected != "" && !strings.Contains(err.Error(), expected):
				t.Fatalf("transaction %d write %d: expected an error containing %q, got %v", ti, wi, expected, err)
			case expected != "":
				var refusal *queuebox.RefusedError
				if !errors.As(err, &refusal) {
					t.Fatalf("transaction %d write %d: %v is not a *RefusedError", ti, wi, err)
				}
			case err != nil:
				t.Fatalf("transaction %d write %d: %v", ti, wi, err)
			default:
				ids = append(ids, id)
			}
		}
		rollback := tr.End == "rollback"
		if rollback {
			err = tx.Rollback()
		} else {
			err = tx.Commit()
		}
		if err != nil {
			t.Fatalf("transaction %d end: %v", ti, err)
		}
		for _, id := range ids {
			var count int
			if err := tdb.db.QueryRowContext(ctx, idCheck, id).Scan(&count); err != nil {
				t.Fatal(err)
			}
			want := 1
			if rollback {
				want = 0
			}
			if count != want {
				t.Fatalf("transaction %d: the returned id %s names %d rows of %s, expected %d", ti, id, count, table, want)
			}
			if !rollback {
				committed = append(committed, id)
			}
		}
	}
	if sc.Binary != nil {
		runWriterBinary(t, tdb, sc, committed, timeout)
	}
	for _, check := range sc.Expect.SQL {
		var got sql.NullString
		if err := tdb.db.QueryRowContext(ctx, check.SQL).Scan(&got); err != nil {
			t.Fatalf("%s: %v", check.SQL, err)
		}
		text := got.String
		if !got.Valid {
			text = "<null>"
		}
		if text != check.Equals {
			t.Errorf("%s\n  got:  %s\n  want: %s", check.SQL, text, check.Equals)
		}
	}
}

func runWriterBinary(t *testing.T, tdb *testDB, sc writerScenario, committed []string, timeout time.Duration) {
	binary, err := queueboxBinary()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var received []receivedRequest
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		headers := map[string]string{}
		for name, values := range r.Header {
			headers[strings.ToLower(name)] = strings.Join(values, ",")
		}
		mu.Lock()
		received = append(received, receivedRequest{headers: headers, body: body})
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer receiver.Close()

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := listener.Addr().(*net.TCPAddr).Port
	_ = listener.Close()
	u, err := url.Parse(os.Getenv("QB_TEST_PG_URL"))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + tdb.name
	var config strings.Builder
	fmt.Fprintf(&config, "server:\n  httpPort: %d\ndatabase:\n  url: %q\n  migrate: false\n", port, u.String())
	for _, line := range sc.Binary.Database {
		config.WriteString("  " + line + "\n")
	}
	fmt.Fprintf(&config, "outbox:\n  pollIntervalMs: 50\ndestinations:\n  hook:\n    type: http\n    baseUrl: %s\n    path: /events\nroutes:\n  - topicPattern: \"**\"\n    destination: hook\n", receiver.URL)
	dir := t.TempDir()
	configPath := filepath.Join(dir, "queuebox.yml")
	if err := os.WriteFile(configPath, []byte(config.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd := exec.Command(binary)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "QUEUEBOX_CONFIG_FILE=" + configPath}
	cmd.Stderr = &syncWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", binary, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	deliveries := sc.Expect.Deliveries
	settled := "SELECT true"
	if deliveries != nil && deliveries.SettledSQL != "" {
		settled = deliveries.SettledSQL
	}
	waitErr := pollUntil(context.Background(), timeout, func() (bool, error) {
		var done bool
		err := tdb.db.QueryRow(settled).Scan(&done)
		return done, err
	})
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
	if waitErr != nil {
		t.Fatalf("%s: %v\nqueuebox stderr:\n%s", settled, waitErr, stderr.String())
	}
	if deliveries == nil {
		return
	}

	mu.Lock()
	got := append([]receivedRequest(nil), received...)
	mu.Unlock()
	byKey := map[string][]receivedRequest{}
	for _, r := range got {
		byKey[r.headers["x-message-key"]] = append(byKey[r.headers["x-message-key"]], r)
		known := false
		for _, id := range committed {
			known = known || id == r.headers["x-message-id"]
		}
		if !known {
			t.Errorf("a delivery carries X-Message-Id %q, which no committed write returned", r.headers["x-message-id"])
		}
	}
	for key := range byKey {
		if _, ok := deliveries.ByKey[key]; !ok {
			t.Errorf("deliveries for the unexpected key %q", key)
		}
	}
	for key, want := range deliveries.ByKey {
		have := byKey[key]
		if len(have) != len(want) {
			t.Errorf("key %s: %d deliveries, expected %d", key, len(have), len(want))
			continue
		}
		for i, w := range want {
			r := have[i]
			if r.headers["x-topic"] != w.Topic {
				t.Errorf("key %s delivery %d: topic %s, expected %s", key, i, r.headers["x-topic"], w.Topic)
			}
			var body, expected any
			if err := json.Unmarshal(r.body, &body); err != nil {
				t.Errorf("key %s delivery %d: body %q: %v", key, i, r.body, err)
				continue
			}
			if err := json.Unmarshal(w.Body, &expected); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(body, expected) {
				t.Errorf("key %s delivery %d: body %s, expected %s", key, i, r.body, w.Body)
			}
			for name, value := range w.Headers {
				if r.headers[strings.ToLower(name)] != value {
					t.Errorf("key %s delivery %d: header %s is %q, expected %q", key, i, name, r.headers[strings.ToLower(name)], value)
				}
			}
		}
	}
}

// syncWriter serialises the writes of the child's stderr copier with the reads of a failure.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestWritePgxJoinsThePgxTransaction proves WritePgx on pgx's own interface: the row commits with
// the transaction, and a rolled-back one leaves nothing.
func TestWritePgxJoinsThePgxTransaction(t *testing.T) {
	ctx := context.Background()
	tdb := newTestDB(t)
	u, err := url.Parse(os.Getenv("QB_TEST_PG_URL"))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + tdb.name
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	writer, err := queuebox.NewOutboxWriter(queuebox.DefaultOutboxSchema(), queuebox.OutboxWriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, commit := range []bool{false, true} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id, err := writer.WritePgx(ctx, tx, queuebox.OutboxMessage{Topic: "pgx.t", Key: "k", Payload: map[string]any{"commit": commit}})
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		var found string
		err = conn.QueryRow(ctx, "SELECT coalesce(string_agg(payload::text, ','), '') FROM outbox WHERE id::text = $1", id).Scan(&found)
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		if commit {
			want = `{"commit": true}`
		}
		if found != want {
			t.Fatalf("commit=%v: the row holds %q, expected %q", commit, found, want)
		}
	}
}
