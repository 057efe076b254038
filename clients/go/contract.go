package queuebox

import (
	"embed"
	"fmt"
	"strings"
)

// The statements of the pull SQL contract. The files under sql/postgresql are byte-for-byte the
// files of examples/pull/sql/postgresql in the QueueBox repository (contract_test.go fails when
// they differ), so this library runs the contract itself, not a retelling of it.
//
//go:embed sql/postgresql/*.sql
var contractFiles embed.FS

// statement is one contract file rendered for a schema: positional SQL and the parameter names
// in position order (each name once).
type statement struct {
	text  string
	names []string
}

// args returns the values in the statement's parameter order.
func (s statement) args(values map[string]any) []any {
	out := make([]any, len(s.names))
	for i, name := range s.names {
		out[i] = values[name]
	}
	return out
}

type statements struct {
	claim, renew, complete, retry, dead, release statement
}

// The contract's own table name and column names, in the order of Schema's fields.
const contractTable = "inbox"

// renderContract reads each contract file and renames its table and columns to the schema's
// quoted names, turning :name parameters into $n positions.
func renderContract(names map[string]string) (statements, error) {
	var s statements
	targets := []struct {
		file string
		into *statement
	}{
		{"claim", &s.claim}, {"renew", &s.renew}, {"complete", &s.complete},
		{"retry", &s.retry}, {"dead", &s.dead}, {"release", &s.release},
	}
	for _, t := range targets {
		raw, err := contractFiles.ReadFile("sql/postgresql/" + t.file + ".sql")
		if err != nil {
			return s, fmt.Errorf("queuebox: reading the embedded %s.sql: %w", t.file, err)
		}
		*t.into = renderSQL(string(raw), names)
	}
	return s, nil
}

// contractWords is every bare word of the contract statements that is not a table or column name
// the schema maps (aliases, CTE names, keywords, functions). A mapped name equal to one of them
// could capture another reference, so the schema refuses it.
func contractWords(mapped map[string]string) (map[string]bool, error) {
	words := map[string]bool{}
	entries, err := contractFiles.ReadDir("sql/postgresql")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		raw, err := contractFiles.ReadFile("sql/postgresql/" + e.Name())
		if err != nil {
			return nil, err
		}
		scanSQL(string(raw), func(kind tokenKind, text string) string {
			if kind == tokenWord {
				if _, ok := mapped[strings.ToLower(text)]; !ok {
					words[strings.ToLower(text)] = true
				}
			}
			return text
		})
	}
	return words, nil
}

type tokenKind int

const (
	tokenOther tokenKind = iota
	tokenWord
	tokenParam
)

// scanSQL walks SQL text and calls emit for each bare word and each :name parameter; what emit
// returns replaces the token. Text inside single quotes and double quotes is copied untouched,
// `::` casts are kept, and `--` comments are dropped.
func scanSQL(sql string, emit func(kind tokenKind, text string) string) string {
	var out strings.Builder
	out.Grow(len(sql))
	isWordStart := func(c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
	isWordChar := func(c byte) bool { return isWordStart(c) || (c >= '0' && c <= '9') }
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(sql) && sql[j] != c {
				j++
			}
			j = min(j+1, len(sql))
			out.WriteString(sql[i:j])
			i = j
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == ':' && i+1 < len(sql) && sql[i+1] == ':':
			out.WriteString("::")
			i += 2
		case c == ':' && i+1 < len(sql) && (sql[i+1] == '_' || (sql[i+1] >= 'a' && sql[i+1] <= 'z')):
			j := i + 1
			for j < len(sql) && isWordChar(sql[j]) {
				j++
			}
			out.WriteString(emit(tokenParam, sql[i+1:j]))
			i = j
		case isWordStart(c):
			j := i
			for j < len(sql) && isWordChar(sql[j]) {
				j++
			}
			out.WriteString(emit(tokenWord, sql[i:j]))
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(sql) && isWordChar(sql[j]) {
				j++
			}
			out.WriteString(sql[i:j])
			i = j
		default:
			out.WriteByte(c)
			i++
		}
	}
	return out.String()
}

// renderSQL renames the mapped words (lower-case contract name -> quoted SQL) and numbers the
// parameters. Renaming every occurrence of a word, aliases that reuse a column name included, is
// a consistent renaming, so the statement keeps its meaning.
func renderSQL(sql string, names map[string]string) statement {
	var params []string
	text := scanSQL(sql, func(kind tokenKind, word string) string {
		switch kind {
		case tokenParam:
			for i, p := range params {
				if p == word {
					return fmt.Sprintf("$%d", i+1)
				}
			}
			params = append(params, word)
			return fmt.Sprintf("$%d", len(params))
		case tokenWord:
			if quoted, ok := names[strings.ToLower(word)]; ok {
				return quoted
			}
		}
		return word
	})
	return statement{text: strings.TrimSpace(text), names: params}
}
