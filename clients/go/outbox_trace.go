package queuebox

// The trace context of an outbox row: the W3C traceparent and tracestate headers that let the
// delivery continue the caller's trace. The writer refuses what QueueBox would not read as one.

import (
	"regexp"
	"strings"
)

var (
	traceParentPattern = regexp.MustCompile(`^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}((?s:-.*))?$`)
	traceStateMember   = regexp.MustCompile(`^(?:[a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$`)
)

const (
	maxTraceStateMembers = 32
	badTraceParent       = "the traceparent is not a W3C trace context: version-traceid-parentid-flags in lowercase hexadecimal, version not ff, ids not all zeros"
	badTraceState        = "the tracestate is not a W3C tracestate: at most 32 comma-separated key=value members with distinct keys"
	loneTraceState       = "a tracestate needs a traceparent"
)

// putTraceContext puts the message's trace context in headers, in place of any header of those
// names in any letter case.
func putTraceContext(headers map[string]string, traceParent, traceState string) error {
	if traceParent == "" {
		if traceState != "" {
			return refused(loneTraceState)
		}
		return nil
	}
	for name := range headers {
		if lower := strings.ToLower(name); lower == "traceparent" || lower == "tracestate" {
			delete(headers, name)
		}
	}
	headers["traceparent"] = traceParent
	if traceState != "" {
		headers["tracestate"] = traceState
	}
	return nil
}

func validTraceParent(value string) bool {
	m := traceParentPattern.FindStringSubmatch(value)
	if m == nil {
		return false
	}
	version, traceID, parentID, rest := m[1], m[2], m[3], m[4]
	if version == "ff" || (version == "00" && rest != "") {
		return false
	}
	return strings.Trim(traceID, "0") != "" && strings.Trim(parentID, "0") != ""
}

func validTraceState(value string) bool {
	var members []string
	for _, member := range strings.Split(value, ",") {
		if member = strings.Trim(member, " \t"); member != "" {
			members = append(members, member)
		}
	}
	if len(members) > maxTraceStateMembers {
		return false
	}
	keys := make(map[string]bool, len(members))
	for _, member := range members {
		if !traceStateMember.MatchString(member) {
			return false
		}
		key := member[:strings.IndexByte(member, '=')]
		if keys[key] {
			return false
		}
		keys[key] = true
	}
	return true
}

// checkTraceHeaders checks the row's traceparent and tracestate headers (any letter case), from
// the message, the caller's headers or the hook: each must be what QueueBox reads as a trace
// context, and a tracestate needs a traceparent.
func checkTraceHeaders(headers map[string]string) error {
	var parents, states []string
	for name, value := range headers {
		switch strings.ToLower(name) {
		case "traceparent":
			parents = append(parents, value)
		case "tracestate":
			states = append(states, value)
		}
	}
	if len(parents) > 1 || (len(parents) == 1 && !validTraceParent(parents[0])) {
		return refused(badTraceParent)
	}
	if len(states) > 1 || (len(states) == 1 && !validTraceState(states[0])) {
		return refused(badTraceState)
	}
	if len(states) > 0 && len(parents) == 0 {
		return refused(loneTraceState)
	}
	return nil
}
