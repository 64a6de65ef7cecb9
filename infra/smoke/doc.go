// Package smoke runs every function's built Lambda binary under the AWS
// Lambda Runtime Interface Emulator, the same runtime API Lambda's
// provided.al2023 gives a `bootstrap`, so `make test` shows that each main
// (every functions/* folder; a folder without a case fails the test) reads
// its environment, starts, answers API Gateway v2 events through one warm
// runtime and how long its init takes, with no AWS account and no Docker.
// The ledger's main runs against DynamoDB Local, pointed there only by the
// environment (TABLE_NAME, AWS_ENDPOINT_URL_DYNAMODB, region, dummy
// credentials), so the binary is the one Lambda runs. It lives in the infra
// module because it tests the deploy artifact (the bootstrap binary) rather
// than a handler; it does not import the CDK.
package smoke
