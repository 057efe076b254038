package queuebox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The embedded statements are the contract's own files: a copy that differs fails here, so the
// statements of this library cannot drift from examples/pull/sql/postgresql.
func TestEmbeddedSQLIsTheContract(t *testing.T) {
	entries, err := contractFiles.ReadDir("sql/postgresql")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"claim.sql": true, "renew.sql": true, "complete.sql": true, "retry.sql": true, "dead.sql": true, "release.sql": true}
	for _, e := range entries {
		if !want[e.Name()] {
			t.Errorf("sql/postgresql/%s is not a contract statement this library runs", e.Name())
			continue
		}
		delete(want, e.Name())
		embedded, err := contractFiles.ReadFile("sql/postgresql/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		original, err := os.ReadFile(filepath.Join("..", "..", "examples", "pull", "sql", "postgresql", e.Name()))
		if err != nil {
			t.Fatalf("reading the contract file: %v", err)
		}
		if string(embedded) != string(original) {
			t.Errorf("clients/go/sql/postgresql/%s differs from examples/pull/sql/postgresql/%s: copy the contract file over it", e.Name(), e.Name())
		}
	}
	for name := range want {
		t.Errorf("sql/postgresql/%s is missing", name)
	}
}

func TestRenderingRenamesConsistentlyAndNumbersParameters(t *testing.T) {
	schema := DefaultSchema()
	schema.Namespace, schema.Table, schema.ID, schema.State = "app", "qb_inbox", "msg_id", "Status"
	names, _, err := schema.quoted()
	if err != nil {
		t.Fatal(err)
	}
	s, err := renderContract(names)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.claim.names, ","); got != "source,cand_limit,batch,lease_ms" {
		t.Errorf("claim parameters %s", got)
	}
	if got := strings.Join(s.retry.names, ","); got != "delay_ms,error,id,token" {
		t.Errorf("retry parameters %s", got)
	}
	for _, st := range []statement{s.claim, s.renew, s.complete, s.retry, s.dead, s.release} {
		if strings.Contains(st.text, ":id") || strings.Contains(st.text, "--") {
			t.Errorf("unrendered text in %s", st.text)
		}
		if !strings.Contains(st.text, `"app"."qb_inbox"`) || !strings.Contains(st.text, `"Status"`) {
			t.Errorf("names not mapped in %s", st.text)
		}
		if strings.Contains(st.text, " inbox") || strings.Contains(st.text, ".state ") {
			t.Errorf("an unmapped name is left in %s", st.text)
		}
	}
}

func TestSchemaRefusesNamesThatCannotWork(t *testing.T) {
	cases := map[string]func(*Schema){
		"invalid SQL identifier":    func(s *Schema) { s.Table = "inbox; DROP TABLE inbox" },
		"both name the column":      func(s *Schema) { s.Payload = "headers" },
		"already use for something": func(s *Schema) { s.ID = "agg" },
	}
	for want, change := range cases {
		schema := DefaultSchema()
		change(&schema)
		_, _, err := schema.quoted()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error containing %q, got %v", want, err)
		}
	}
}
