package main

// The README's example runs: it stores the order and completes the inbox row in one transaction,
// and returns nil when stopped.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestTheExampleStoresAnOrderAndCompletesItsRow(t *testing.T) {
	raw := os.Getenv("QB_TEST_PG_URL")
	if raw == "" {
		t.Fatal("QB_TEST_PG_URL is not set")
	}
	admin, err := sql.Open("pgx", raw)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix)
	name := "qb_example_go_" + hex.EncodeToString(suffix)
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") }()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "migrations", "postgres", "V*__*.sql"))
	if len(files) == 0 {
		t.Fatal("no migrations found")
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
			t.Fatalf("%s: %v", f, err)
		}
	}
	if _, err := db.Exec(`INSERT INTO inbox (source, idempotency_key, payload, consumption)
		VALUES ('orders', 'evt-1', '{"id": "A-1", "total": 42}', 'pull')`); err != nil {
		t.Fatal(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, u.String()) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var state string
		if err := db.QueryRow("SELECT state FROM inbox WHERE idempotency_key = 'evt-1'").Scan(&state); err != nil {
			t.Fatal(err)
		}
		if state == "processed" {
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("the row is still %s after 30 s (run: %v)", state, <-done)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var id string
	var total int
	if err := db.QueryRow("SELECT id, total FROM orders").Scan(&id, &total); err != nil {
		t.Fatal(err)
	}
	if id != "A-1" || total != 42 {
		t.Fatalf("stored order %s %d, want A-1 42", id, total)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run returned %v after the stop", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return within 20 s of the stop")
	}
}
