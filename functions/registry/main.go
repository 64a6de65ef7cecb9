// Command registry is the Lambda entry of the registry function: the
// /api/v1/agents routes, the key directories and the network Agent Card
// (package registryapi). It reads its environment once at start:
// TABLE_NAME (the DynamoDB table), NETWORK_PUBLIC_KEY (the network's own
// Ed25519 public key, standard base64; empty serves no network directory)
// and BASE_URL (the public URL the Agent Card names; empty takes it from
// each request).
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/a2awire/a2awire/functions/registry/registryapi"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
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
	client, err := clientFromEnv(os.Getenv)
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

// clientFromEnv builds the DynamoDB client from the variables Lambda sets:
// AWS_REGION, and the role's keys or the container credentials endpoint.
func clientFromEnv(getenv func(string) string) (*dynamodb.Client, error) {
	region := getenv("AWS_REGION")
	if region == "" {
		return nil, errors.New("AWS_REGION is not set")
	}
	var creds aws.CredentialsProvider
	switch {
	case getenv("AWS_ACCESS_KEY_ID") != "":
		creds = credentials.NewStaticCredentialsProvider(getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"), getenv("AWS_SESSION_TOKEN"))
	case getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI") != "":
		creds = aws.NewCredentialsCache(endpointcreds.New(getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI"), func(o *endpointcreds.Options) {
			o.AuthorizationToken = getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN")
		}))
	default:
		return nil, errors.New("no AWS credentials in the environment (AWS_ACCESS_KEY_ID or AWS_CONTAINER_CREDENTIALS_FULL_URI)")
	}
	o := dynamodb.Options{Region: region, Credentials: creds}
	if ep := getenv("AWS_ENDPOINT_URL_DYNAMODB"); ep != "" {
		o.BaseEndpoint = aws.String(ep)
	}
	return dynamodb.New(o), nil
}
