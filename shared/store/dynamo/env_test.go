package dynamo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/shared/store/dynamo"
)

func TestClientFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if _, err := dynamo.ClientFromEnv(env(map[string]string{"AWS_ACCESS_KEY_ID": "a"})); err == nil || !strings.Contains(err.Error(), "AWS_REGION") {
		t.Fatalf("no region: %v", err)
	}
	if _, err := dynamo.ClientFromEnv(env(map[string]string{"AWS_REGION": "us-east-1"})); err == nil || !strings.Contains(err.Error(), "credentials") {
		t.Fatalf("no credentials: %v", err)
	}
	c, err := dynamo.ClientFromEnv(env(map[string]string{
		"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_SESSION_TOKEN": "T",
		"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:9",
	}))
	if err != nil {
		t.Fatal(err)
	}
	o := c.Options()
	creds, err := o.Credentials.Retrieve(context.Background())
	if err != nil || creds.AccessKeyID != "AK" || creds.SecretAccessKey != "SK" || creds.SessionToken != "T" {
		t.Fatalf("credentials %+v, %v", creds, err)
	}
	if o.Region != "eu-west-1" || o.BaseEndpoint == nil || *o.BaseEndpoint != "http://127.0.0.1:9" {
		t.Fatalf("region %q endpoint %v", o.Region, o.BaseEndpoint)
	}
	c, err = dynamo.ClientFromEnv(env(map[string]string{"AWS_REGION": "us-east-1", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:9/creds"}))
	if err != nil || c.Options().Credentials == nil {
		t.Fatalf("container credentials: %v", err)
	}
}
