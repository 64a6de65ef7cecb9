// Package lambdamain is the one body of every functions/<name>/main.go:
// read the environment once, build the function's Env (JSON logs, the
// table when the function has one, the network's keys), call its builder
// outside the handler, and hand the result to lambda.Start (a streaming
// function's http.Handler to lambdaurl.Start). A builder that fails is an
// init failure: logged, exit 1, as Lambda expects. A network signing key
// that cannot be used is not: it is logged as an error and the function
// runs without it.
//
// The table is opened by a function the main passes (dynamo.FromEnv), not
// here, so a function without table access links no DynamoDB client.
package lambdamain

import (
	"errors"
	"log/slog"
	"net/http"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdaurl"

	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store"
)

// Run starts the function name built by b, with no table.
func Run(name string, b function.Builder) {
	run(name, b, nil)
}

// RunWithTable starts the function name built by b over the table open
// returns (dynamo.FromEnv: TABLE_NAME and the client's settings).
func RunWithTable[S store.Store](name string, b function.Builder, open func(getenv func(string) string) (S, error)) {
	run(name, b, func() (store.Store, error) { return open(os.Getenv) })
}

func run(name string, b function.Builder, open func() (store.Store, error)) {
	log := logging.New(os.Stdout, logging.JSON, slog.LevelInfo)
	h, err := Build(name, b, os.Getenv, log, open)
	if err != nil {
		log.Error(name+": start", "err", err)
		os.Exit(1)
	}
	lambda.Start(h)
}

// RunStream starts the streaming function name built by b, with no
// table, behind a function URL in RESPONSE_STREAM mode (lambdaurl).
func RunStream(name string, b function.StreamBuilder) {
	runStream(name, b, nil)
}

// RunStreamWithTable is RunStream over the table open returns.
func RunStreamWithTable[S store.Store](name string, b function.StreamBuilder, open func(getenv func(string) string) (S, error)) {
	runStream(name, b, func() (store.Store, error) { return open(os.Getenv) })
}

func runStream(name string, b function.StreamBuilder, open func() (store.Store, error)) {
	log := logging.New(os.Stdout, logging.JSON, slog.LevelInfo)
	h, err := Build(name, b.Builder(), os.Getenv, log, open)
	if err != nil {
		log.Error(name+": start", "err", err)
		os.Exit(1)
	}
	// Every Write of the handler goes to Lambda as it is made: lambdaurl's
	// writer is a pipe to the runtime API's chunked response.
	lambdaurl.Start(h.(http.Handler))
}

// Build is Run's work before lambda.Start: the Env from getenv, then the
// builder. open may be nil (no table).
func Build(name string, b function.Builder, getenv func(string) string, log *slog.Logger, open func() (store.Store, error)) (any, error) {
	env := function.Env{Name: name, Log: log, Getenv: getenv}
	if open != nil {
		st, err := open()
		if err != nil {
			return nil, err
		}
		env.Store = st
	}
	priv, pub, err := function.KeysFromEnv(getenv)
	var bad *function.SigningKeyError
	if errors.As(err, &bad) {
		// A bad secret must not become an init crash on every start
		// (and every stream batch failing with it): the function runs
		// without the key and says so. The deploy's registration checks
		// the same value and fails the deploy instead.
		log.Error(name+": network signing key refused; running without it (webhooks signed v1 only, registry cursors keyed per instance)", "err", err)
	} else if err != nil {
		return nil, err
	}
	env.NetworkKey, env.NetworkPublicKey = priv, pub
	return b(env)
}
