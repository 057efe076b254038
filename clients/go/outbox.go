package queuebox

// The outbox writer: one insert of an outbox row inside the caller's own transaction. QueueBox
// delivers the row once that transaction commits; if it rolls back, there is no row and no message.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// maxOutboxText is the width of the topic, key and aggregate_type columns (VARCHAR(255)), in
// characters as PostgreSQL counts them.
const maxOutboxText = 255

// OutboxMessage is one outbox row to write. Topic and Payload are required; a zero field takes
// the column default (no key, no aggregate type, no headers, 5 attempts, due now).
type OutboxMessage struct {
	// Topic is what routes match, such as "order.created".
	Topic string
	// Payload is any JSON value, encoded with encoding/json (nil is the JSON null). A []byte or
	// json.RawMessage is JSON text that is already encoded: it is checked and stored as it is.
	Payload any
	// Key orders the rows of one key (delivered in write order); "" is no key (NULL).
	Key string
	// AggregateType is the kind of entity, for broker addresses; "" is NULL.
	AggregateType string
	// Headers are sent as HTTP or message headers.
	Headers map[string]string
	// MaxAttempts is how many deliveries before the row goes dead; 0 takes the column default.
	MaxAttempts int
	// ScheduledAt is the earliest delivery; the zero time takes the column default (now).
	ScheduledAt time.Time
	// TraceParent is the caller's W3C trace context ("00-<trace id>-<span id>-<flags>"), stored
	// as the row's traceparent header so the delivery continues the caller's trace; a malformed
	// one is refused. "" is none. With OpenTelemetry: inject the span of ctx into a
	// propagation.MapCarrier and pass carrier["traceparent"] (or do it in the HeaderHook).
	TraceParent string
	// TraceState is the W3C tracestate going with TraceParent, stored as the tracestate header.
	TraceState string
}

// OutboxSchema holds the table and column names the writer uses. DefaultOutboxSchema returns
// the names of QueueBox's migrations; change the fields your mapping renames (the same mapping
// as the service's database.outboxTableName and database.columnMapping.outbox.*).
type OutboxSchema struct {
	// Namespace is the PostgreSQL schema that holds the table; empty uses the search path.
	Namespace     string
	Table         string
	ID            string
	Topic         string
	Key           string
	AggregateType string
	Payload       string
	Headers       string
	MaxAttempts   string
	ScheduledAt   string
}

// DefaultOutboxSchema returns the table and column names of QueueBox's own migrations.
func DefaultOutboxSchema() OutboxSchema {
	return OutboxSchema{
		Table: "outbox", ID: "id", Topic: "topic", Key: "key", AggregateType: "aggregate_type",
		Payload: "payload", Headers: "headers", MaxAttempts: "max_attempts", ScheduledAt: "scheduled_at",
	}
}

// OutboxWriterOptions are the optional settings of an OutboxWriter.
type OutboxWriterOptions struct {
	// HeaderHook, if set, gets a copy of each message's headers (never nil) before the checks and
	// may add or change some; what it leaves is stored. The place to add headers taken from ctx,
	// such as a trace context. Without it headers pass through as given.
	HeaderHook func(ctx context.Context, headers map[string]string)
}

// RefusedError is a message the outbox table cannot hold. It is returned before any SQL runs, so
// the caller's transaction stays usable.
type RefusedError struct {
	// Reason is the same text in every QueueBox client.
	Reason string
}

func (e *RefusedError) Error() string { return "queuebox: " + e.Reason }

