package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Expect is what a response to one invocation should show.
type Expect struct {
	// Agent is the provider's registered name; empty when unknown.
	Agent string
	// Capability is the task that was sent.
	Capability string
}

// Verify checks one response against the response rules of the conformance
// checklist: a 200 carries output and metadata (agent, capability, integer
// duration_ms) and no error; every other status carries {error, message}.
// It returns every violation found, joined, or nil.
func Verify(status int, header http.Header, body []byte, want Expect) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if ct := header.Get("Content-Type"); !IsJSON(ct) {
		fail("Content-Type is %q, not application/json", ct)
	}
	// The body must be one strict JSON value: bytes after it (which a
	// streaming decoder would leave unread), invalid UTF-8 or a repeated key
	// make buyers disagree about what was answered.
	if err := CheckJSON(body); err != nil {
		fail("body is not one strict JSON object: %v", err)
		return errors.Join(errs...)
	}
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&top); err != nil || top == nil {
		fail("body is not a JSON object")
		return errors.Join(errs...)
	}
	switch {
	case status == http.StatusOK:
		verifySuccess(top, want, fail)
	case status >= 400 && status <= 599:
		verifyError(status, header, top, fail)
	default:
		fail("status %d is neither 200 nor an error status", status)
	}
	return errors.Join(errs...)
}

func verifySuccess(top map[string]json.RawMessage, want Expect, fail func(string, ...any)) {
	if _, ok := top["error"]; ok {
		fail("a 200 response carries an error field")
	}
	var output map[string]json.RawMessage
	if raw, ok := top["output"]; !ok {
		fail("output is missing")
	} else if err := json.Unmarshal(raw, &output); err != nil || output == nil {
		fail("output is not a JSON object")
	} else if looksLikeError(output) {
		fail("a 200 response wraps an error inside output")
	}
	var meta map[string]json.RawMessage
	raw, ok := top["metadata"]
	if !ok {
		fail("metadata is missing")
		return
	}
	if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
		fail("metadata is not a JSON object")
		return
	}
	var agent, capability string
	if err := json.Unmarshal(meta["agent"], &agent); err != nil || agent == "" {
		fail("metadata.agent is missing or not a non-empty string")
	} else if want.Agent != "" && agent != want.Agent {
		fail("metadata.agent is %q, want the registered name %q", agent, want.Agent)
	}
	if err := json.Unmarshal(meta["capability"], &capability); err != nil {
		fail("metadata.capability is missing or not a string")
	} else if want.Capability != "" && capability != want.Capability {
		fail("metadata.capability is %q, want the task %q", capability, want.Capability)
	}
	if d, ok := meta["duration_ms"]; !ok {
		fail("metadata.duration_ms is missing")
	} else if !isNonNegativeInteger(d) {
		fail("metadata.duration_ms is %s, want an integer ≥ 0", d)
	}
	if t, ok := meta["tokens_used"]; ok && !isNonNegativeInteger(t) {
		fail("metadata.tokens_used is %s, want an integer ≥ 0", t)
	}
}

// looksLikeError spots a 200 whose output reports a failure: an "error"
// field that is set (not null, false or empty). A capability whose result
// legitimately describes errors can name the field otherwise.
func looksLikeError(output map[string]json.RawMessage) bool {
	raw, ok := output["error"]
	if !ok {
		return false
	}
	switch strings.TrimSpace(string(raw)) {
	case "null", "false", `""`, "{}", "[]":
		return false
	}
	return true
}

// isNonNegativeInteger accepts a plain JSON integer that fits an int64, as
// buyers decode duration_ms and tokens_used into one.
func isNonNegativeInteger(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	if s == "" || strings.ContainsAny(s, ".eE-+") {
		return false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n >= 0
}

func verifyError(status int, header http.Header, top map[string]json.RawMessage, fail func(string, ...any)) {
	var code, msg string
	if err := json.Unmarshal(top["error"], &code); err != nil || firstByte(top["error"]) != '"' || code == "" {
		fail("error is missing or not a non-empty string")
	}
	// null decodes into a Go string without complaint; the shape wants a string.
	if err := json.Unmarshal(top["message"], &msg); err != nil || firstByte(top["message"]) != '"' {
		fail("message is missing or not a string (got %s)", clipRaw(top["message"]))
	}
	if _, ok := top["output"]; ok {
		fail("an error response carries output")
	}
	if raw, ok := top["details"]; ok {
		var details []Detail
		if err := json.Unmarshal(raw, &details); err != nil {
			fail("details is not a list of {loc, msg}")
		}
	}
	if code != "" {
		if _, known := kinds[Code(code)]; known && Code(code).Status() != status {
			fail("error %q came with status %d, want %d", code, status, Code(code).Status())
		}
	}
	switch status {
	case http.StatusMethodNotAllowed:
		if !strings.Contains(header.Get("Allow"), http.MethodPost) {
			fail("405 without Allow: POST")
		}
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		if header.Get("Retry-After") == "" {
			fail("%d without Retry-After", status)
		}
	}
}

// clipRaw shows the start of a raw JSON value in a finding.
func clipRaw(raw json.RawMessage) string {
	if raw == nil {
		return "nothing"
	}
	if len(raw) > 40 {
		return string(raw[:40]) + "…"
	}
	return string(raw)
}
