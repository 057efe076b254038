package queuebox

import (
	"fmt"
	"strings"
)

// Schema holds the table and column names the worker uses. DefaultSchema returns the names of
// the bundled migrations; change the fields that your mapping renames and pass a pointer in
// Options.Schema.
//
// Every name must be a plain identifier (letters, digits and underscores, not starting with a
// digit, at most 63 bytes). Names are double-quoted in the SQL, so they keep their letter case
// and can never carry SQL.
type Schema struct {
	// Namespace is the PostgreSQL schema that holds the table; empty uses the search path.
	Namespace      string
	Table          string
	ID             string
	Source         string
	IdempotencyKey string
	AggregateID    string
	EventType      string
	Payload        string
	Headers        string
	State          string
	Consumption    string
	Attempt        string
	LastError      string
	ScheduledAt    string
	CreatedAt      string
	ProcessedAt    string
	ClaimedAt      string
	ClaimToken     string
	LeaseExpiresAt string
	CorrelationID  string
}

// DefaultSchema returns the table and column names of QueueBox's own migrations.
func DefaultSchema() Schema {
	return Schema{
		Table: "inbox", ID: "id", Source: "source", IdempotencyKey: "idempotency_key",
		AggregateID: "aggregate_id", EventType: "event_type", Payload: "payload",
		Headers: "headers", State: "state", Consumption: "consumption", Attempt: "attempt",
		LastError: "last_error", ScheduledAt: "scheduled_at", CreatedAt: "created_at",
		ProcessedAt: "processed_at", ClaimedAt: "claimed_at", ClaimToken: "claim_token",
		LeaseExpiresAt: "lease_expires_at", CorrelationID: "correlation_id",
	}
}

// maxIdentifier is PostgreSQL's identifier limit: a longer name would silently name another object.
const maxIdentifier = 63

func isValidIdentifier(name string) bool {
	if name == "" || len(name) > maxIdentifier {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// mapping pairs each contract name with the field that renames it.
func (s Schema) mapping() []struct{ contract, field, name string } {
	return []struct{ contract, field, name string }{
		{"id", "ID", s.ID}, {"source", "Source", s.Source},
		{"idempotency_key", "IdempotencyKey", s.IdempotencyKey},
		{"aggregate_id", "AggregateID", s.AggregateID}, {"event_type", "EventType", s.EventType},
		{"payload", "Payload", s.Payload}, {"headers", "Headers", s.Headers},
		{"state", "State", s.State}, {"consumption", "Consumption", s.Consumption},
		{"attempt", "Attempt", s.Attempt}, {"last_error", "LastError", s.LastError},
		{"scheduled_at", "ScheduledAt", s.ScheduledAt}, {"created_at", "CreatedAt", s.CreatedAt},
		{"processed_at", "ProcessedAt", s.ProcessedAt}, {"claimed_at", "ClaimedAt", s.ClaimedAt},
		{"claim_token", "ClaimToken", s.ClaimToken},
		{"lease_expires_at", "LeaseExpiresAt", s.LeaseExpiresAt},
		{"correlation_id", "CorrelationID", s.CorrelationID},
	}
}

func identifierError(field, name string) error {
	return fmt.Errorf("queuebox: invalid SQL identifier %q for Schema.%s: use letters, digits and underscores, starting with a letter or underscore, at most %d characters", name, field, maxIdentifier)
}

// quoted checks every name and returns the renaming for the contract statements (lower-case
// contract word -> quoted name) and the quoted table.
func (s Schema) quoted() (map[string]string, string, error) {
	names := map[string]string{}
	if !isValidIdentifier(s.Table) {
		return nil, "", identifierError("Table", s.Table)
	}
	table := `"` + s.Table + `"`
	if s.Namespace != "" {
		if !isValidIdentifier(s.Namespace) {
			return nil, "", identifierError("Namespace", s.Namespace)
		}
		table = `"` + s.Namespace + `".` + table
	}
	names[contractTable] = table
	used := map[string]string{}
	for _, m := range s.mapping() {
		if !isValidIdentifier(m.name) {
			return nil, "", identifierError(m.field, m.name)
		}
		if other, ok := used[strings.ToLower(m.name)]; ok {
			return nil, "", fmt.Errorf("queuebox: Schema.%s and Schema.%s both name the column %q", other, m.field, m.name)
		}
		used[strings.ToLower(m.name)] = m.field
		names[m.contract] = `"` + m.name + `"`
	}
	words, err := contractWords(names)
	if err != nil {
		return nil, "", err
	}
	for _, m := range s.mapping() {
		if lower := strings.ToLower(m.name); lower != m.contract && words[lower] {
			return nil, "", fmt.Errorf("queuebox: Schema.%s %q is a name the SQL statements already use for something else; rename the column or choose another mapping", m.field, m.name)
		}
	}
	if lower := strings.ToLower(s.Table); lower != contractTable && words[lower] {
		return nil, "", fmt.Errorf("queuebox: Schema.Table %q is a name the SQL statements already use for something else", s.Table)
	}
	return names, table, nil
}

// columnList is the quoted columns the worker reads, for the schema check at start.
func (s Schema) columnList() string {
	cols := make([]string, 0, 20)
	for _, m := range s.mapping() {
		cols = append(cols, `"`+m.name+`"`)
	}
	return strings.Join(cols, ", ")
}
