package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/routes"
)

// The shape of a sample event: as API Gateway sends it in AWS for this
// API's host, a client address appended to x-forwarded-for, https, at a
// fixed time with a fixed request id, so regenerating changes nothing.
const (
	sampleAPI      = "a1b2c3d4e5"
	sampleHost     = sampleAPI + ".execute-api.us-east-1.amazonaws.com"
	sampleClientIP = "203.0.113.10"
	// sampleWorld names the world in {world}; other parameters get
	// sampleParam.
	sampleWorld = "demo"
	sampleParam = "sample"
)

var sampleTime = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// routeEvents is a sample event per route of the table, unsigned, as
// events/routes/<function>--<method>-<path>.json: the method (ANY is sent
// as POST, how agents invoke), the path with sample parameters and, on a
// method that carries one, the body {}. `make invoke` takes any of them;
// the harness's TestRouteSampleEvents sends each through its function's
// Lambda entry and checks the answer the route's auth kind implies.
func routeEvents() ([]File, error) {
	var out []File
	seen := map[string]bool{}
	for _, r := range routes.All() {
		if routes.Config(r.Function).Streaming {
			// A function URL's event, not API Gateway's, and an answer
			// that lasts minutes: no sample for `make invoke`.
			continue
		}
		method := r.Method
		if method == "ANY" {
			method = http.MethodPost
		}
		path := samplePath(r.Path)
		var body []byte
		switch method {
		case http.MethodPost, http.MethodPut, http.MethodPatch:
			body = []byte("{}")
		}
		req := httptest.NewRequest(method, "https://"+sampleHost+path, strings.NewReader(string(body)))
		req.RemoteAddr = sampleClientIP + ":54321"
		req.Header.Set("User-Agent", "curl/8.0")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		route, params, ok := routes.Match(method, path)
		if !ok || route.Key() != r.Key() {
			return nil, fmt.Errorf("route %s: its sample %s %s matches %s", r.Key(), method, path, route.Key())
		}
		ev := cloud.BuildEvent(req, route, params, body, sampleTime)
		ev.Headers["x-amzn-trace-id"] = "Root=1-6926a000-0123456789abcdef01234567"
		ev.RequestContext.RequestID = "sample-request-id"
		ev.RequestContext.APIID = sampleAPI
		ev.RequestContext.AccountID = "123456789012"
		raw, err := json.Marshal(ev)
		if err != nil {
			return nil, err
		}
		// Without the empty mTLS block the Go struct always carries, as
		// API Gateway sends it.
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		delete(m["requestContext"].(map[string]any), "authentication")
		raw, err = json.MarshalIndent(m, "", "  ")
		if err != nil {
			return nil, err
		}
		name := "events/routes/" + r.Function + "--" + strings.ToLower(method) + slug(r.Path) + ".json"
		if seen[name] {
			return nil, fmt.Errorf("route %s: sample file %s is another route's", r.Key(), name)
		}
		seen[name] = true
		out = append(out, File{Path: name, Content: append(raw, '\n')})
	}
	return out, nil
}

// samplePath fills a path pattern's parameters.
func samplePath(pattern string) string {
	segs := strings.Split(pattern, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			segs[i] = sampleParam
			if s == "{world}" {
				segs[i] = sampleWorld
			}
		}
	}
	return strings.Join(segs, "/")
}

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

// slug is a path pattern as a file name part: "/v0/worlds/{world}/join" →
// "-v0-worlds-world-join".
func slug(pattern string) string {
	return strings.TrimSuffix(nonWord.ReplaceAllString(strings.ToLower(pattern), "-"), "-")
}
