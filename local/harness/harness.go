package harness

import (
	"log/slog"
	"net/http"

	"github.com/a2awire/a2awire/functions/fixture-clean/clean"
	"github.com/a2awire/a2awire/functions/fixture-ledger/ledger"
	"github.com/a2awire/a2awire/functions/fixture-messy/messy"
	"github.com/a2awire/a2awire/functions/fixture-punctual/punctual"
	"github.com/a2awire/a2awire/functions/fixture-translator/llm"
	"github.com/a2awire/a2awire/functions/fixture-translator/translator"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
)

// Store is everything the functions need of storage: the union of the
// interfaces they declare. The memory, bolt and dynamo adapters satisfy it.
type Store interface {
	ledger.Store
}

// Options are the dependencies the harness hands to the functions, the
// local stand-ins for what each Lambda main builds from its environment.
type Options struct {
	Log *slog.Logger
	// Store backs the stateful functions. Nil means a fresh in-memory
	// store, so a harness built without one still serves every route.
	Store Store
	// TranslatorLLM configures the translator's model endpoint; the zero
	// value means none (the fixture answers from its dictionary). Fill it
	// with translator.EnvConfig(os.Getenv) to use the Lambda's variables.
	TranslatorLLM llm.Config
}

// Handlers builds every function's handler, keyed by function folder name.
// It is the one list of functions outside the route table; a test keeps the
// two (and the functions/ folders) in step.
func Handlers(o Options) map[string]http.Handler {
	st := o.Store
	if st == nil {
		st = memory.New()
	}
	return map[string]http.Handler{
		"fixture-clean":      clean.New(o.Log),
		"fixture-ledger":     ledger.New(o.Log, st),
		"fixture-messy":      messy.New(o.Log),
		"fixture-punctual":   punctual.New(o.Log),
		"fixture-translator": translator.New(o.Log, o.TranslatorLLM, nil),
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
