package harness

import (
	"log/slog"
	"net/http"

	"github.com/a2awire/a2awire/functions/fixture-punctual/punctual"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
)

// Options are the dependencies the harness hands to the functions, the
// local stand-ins for what each Lambda main builds from its environment.
type Options struct {
	Log *slog.Logger
}

// Handlers builds every function's handler, keyed by function folder name.
// It is the one list of functions outside the route table; a test keeps the
// two (and the functions/ folders) in step.
func Handlers(o Options) map[string]http.Handler {
	return map[string]http.Handler{
		"fixture-punctual": punctual.New(o.Log),
	}
}

// New returns the gateway over every function, each wrapped for API
// Gateway v2 events exactly as its Lambda main wraps it.
func New(o Options) (*Gateway, error) {
	entries := map[string]Entry{}
	for name, h := range Handlers(o) {
		entries[name] = httpadapter.NewV2(h).ProxyWithContext
	}
	return NewGateway(entries, o.Log)
}