func refused(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// SQLQuerier is what Write runs the insert on: a *sql.Tx (the caller's transaction, or the
// handler's tx of an InboxWorker), a *sql.Conn or a *sql.DB.
type SQLQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// PgxQuerier is what WritePgx runs the insert on: a pgx.Tx, a *pgx.Conn, a *pgxpool.Pool or a
// *pgxpool.Conn.
type PgxQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// OutboxWriter writes outbox rows under one schema. Build it once with NewOutboxWriter; it is
// safe for concurrent use.
type OutboxWriter struct {
	table   string
	columns outboxColumns
	hook    func(ctx context.Context, headers map[string]string)
}

type outboxColumns struct {
	id, topic, key, aggregateType, payload, headers, maxAttempts, scheduledAt string
}

func outboxIdentifierError(what, name string) error {
	return fmt.Errorf("queuebox: invalid SQL identifier %s for the outbox %s: use letters, digits and underscores, starting with a letter or underscore, at most %d characters", jsonString(name), what, maxIdentifier)
}

// jsonString quotes text as a JSON string, the quoting every client uses in its messages.
func jsonString(text string) string {
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(text)
	return strings.TrimSuffix(out.String(), "\n")
}

// NewOutboxWriter checks every name of schema and returns the writer. It runs no SQL.
func NewOutboxWriter(schema OutboxSchema, options OutboxWriterOptions) (*OutboxWriter, error) {
	if !isValidIdentifier(schema.Table) {
		return nil, outboxIdentifierError("table", schema.Table)
	}
	table := `"` + schema.Table + `"`
	if schema.Namespace != "" {
		if !isValidIdentifier(schema.Namespace) {
			return nil, outboxIdentifierError("namespace", schema.Namespace)
		}
		table = `"` + schema.Namespace + `".` + table
	}
	fields := []struct{ field, name string }{
		{"id", schema.ID}, {"topic", schema.Topic}, {"key", schema.Key},
		{"aggregate_type", schema.AggregateType}, {"payload", schema.Payload},
		{"headers", schema.Headers}, {"max_attempts", schema.MaxAttempts},
		{"scheduled_at", schema.ScheduledAt},
	}
	quoted := make([]string, len(fields))
	for i, f := range fields {
		if !isValidIdentifier(f.name) {
			return nil, outboxIdentifierError("column "+f.field, f.name)
		}
		for _, earlier := range fields[:i] {
			if earlier.name == f.name {
				return nil, fmt.Errorf("queuebox: the outbox columns %s and %s are both named %s", earlier.field, f.field, jsonString(f.name))
			}
		}
		quoted[i] = `"` + f.name + `"`
	}
	return &OutboxWriter{
		table: table,
		columns: outboxColumns{
			id: quoted[0], topic: quoted[1], key: quoted[2], aggregateType: quoted[3],
			payload: quoted[4], headers: quoted[5], maxAttempts: quoted[6], scheduledAt: quoted[7],
		},
		hook: options.HeaderHook,
	}, nil
}

// Write checks m and inserts it through q (the caller's *sql.Tx, so the row commits with the
// caller's change); it returns the new row's id. A *RefusedError comes before any SQL.
func (w *OutboxWriter) Write(ctx context.Context, q SQLQuerier, m OutboxMessage) (string, error) {
	return w.insert(ctx, m, func(query string, args ...any) rowScanner {
		return q.QueryRowContext(ctx, query, args...)
	})
}

// WritePgx is Write for pgx's own interface (pgx.Tx, *pgx.Conn, *pgxpool.Pool).
func (w *OutboxWriter) WritePgx(ctx context.Context, q PgxQuerier, m OutboxMessage) (string, error) {
	return w.insert(ctx, m, func(query string, args ...any) rowScanner {
		return q.QueryRow(ctx, query, args...)
	})
}

// rowScanner is the one row of *sql.Row and pgx.Row.
type rowScanner interface {
	Scan(dest ...any) error
}

func (w *OutboxWriter) insert(ctx context.Context, m OutboxMessage, queryRow func(query string, args ...any) rowScanner) (string, error) {
	query, args, err := w.prepare(ctx, m)
	if err != nil {
		return "", err
	}
	var id string
	if err := queryRow(query, args...).Scan(&id); err != nil {
		return "", fmt.Errorf("queuebox: the outbox insert failed: %w", err)
	}
	return id, nil
}

// WriteOutbox writes m into the outbox table of QueueBox's migrations; see OutboxWriter.Write.
func WriteOutbox(ctx context.Context, q SQLQuerier, m OutboxMessage) (string, error) {
	w, err := NewOutboxWriter(DefaultOutboxSchema(), OutboxWriterOptions{})
	if err != nil {
		return "", err
	}
	return w.Write(ctx, q, m)
}

// prepare checks m and returns the statement and its arguments.
func (w *OutboxWriter) prepare(ctx context.Context, m OutboxMessage) (string, []any, error) {
	headers := make(map[string]string, len(m.Headers))
	for name, value := range m.Headers {
		headers[name] = value
	}
	if err := putTraceContext(headers, m.TraceParent, m.TraceState); err != nil {
		return "", nil, err
	}
	if w.hook != nil {
		w.hook(ctx, headers)
	}
	if err := checkTraceHeaders(headers); err != nil {
		return "", nil, err
	}
	if err := checkOutboxText("topic", m.Topic); err != nil {
		return "", nil, err
	}
	if m.Topic == "" {
		return "", nil, refused("the topic is empty; every outbox row needs one")
	}
	if err := checkOutboxText("key", m.Key); err != nil {
		return "", nil, err
	}
	if err := checkOutboxText("aggregate type", m.AggregateType); err != nil {
		return "", nil, err
	}
	payload, err := outboxPayload(m.Payload)
	if err != nil {
		return "", nil, err
	}
	for name, value := range headers {
		if strings.ContainsRune(name, 0) || strings.ContainsRune(value, 0) {
			return "", nil, refused("a header holds the character U+0000, which the outbox cannot store")
		}
	}
	if m.MaxAttempts < 0 || m.MaxAttempts > math.MaxInt32 {
		return "", nil, refused("max attempts is %d; it must be a whole number from 1 to %d", m.MaxAttempts, math.MaxInt32)
	}

	c := w.columns
	columns := []string{c.topic, c.payload}
	args := []any{m.Topic, payload}
	casts := []string{"", "::jsonb"}
	add := func(column, cast string, value any) {
		columns = append(columns, column)
		casts = append(casts, cast)
		args = append(args, value)
	}
	if m.Key != "" {
		add(c.key, "", m.Key)
	}
	if m.AggregateType != "" {
		add(c.aggregateType, "", m.AggregateType)
	}
	if len(headers) > 0 {
		text, err := json.Marshal(headers)
		if err != nil {
			return "", nil, refused("the headers cannot be encoded as JSON: %v", err)
		}
		add(c.headers, "::jsonb", string(text))
	}
	if m.MaxAttempts > 0 {
		add(c.maxAttempts, "::integer", int32(m.MaxAttempts))
	}
	if !m.ScheduledAt.IsZero() {
		add(c.scheduledAt, "::timestamptz", m.ScheduledAt)
	}
	values := make([]string, len(columns))
	for i, cast := range casts {
		values[i] = "$" + strconv.Itoa(i+1) + cast
	}
	query := "INSERT INTO " + w.table + " (" + strings.Join(columns, ", ") + ") VALUES (" +
		strings.Join(values, ", ") + ") RETURNING " + c.id + "::text"
	return query, args, nil
}

// checkOutboxText checks a text column: no U+0000 (first), then at most 255 characters.
func checkOutboxText(field, value string) error {
	if strings.ContainsRune(value, 0) {
		return refused("the %s holds the character U+0000, which the outbox cannot store", field)
	}
	if len(value) > maxOutboxText {
		if n := utf8.RuneCountInString(value); n > maxOutboxText {
			return refused("the %s is %d characters long; the outbox stores at most %d", field, n, maxOutboxText)
		}
	}
	return nil
}

// outboxPayload returns the payload as JSON text for the JSONB column.
func outboxPayload(payload any) (string, error) {
	var text []byte
	switch p := payload.(type) {
	case json.RawMessage:
		text = p
	case []byte:
		text = p
	default:
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(payload); err != nil {
			return "", refused("the payload cannot be encoded as JSON: %v", err)
		}
		text = bytes.TrimSuffix(out.Bytes(), []byte("\n"))
	}
	if !utf8.Valid(text) {
		return "", refused("the payload is not valid JSON: it is not UTF-8")
	}
	if !json.Valid(text) {
		var ignored any
		err := json.Unmarshal(text, &ignored)
		if err == nil {
			err = fmt.Errorf("not one JSON text")
		}
		return "", refused("the payload is not valid JSON: %v", err)
	}
	// JSON can write U+0000 only as the escape \u0000; without it in the text there is none.
	if bytes.Contains(text, []byte(`\u0000`)) {
		var document any
		if err := json.Unmarshal(text, &document); err != nil {
			return "", refused("the payload is not valid JSON: %v", err)
		}
		if path, found := nulPath(document); found {
			return "", refused(`the payload holds the character U+0000 (\u0000) at %s, which the outbox cannot store`, path)
		}
	}
	return string(text), nil
}

// nulPath is the JSONPath of the first string or member name holding U+0000, walked as the Rust
// client and the service walk it (depth first, member names in byte order, the names of an object
// checked when the object is visited), without recursion.
func nulPath(document any) (string, bool) {
	type item struct {
		value any
		path  string
	}
	stack := []item{{document, "$"}}
	for len(stack) > 0 {
		top := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch v := top.value.(type) {
		case string:
			if strings.ContainsRune(v, 0) {
				return top.path, true
			}
		case map[string]any:
			names := make([]string, 0, len(v))
			for name := range v {
				names = append(names, name)
			}
			sort.Strings(names)
			for i := len(names) - 1; i >= 0; i-- {
				memberPath := top.path + "[" + quotedMemberName(names[i]) + "]"
				if strings.ContainsRune(names[i], 0) {
					return memberPath, true
				}
				stack = append(stack, item{v[names[i]], memberPath})
			}
		case []any:
			for i := len(v) - 1; i >= 0; i-- {
				stack = append(stack, item{v[i], top.path + "[" + strconv.Itoa(i) + "]"})
			}
		}
	}
	return "", false
}

// quotedMemberName writes a member name as a bracketed JSONPath string: ' and \ escaped, control
// characters as \u00xx.
func quotedMemberName(name string) string {
	var out strings.Builder
	out.WriteByte('\'')
	for _, r := range name {
		switch {
		case r == '\'':
			out.WriteString(`\'`)
		case r == '\\':
			out.WriteString(`\\`)
		case unicode.IsControl(r):
			fmt.Fprintf(&out, `\u%04x`, r)
		default:
			out.WriteRune(r)
		}
	}
	out.WriteByte('\'')
	return out.String()
}
