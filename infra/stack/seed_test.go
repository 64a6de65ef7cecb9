package stack_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/infra/stack"
	"github.com/a2awire/a2awire/shared/fixtures/seed"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// Extra inputs for the seeding: the custom resource's handler (no routes,
// read-write) and a function that declares the network key variable.
var (
	seeder = routes.Function{Name: "test-seed", MemoryMB: 128, TimeoutSeconds: 60, Table: routes.ReadWrite}
	keyed  = routes.Function{Name: "test-keyed", MemoryMB: 128, TimeoutSeconds: 10,
		Env: map[string]string{stack.NetworkPublicKeyEnv: ""}}
)

func networkKey(t *testing.T) string {
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pub)
}

// TestSeededStack deploys the fixtures' registration as a custom resource
// and checks its wiring, its function's grants and cdk-nag.
func TestSeededStack(t *testing.T) {
	props := checkoutProps(t, "dev")
	props.Functions = append(props.Functions, seeder, keyed)
	key := networkKey(t)
	props.NetworkPublicKey = key
	// A key/value secret named with its member, a custom domain, CORS and
	// an alarm address: every optional context value at once.
	props.NetworkSigningKeySecret = "a2awire/network-signing-key:SecretString:seed"
	props.Seed = &stack.Seeding{Function: seeder.Name, Digest: stack.CatalogDigest()}
	props.DomainName, props.CertificateArn = "api.a2awire.example", "arn:aws:acm:eu-west-1:123456789012:certificate/abc"
	props.CorsOrigins = []string{"https://app.a2awire.example"}
	props.AlarmEmail = "ops@a2awire.example"
	s := synth(t, props)
	checkCommon(t, s)

	fnID := s.logicalID(t, s.stack.Functions[seeder.Name])
	tableID := s.logicalID(t, s.stack.Table)
	t.Run("custom resource", func(t *testing.T) {
		checkAssertion(t, "one registration resource", func() {
			s.template.ResourceCountIs(jsii.String(stack.SeedResourceType), jsii.Number(1))
		})
		checkAssertion(t, "its handler, the API URL, the key, the catalog and the lobby", func() {
			s.template.HasResourceProperties(jsii.String(stack.SeedResourceType), map[string]any{
				"ServiceToken":            map[string]any{"Fn::GetAtt": []any{fnID, "Arn"}},
				seed.PropNetworkPublicKey: key,
				"Catalog":                 stack.CatalogDigest(),
				seed.PropLobby:            seed.LobbyWorld,
			})
		})
		checkAssertion(t, "depends on the table", func() {
			s.template.HasResource(jsii.String(stack.SeedResourceType), map[string]any{
				"DependsOn": assertions.Match_ArrayWith(&[]any{tableID}),
			})
		})
		checkAssertion(t, "a service timeout and the secret's name", func() {
			s.template.HasResourceProperties(jsii.String(stack.SeedResourceType), map[string]any{
				"ServiceTimeout":   assertions.Match_AnyValue(),
				"SigningKeySecret": props.NetworkSigningKeySecret,
			})
		})
		// The fixtures are registered below the custom domain.
		for _, r := range s.ofType(stack.SeedResourceType) {
			if got := r.Properties[seed.PropAPIURL]; got != "https://api.a2awire.example/" {
				t.Errorf("%s = %v, want the custom domain's URL", seed.PropAPIURL, got)
			}
		}
	})
	t.Run("custom domain", func(t *testing.T) {
		checkAssertion(t, "domain and mapping", func() {
			s.template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::DomainName"), map[string]any{
				"DomainName": "api.a2awire.example",
				"DomainNameConfigurations": []any{map[string]any{
					"CertificateArn": props.CertificateArn, "EndpointType": "REGIONAL", "SecurityPolicy": "TLS_1_2"}},
			})
			s.template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::ApiMapping"), map[string]any{
				"ApiId": map[string]any{"Ref": s.logicalID(t, s.stack.API)}, "Stage": "$default",
			})
			s.template.HasOutput(jsii.String("PublicUrl"), map[string]any{"Value": "https://api.a2awire.example/"})
			s.template.HasOutput(jsii.String("DomainTarget"), assertions.Match_AnyValue())
		})
		checkAssertion(t, "cards name the domain", func() {
			s.template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
				"Description": "a2awire dev world-card",
				"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{stack.BaseURLEnv: "https://api.a2awire.example/"})},
			})
		})
	})
	t.Run("CORS", func(t *testing.T) {
		checkAssertion(t, "cors configuration", func() {
			s.template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Api"), map[string]any{
				"CorsConfiguration": assertions.Match_ObjectLike(&map[string]any{
					"AllowOrigins":  []any{"https://app.a2awire.example"},
					"AllowHeaders":  assertions.Match_ArrayWith(&[]any{"Content-Type", "Signature", "Signature-Input"}),
					"ExposeHeaders": assertions.Match_ArrayWith(&[]any{"Retry-After"}),
				}),
			})
		})
	})
	t.Run("seed function has table read-write and no more", func(t *testing.T) {
		sts := s.policyStatements(s.logicalID(t, s.stack.Roles[seeder.Name]))
		if got, want := dynamoActions(sts), sorted(readActions, writeActions); !slices.Equal(got, want) {
			t.Errorf("dynamodb actions %v, want %v", got, want)
		}
		for _, st := range sts {
			for _, a := range st.Actions {
				if !strings.HasPrefix(a, "dynamodb:") && !strings.HasPrefix(a, "logs:") {
					t.Errorf("seed function may also %s", a)
				}
			}
		}
	})
	t.Run("the signing key secret reaches the functions that sign deliveries", func(t *testing.T) {
		ref := stack.SigningKeyReference(props.NetworkSigningKeySecret)
		if ref != "{{resolve:secretsmanager:a2awire/network-signing-key:SecretString:seed}}" {
			t.Fatalf("reference %q", ref)
		}
		// The registration gets it too, to check it.
		for _, fn := range []string{"webhook-deliver", "webhook-retry", "world-ping", seeder.Name} {
			checkAssertion(t, fn+" env", func() {
				s.template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
					"Description": "a2awire dev " + fn,
					"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{stack.NetworkSigningKeyEnv: ref})},
				})
			})
		}
	})
	t.Run("network key reaches the functions that declare it", func(t *testing.T) {
		checkAssertion(t, "test-keyed env", func() {
			s.template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
				"Description": "a2awire dev test-keyed",
				"Environment": map[string]any{"Variables": map[string]any{stack.NetworkPublicKeyEnv: key}},
			})
		})
	})
}

func TestSeedingValidation(t *testing.T) {
	base := func() stack.Props {
		p := checkoutProps(t, "dev")
		p.Functions = append(p.Functions, seeder)
		p.NetworkPublicKey = networkKey(t)
		p.Seed = &stack.Seeding{Function: seeder.Name, Digest: "d"}
		p.AssetDir = func(string) string { return t.TempDir() }
		return p
	}
	for _, c := range []struct {
		name   string
		change func(*stack.Props)
		want   string
	}{
		{"no key", func(p *stack.Props) { p.NetworkPublicKey = "" }, "needs the network public key"},
		{"bad key", func(p *stack.Props) { p.NetworkPublicKey = "AAAA" }, "network public key: 3 bytes"},
		{"unknown function", func(p *stack.Props) { p.Seed.Function = "nope" }, `seed function "nope" is not among`},
		{"read-only function", func(p *stack.Props) { p.Functions[len(p.Functions)-1].Table = routes.ReadOnly }, "needs read-write"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := base()
			c.change(&p)
			_, err := stack.New(nil, p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}
