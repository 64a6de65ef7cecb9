// Command fixture-ledger is the Lambda entry of the a2awire-ledger fixture.
// It reads TABLE_NAME once at start and keeps its entries, balances and
// idempotency records in that DynamoDB table.
//
// The DynamoDB client is built from the environment Lambda sets (AWS_REGION,
// the execution role's AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/
// AWS_SESSION_TOKEN, or the container credentials endpoint SnapStart uses)
// instead of config.LoadDefaultConfig, whose shared-config, SSO, STS and
// IMDS machinery doubled the function's INIT (make bench, row 3) for
// sources Lambda never uses. AWS_ENDPOINT_URL_DYNAMODB points it elsewhere
// (DynamoDB Local in infra/smoke and make bench).
package main

import (
	"errors"
	"log/slog"
	"os"

	"github.com/a2awire/a2awire/functions/fixture-ledger/ledger"
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
	table := os.Getenv("TABLE_NAME")
	if table == "" {
		log.Error("TABLE_NAME is not set")
		os.Exit(1)
	}
	client, err := clientFromEnv(os.Getenv)
	if err != nil {
		log.Error("DynamoDB client", "err", err)
		os.Exit(1)
	}
	h := ledger.New(log, dynamo.New(client, table))
	lambda.Start(lambdahttp.Entry(h))
}

// clientFromEnv builds the DynamoDB client from the variables Lambda sets.
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
