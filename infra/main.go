// Command infra is the a2awire CDK app: `cdk synth` / `cdk deploy` run it
// (cdk.json: "go run ."), normally through `make synth`, `make diff` and
// `make deploy` at the repository root.
//
// It deploys what the checkout contains: one Lambda per functions/* folder
// with the code `make build` wrote to build/<name>/bootstrap, every route of
// shared/routes, and the table of shared/store/schema. cdk-nag's
// AwsSolutions and Serverless packs run on every synth (stack.Nag): an
// unsuppressed finding fails it. Context values (cdk.json, or -c key=value):
//
//	stage                deployment name, default "dev"; "prod" retains data on delete
//	buildDir             where the built functions are, default <repo>/build
//	reservedConcurrency  reserved concurrency per function class (the first
//	                     word of a routed or queue/stream-fed function's
//	                     name: fixture, world, registry, webhook, agent) or
//	                     per function, the name winning, e.g.
//	                     -c reservedConcurrency=fixture=10,fixture-ledger=20.
//	                     Unset (the default): no reservation, so a new
//	                     account's low quota deploys
//	accountConcurrency   the account's Lambda concurrency quota, default 1000;
//	                     the reservations must leave 100 of it unreserved.
//	                     Every synth prints what the account must allow
//	                     (stack.PlanConcurrency)
//	alarmEmail           an address subscribed to the alarm topic (it must
//	                     confirm the subscription); unset: no subscription
//	corsOrigins          browser origins allowed to call the API,
//	                     comma-separated (or * for any); unset: no CORS
//	domainName, certificateArn  a custom domain for the API and the ACM
//	                     certificate (same region) that covers it: the
//	                     fixtures are registered and cards name
//	                     https://<domainName>/; DNS is yours (output
//	                     DomainTarget)
//	networkPublicKey     the network's Ed25519 public key, std base64: set as
//	                     NETWORK_PUBLIC_KEY on the functions that declare it
//	                     (the registry) and the owner of the fixtures, which
//	                     functions/registry-seed registers on every deploy as
//	                     a custom resource (stack.Seeding says why). Unset,
//	                     the app synthesizes without the registration and
//	                     says so, so that `make synth` needs no key.
//	networkSigningKeySecret  the Secrets Manager secret (name or ARN) holding
//	                     the network's private key (std base64 of the
//	                     Ed25519 seed), or <secret>:SecretString:<json-key>
//	                     for a key/value secret: NETWORK_SIGNING_KEY of the functions
//	                     that sign webhook deliveries (v1a) and of the
//	                     registry (its cursor key is derived from it), as a
//	                     dynamic reference resolved at deploy. Unset: v1
//	                     only, and registry cursors keyed per instance.
//
// cdk.json also sets the feature flags that the aws-cdk-lib in go.mod
// recommends (its CURRENTLY_RECOMMENDED_FLAGS, what `cdk init` writes); the
// infra tests fail when an upgrade recommends one cdk.json lacks.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/a2awire/a2awire/infra/internal/repo"
	"github.com/a2awire/a2awire/infra/stack"
	"github.com/a2awire/a2awire/shared/store/schema"
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// seedFunction is the function folder whose handler registers the fixtures
// at deploy.
const seedFunction = "registry-seed"

func main() {
	err := run()
	// Close the jsii child process before exiting either way; os.Exit would
	// skip a deferred Close.
	jsii.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
}

func run() error {
	app := awscdk.NewApp(nil)
	root, err := repo.Root(".")
	if err != nil {
		return err
	}
	folders, err := repo.Functions(root)
	if err != nil {
		return err
	}
	routeList, functions, err := stack.Inputs(folders)
	if err != nil {
		return err
	}
	buildDir := contextString(app, "buildDir", filepath.Join(root, "build"))
	if !filepath.IsAbs(buildDir) {
		buildDir = filepath.Join(root, buildDir)
	}
	// Check the binaries here: the CDK's own error for a missing asset
	// directory does not say how to make one.
	for _, fn := range functions {
		if _, err := os.Stat(filepath.Join(buildDir, fn.Name, "bootstrap")); err != nil {
			return fmt.Errorf("function %s has no built binary (%v): run `make build` first", fn.Name, err)
		}
	}
	reserved, err := stack.ParseReservedConcurrency(app.Node().TryGetContext(jsii.String("reservedConcurrency")))
	if err != nil {
		return err
	}
	account := 0
	if v := app.Node().TryGetContext(jsii.String("accountConcurrency")); v != nil {
		if account, err = stack.ParseCount(v); err != nil {
			return fmt.Errorf("accountConcurrency: %w", err)
		}
	}
	networkKey := contextString(app, "networkPublicKey", "")
	var seeding *stack.Seeding
	switch {
	case !slices.Contains(folders, seedFunction):
	case networkKey == "":
		fmt.Fprintf(os.Stderr, "infra: warning: no networkPublicKey context value, so the fixtures are not registered at deploy "+
			"and the registry serves no network key; deploy with -c networkPublicKey=<std base64 Ed25519 public key>\n")
	default:
		seeding = &stack.Seeding{Function: seedFunction, Digest: stack.CatalogDigest()}
	}
	stack.Nag(app, true)
	props := stack.Props{
		Stage:                   contextString(app, "stage", "dev"),
		Routes:                  routeList,
		Functions:               functions,
		Table:                   schema.Default(),
		AssetDir:                func(name string) string { return filepath.Join(buildDir, name) },
		ReservedConcurrency:     reserved,
		AccountConcurrency:      account,
		NetworkSigningKeySecret: contextString(app, "networkSigningKeySecret", ""),
		NetworkPublicKey:        networkKey,
		Seed:                    seeding,
		CorsOrigins:             contextList(app, "corsOrigins"),
		DomainName:              contextString(app, "domainName", ""),
		CertificateArn:          contextString(app, "certificateArn", ""),
		AlarmEmail:              contextString(app, "alarmEmail", ""),
	}
	// The pre-deploy check: what the account's Lambda concurrency quota
	// must allow (aws lambda get-account-settings shows it).
	fmt.Fprintln(os.Stderr, "infra: concurrency:", stack.PlanConcurrency(props))
	if props.AlarmEmail == "" {
		fmt.Fprintln(os.Stderr, "infra: note: no alarmEmail context value, so the alarm topic has no subscription")
	}
	if _, err := stack.New(app, props); err != nil {
		return err
	}
	app.Synth(nil)
	return nil
}

// contextList reads a list context value: a JSON array (cdk.json) or a
// comma-separated string (-c key=a,b).
func contextList(app awscdk.App, key string) []string {
	var out []string
	switch v := app.Node().TryGetContext(jsii.String(key)).(type) {
	case string:
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	case []any:
		for _, item := range v {
			out = append(out, fmt.Sprint(item))
		}
	}
	return out
}

// contextString reads a string context value (`cdk synth -c key=value` or
// cdk.json), or def when it is unset or empty.
func contextString(app awscdk.App, key, def string) string {
	if v, ok := app.Node().TryGetContext(jsii.String(key)).(string); ok && v != "" {
		return v
	}
	return def
}
