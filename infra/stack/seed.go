package stack

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/a2awire/a2awire/shared/fixtures"
	"github.com/a2awire/a2awire/shared/fixtures/seed"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// NetworkPublicKeyEnv is the variable that carries the network's public
// key (std base64). The deploy fills it on every function whose Env
// declares it (with an empty value) in the function table.
const NetworkPublicKeyEnv = "NETWORK_PUBLIC_KEY"

// BaseURLEnv is the variable the functions that serve an Agent Card read
// the network's public URL from. The deploy fills it with the HTTP API's
// stage URL on every function whose Env declares it (with an empty value):
// a card names that URL, never the Host a request carried.
const BaseURLEnv = "BASE_URL"

// NetworkSigningKeyEnv is the variable the functions that sign webhook
// deliveries (v1a) read the network's private key from
// (function.NetworkKeyEnv).
const NetworkSigningKeyEnv = "NETWORK_SIGNING_KEY"

// SigningKeyReference is the CloudFormation dynamic reference to the
// signing key named by spec (context networkSigningKeySecret): a secret's
// name or ARN, whose whole SecretString is the key, or
// "<secret>:SecretString:<json-key>" for a secret stored as key/value, whose
// member json-key is (CloudFormation's own syntax, which may go on with
// ":<version-stage>:<version-id>" to pin a version). A whole SecretString
// that is a JSON object is read by the functions too
// (function.ParseNetworkKey), so the console's default form works either way.
func SigningKeyReference(spec string) string {
	secret, tail, _ := ParseSigningKeySecret(spec)
	ref := "{{resolve:secretsmanager:" + secret + ":SecretString"
	if tail != "" {
		ref += ":" + tail
	}
	return ref + "}}"
}

// ParseSigningKeySecret splits spec into the secret's name or ARN and what
// follows ":SecretString:" (json-key[:version-stage[:version-id]]).
func ParseSigningKeySecret(spec string) (secret, tail string, err error) {
	secret = spec
	if i := strings.LastIndex(spec, ":SecretString"); i >= 0 {
		rest := spec[i+len(":SecretString"):]
		if rest == "" || rest[0] == ':' {
			secret = spec[:i]
			if rest != "" {
				if tail = rest[1:]; tail == "" || tail[0] == ':' {
					return "", "", fmt.Errorf("networkSigningKeySecret %q: the JSON key after \":SecretString:\" is empty", spec)
				}
			}
		}
	}
	switch {
	case secret == "":
		return "", "", fmt.Errorf("networkSigningKeySecret %q: no secret name or ARN", spec)
	case strings.ContainsAny(spec, "{} \t\n\"'"):
		return "", "", fmt.Errorf("networkSigningKeySecret %q: braces, quotes or spaces", spec)
	case strings.Count(tail, ":") > 2:
		return "", "", fmt.Errorf("networkSigningKeySecret %q: want <secret>[:SecretString:<json-key>[:<version-stage>:<version-id>]]", spec)
	}
	return secret, tail, nil
}

// SeedServiceTimeoutS is how long CloudFormation waits for the
// registration's answer: the seed function's 20 s timeout, and a retry of
// Lambda's asynchronous invocation after a failure, with room to spare.
const SeedServiceTimeoutS = 180

// SeedResourceType is the CloudFormation type of the fixtures' registration.
const SeedResourceType = "Custom::FixtureRegistrations"

// Seeding registers the fixtures at deploy, and creates the world lobby,
// both owned by the network key. It is a
// custom resource rather than a step `make deploy` runs after `cdk deploy`:
// the stack already knows the stage URL and the table, so the registration is
// part of the deploy itself (a plain `cdk deploy`, a pipeline or a rollback
// included), it runs inside AWS with the function's narrow role instead of
// the deployer's credentials, and a failure (a fixture name held by another
// key) fails the deploy with the reason in CloudFormation's events instead of
// after a "successful" deploy.
type Seeding struct {
	// Function runs as the custom resource's handler (seed.CustomResource);
	// it must be one of Props.Functions with read-write table access.
	Function string
	// Digest changes whenever what is registered changes (the fixture
	// catalog; see CatalogDigest): a custom resource is only invoked again
	// when a property changes.
	Digest string
}

// CatalogDigest is a digest of the fixture catalog, for Seeding.Digest.
func CatalogDigest() string {
	b, err := json.Marshal(fixtures.All())
	if err != nil {
		panic(err) // plain data always marshals
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// addSeeding adds the custom resource that registers the fixtures below
// the stage's URL, owned by the network key, once the table exists and the
// function may write to it.
func (s *Stack) addSeeding(sd Seeding, networkKey string) awscdk.CustomResource {
	fn := s.Functions[sd.Function]
	cr := awscdk.NewCustomResource(s.Stack, jsii.String("FixtureRegistrations"), &awscdk.CustomResourceProps{
		ServiceToken: fn.FunctionArn(),
		ResourceType: jsii.String(SeedResourceType),
		Properties: &map[string]any{
			seed.PropAPIURL:           s.publicURL,
			seed.PropNetworkPublicKey: networkKey,
			"Catalog":                 sd.Digest,
			// The function also creates the world lobby, owned by the
			// network key; naming it here sends a stack deployed before
			// that an Update, which creates it.
			seed.PropLobby: seed.LobbyWorld,
			// Which secret the function checks (its name, never its
			// value): naming another one sends an Update, which checks it.
			"SigningKeySecret": s.signingSecret,
		},
		// CloudFormation's default wait for an answer is an hour: a
		// function that fails at init, or never answers, would hold the
		// deploy (and its rollback) that long.
		ServiceTimeout: awscdk.Duration_Seconds(jsii.Number(SeedServiceTimeoutS)),
	})
	// Explicit, as the function's ARN alone would not wait for the table
	// or for the role's grants on it.
	cr.Node().AddDependency(s.Table, s.Roles[sd.Function])
	return cr
}

// validateSeeding checks the seeding inputs against the functions.
func validateSeeding(p Props, fns map[string]routes.Function, access map[string]routes.Access) []string {
	var errs []string
	if p.NetworkPublicKey != "" {
		if _, err := seed.ParsePublicKey(p.NetworkPublicKey); err != nil {
			errs = append(errs, fmt.Sprintf("network public key: %v", err))
		}
	}
	if p.Seed == nil {
		return errs
	}
	if p.NetworkPublicKey == "" {
		errs = append(errs, "seeding the fixtures needs the network public key (-c networkPublicKey=<base64>)")
	}
	if _, ok := fns[p.Seed.Function]; !ok {
		errs = append(errs, fmt.Sprintf("seed function %q is not among the functions", p.Seed.Function))
	} else if access[p.Seed.Function] != routes.ReadWrite {
		errs = append(errs, fmt.Sprintf("seed function %q needs read-write table access, has %s", p.Seed.Function, access[p.Seed.Function]))
	}
	return errs
}
