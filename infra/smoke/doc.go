// Package smoke runs every function's built Lambda binary under the AWS
// Lambda Runtime Interface Emulator, the same runtime API Lambda's
// provided.al2023 gives a `bootstrap`, so `make test` shows that each main
// reads its environment, starts, answers its events through one warm
// runtime and how long its init takes, with no AWS account and no Docker.
//
// What each function is sent comes from the route table (shared/routes):
// a request per route built from its row (method, path with sample
// parameters, signed as its auth kind needs) and a sample event per
// trigger, so a new route or function runs here with no edit; a trigger or
// auth kind the test cannot drive fails it by name. Hand-written cases add
// the answers a main must give for the system's must-shows. Mains with
// table access run against DynamoDB Local, one server for the package and
// a table per function, pointed there only by the environment
// (TABLE_NAME, AWS_ENDPOINT_URL_DYNAMODB, region, dummy credentials), so
// the binary is the one Lambda runs. It lives in the infra module because
// it tests the deploy artifact (the bootstrap binary) rather than a
// handler; it does not import the CDK.
package smoke
