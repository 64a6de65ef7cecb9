package protocol_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/a2awire/a2awire/shared/protocol"
)

// The provider from docs/protocol.md's "Build your first provider", served by
// httptest instead of http.ListenAndServe.
func ExampleHandle() {
	type In struct {
		Text string `json:"text"`
	}
	type Out struct {
		Upper string `json:"upper"`
	}
	p := protocol.NewProvider("my-shouter")
	protocol.Handle(p, "shout", func(ctx context.Context, in In) (Out, error) {
		if in.Text == "" {
			return Out{}, protocol.Errorf(protocol.InvalidInput, "input.text is required")
		}
		return Out{Upper: strings.ToUpper(in.Text)}, nil
	})
	srv := httptest.NewServer(p)
	defer srv.Close()

	for _, body := range []string{`{"task":"shout","input":{"text":"hi"}}`, `{"task":"shout"}`} {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// duration_ms varies; show the stable prefix.
		fmt.Println(resp.StatusCode, strings.SplitN(string(b), `,"duration_ms"`, 2)[0])
	}
	// Output:
	// 200 {"output":{"upper":"HI"},"metadata":{"agent":"my-shouter","capability":"shout"
	// 400 {"error":"invalid_input","message":"input.text is required"}
}
