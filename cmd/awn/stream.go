package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/a2awire/a2awire/shared/sse"
)

// streamRetry is the wait before reopening a stream that ended without a
// retry hint.
const streamRetry = time.Second

// errNoStream is a stream that could not be opened: the caller long-polls
// instead (an older server, or API Gateway, which serves no stream route).
var errNoStream = errors.New("no event stream")

// followStream prints the world's events from its event stream (GET
// …/events/stream on base) until ctx ends, reopening it after the last id
// printed (Last-Event-ID) each time it ends. It returns the cursor it got
// to and errNoStream when a stream would not open, so that the caller
// long-polls from there: nothing is printed twice or skipped.
func (a *app) followStream(ctx context.Context, w *worldClient, base, world, cursor string) (string, error) {
	// No client timeout: a stream lasts up to its function's limit.
	client := &http.Client{Transport: w.client.Transport}
	u := strings.TrimSuffix(base, "/") + worldPath(world, "events/stream")
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return cursor, fmt.Errorf("%w: %v", errNoStream, err)
		}
		req.Header.Set("Accept", sse.ContentType)
		if cursor != "" {
			req.Header.Set("Last-Event-ID", cursor)
		}
		resp, err := client.Do(req)
		if ctx.Err() != nil {
			return cursor, nil
		}
		if err != nil {
			return cursor, fmt.Errorf("%w: %v", errNoStream, err)
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), sse.ContentType) {
			resp.Body.Close()
			return cursor, fmt.Errorf("%w: %s answered %d", errNoStream, u, resp.StatusCode)
		}
		r := sse.NewReader(resp.Body, maxResponse)
		var readErr error
		for {
			ev, err := r.Next()
			if err != nil {
				if err != io.EOF {
					readErr = err
				}
				break
			}
			id, err := a.printEvent(world, json.RawMessage(ev.Data))
			if err != nil {
				resp.Body.Close()
				return cursor, err
			}
			if id != "" {
				cursor = id
			}
		}
		resp.Body.Close()
		if ctx.Err() != nil {
			return cursor, nil
		}
		wait := r.Retry
		if wait <= 0 {
			wait = streamRetry
		}
		if readErr != nil {
			fmt.Fprintf(a.stderr, "awn: the event stream broke (%v); reopening in %s\n", readErr, wait)
		}
		if a.sleep(ctx, wait) != nil {
			return cursor, nil
		}
	}
}
