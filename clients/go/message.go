package queuebox

import (
	"encoding/json"
	"time"
)

// Message is one claimed inbox row as a handler sees it. The claim token stays inside the worker:
// a handler has no business writing the row itself.
type Message struct {
	// ID is the inbox row's id (a UUID in its text form).
	ID     string
	Source string
	// IdempotencyKey, with Source, is the identity of the message: deduplicate external work on
	// the pair.
	IdempotencyKey string
	AggregateID    *string
	EventType      *string
	// Payload is the stored JSON body.
	Payload json.RawMessage
	// Attempt is 0 on the first delivery.
	Attempt       int
	CorrelationID *string
	// Headers holds one string per header name; it is empty, never nil, when the row has none.
	Headers   map[string]string
	CreatedAt time.Time
}

// UnmarshalPayload parses the payload into target, as json.Unmarshal does.
func (m Message) UnmarshalPayload(target any) error {
	return json.Unmarshal(m.Payload, target)
}

// headersFromJSON turns the stored headers into strings. A value that is not a string (a row
// written by hand) keeps its JSON text, so nothing is silently lost.
func headersFromJSON(raw []byte) map[string]string {
	out := map[string]string{}
	var fields map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &fields) != nil {
		return out
	}
	for name, value := range fields {
		var text string
		if json.Unmarshal(value, &text) == nil {
			out[name] = text
		} else {
			out[name] = string(value)
		}
	}
	return out
}
