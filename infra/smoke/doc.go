// Package smoke runs built Lambda binaries under the AWS Lambda Runtime
// Interface Emulator, the same runtime API Lambda's provided.al2023 gives a
// `bootstrap`, so `make test` shows that a function's main starts, answers
// an API Gateway v2 event and how long its init takes, with no AWS account
// and no Docker. It lives in the infra module because it tests the deploy
// artifact (the bootstrap binary) rather than a handler; it does not import
// the CDK.
package smoke
