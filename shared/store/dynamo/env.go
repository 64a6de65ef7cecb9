package dynamo

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// ClientFromEnv builds a DynamoDB client from the variables Lambda sets:
// AWS_REGION, and the execution role's AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN or the container credentials
// endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI, as SnapStart uses).
// AWS_ENDPOINT_URL_DYNAMODB points it elsewhere (DynamoDB Local under the
// emulator and in make bench).
//
// Lambda mains use it instead of config.LoadDefaultConfig, whose
// shared-config, SSO, STS and IMDS machinery doubled a function's INIT
// (make bench, cold-start row) for credential sources Lambda never uses.
func ClientFromEnv(getenv func(string) string) (*dynamodb.Client, error) {
	region := getenv("AWS_REGION")
	if region == "" {
		return nil, errors.New("dynamo: AWS_REGION is not set")
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
		return nil, errors.New("dynamo: no AWS credentials in the environment (AWS_ACCESS_KEY_ID or AWS_CONTAINER_CREDENTIALS_FULL_URI)")
	}
	o := dynamodb.Options{Region: region, Credentials: creds}
	if ep := getenv("AWS_ENDPOINT_URL_DYNAMODB"); ep != "" {
		o.BaseEndpoint = aws.String(ep)
	}
	return dynamodb.New(o), nil
}

// FromEnv is the table store of a Lambda main: the table TABLE_NAME
// (required) through ClientFromEnv's client.
func FromEnv(getenv func(string) string) (*Store, error) {
	table := getenv("TABLE_NAME")
	if table == "" {
		return nil, errors.New("TABLE_NAME is not set")
	}
	client, err := ClientFromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("DynamoDB client: %w", err)
	}
	return New(client, table), nil
}
