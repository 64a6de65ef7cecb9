package registryapi_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/a2awire/a2awire/functions/registry/registryapi"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// TestCursorSecretSharedByInstances: two registry functions over one
// table built with the same CursorSecret (two Lambda instances of one
// deploy) continue each other's listings; one of another secret (another
// deploy's key) answers 400.
func TestCursorSecretSharedByInstances(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	build := func(secret string) *api {
		h, err := registryapi.New(registryapi.Options{Store: st, AllowInsecureEndpoints: true, CursorSecret: []byte(secret)})
		if err != nil {
			t.Fatal(err)
		}
		return &api{t: t, entry: lambdahttp.Entry(h)}
	}
	one, two, other := build("deploy secret"), build("deploy secret"), build("another secret")
	for _, k := range []byte{21, 22, 23} {
		if r := one.do(key(k), "POST", "/api/v1/agents", registration("pager-"+string('a'+rune(k-21)), key(k), "paging")); r.status != http.StatusCreated {
			t.Fatalf("register: %d %s", r.status, r.body)
		}
	}
	r := one.do(nil, "GET", "/api/v1/agents?capability=paging&limit=1", "")
	next, _ := r.json(t)["next_cursor"].(string)
	if r.status != http.StatusOK || next == "" {
		t.Fatalf("first page: %d %s", r.status, r.body)
	}
	path := "/api/v1/agents?capability=paging&limit=1&cursor=" + url.QueryEscape(next)
	if r := two.do(nil, "GET", path, ""); r.status != http.StatusOK {
		t.Errorf("the other instance of the deploy: %d %s", r.status, r.body)
	}
	wantError(t, other.do(nil, "GET", path, ""), http.StatusBadRequest, "invalid_input")
}
