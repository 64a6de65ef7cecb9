package worldhttp

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/a2awire/a2awire/shared/apierror"
)

// Query parameter bounds.
const (
	// MaxLimit bounds limit on messages and events; DefaultLimit is used
	// when it is absent.
	MaxLimit     = 100
	DefaultLimit = 50
	// MaxWait bounds an events long poll (seconds).
	MaxWait = 20
)

// query reads the query parameters of a request: each at most once; every
// failure is a 400 INVALID_REQUEST naming the parameter.
type query struct {
	v   url.Values
	err error
}

func newQuery(raw string) *query {
	v, err := url.ParseQuery(raw)
	q := &query{v: v}
	if err != nil {
		q.err = apierror.New(apierror.Invalid, "the query string is malformed")
	}
	return q
}

// get returns the one value of name, or ok=false when it is absent.
func (q *query) get(name string) (string, bool) {
	if q.err != nil {
		return "", false
	}
	vs, ok := q.v[name]
	if !ok {
		return "", false
	}
	if len(vs) > 1 {
		q.fail("query parameter %s is repeated", name)
		return "", false
	}
	return vs[0], true
}

func (q *query) fail(format string, args ...any) {
	if q.err == nil {
		q.err = apierror.New(apierror.Invalid, format, args...)
	}
}

// intIn reads an integer name in [lo, hi], def when absent.
func (q *query) intIn(name string, lo, hi, def int) int {
	s, ok := q.get(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi || strings.HasPrefix(s, "+") {
		q.fail("query parameter %s must be an integer from %d to %d", name, lo, hi)
		return def
	}
	return n
}

// boolean reads true or false.
func (q *query) boolean(name string) bool {
	s, ok := q.get(name)
	if !ok {
		return false
	}
	switch s {
	case "true":
		return true
	case "false":
		return false
	}
	q.fail("query parameter %s must be true or false", name)
	return false
}

// time reads an RFC 3339 time; zero when absent.
func (q *query) time(name string) time.Time {
	s, ok := q.get(name)
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		q.fail("query parameter %s must be an RFC 3339 time", name)
	}
	return t
}

// ulid reads an event id (a ULID); "" when absent.
func (q *query) ulid(name string) string {
	s, ok := q.get(name)
	if !ok {
		return ""
	}
	if _, err := ulid.ParseStrict(s); err != nil {
		q.fail("query parameter %s must be an event id (a ULID)", name)
		return ""
	}
	return strings.ToUpper(s)
}
