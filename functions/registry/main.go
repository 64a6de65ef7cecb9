// Command registry is the Lambda entry of the registry function: the
// /api/v1/agents routes, the key directories and the network Agent Card
// (package registryapi). It reads its environment once at start:
// TABLE_NAME (the DynamoDB table), NETWORK_PUBLIC_KEY (the network's own
// Ed25519 public key, standard base64; empty serves no network directory)
// and BASE_URL (the public URL the Agent Card names; empty takes it from
// each request).
package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"

	"github.com/a2awire/a2awire/functions/registry/registryapi"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	log := logging.New(os.Stdout, logging.JSON, slog.LevelInfo)
	if err := run(log); err != nil {
		log.Error("registry: start", "err", err)
		os.Exit(1)
	}
}

// run builds the handler from the environment and starts Lambda.
func run(log *slog.Logger) error {
	table := os.Getenv("TABLE_NAME")
	if table == "" {
		return fmt.Errorf("TABLE_NAME is not set")
	}
	o := registryapi.Options{Log: log, BaseURL: os.Getenv("BASE_URL")}
	if k := os.Getenv("NETWORK_PUBLIC_KEY"); k != "" {
		pub, err := auth.DecodePublicKey(k)
		if err != nil {
			return fmt.Errorf("NETWORK_PUBLIC_KEY: %w", err)
		}
		o.NetworkKey = pub
	}
	// NETWORK_SIGNING_KEY is the network's Ed25519 seed (standard base64),
	// which the deploy fills from its secret. The registry signs nothing
	// with it: it derives from it the key that seals discovery cursors, so
	// that every instance accepts the others' cursors. Empty keys them per
	// instance.
	if k := os.Getenv("NETWORK_SIGNING_KEY"); k != "" {
		seed, err := base64.StdEncoding.Strict().DecodeString(k)
		if err != nil || len(seed) != ed25519.SeedSize {
			return fmt.Errorf("NETWORK_SIGNING_KEY is not the standard base64 of a %d-byte Ed25519 seed", ed25519.SeedSize)
		}
		o.CursorSecret = seed
	} else {
		log.Warn("registry: NETWORK_SIGNING_KEY is not set, so discovery cursors are keyed per instance and may fail (400) when the next page reaches another instance")
	}
	client, err := dynamo.ClientFromEnv(os.Getenv)
	if err != nil {
		return fmt.Errorf("DynamoDB client: %w", err)
	}
	o.Store = dynamo.New(client, table)
	h, err := registryapi.New(o)
	if err != nil {
		return err
	}
	lambda.Start(lambdahttp.Entry(h))
	return nil
}
