//go:build unix

package smoke

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2awire/a2awire/infra/internal/repo"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/capture"
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/aws/aws-lambda-go/events"
)

// Bounds on each step, so a hung build, emulator or function fails the test
// instead of the whole `go test` timeout.
const (
	buildTimeout  = 10 * time.Minute
	startTimeout  = 15 * time.Second
	invokeTimeout = 30 * time.Second
	reportTimeout = 10 * time.Second
	stopTimeout   = 5 * time.Second
)

// invocation is one event sent to a function under the emulator and what
// its response must carry.
type invocation struct {
	// what names the invocation in failures and logs.
	what string
	// method, path and body make an API Gateway v2 request on the route of
	// the table that matches them.
	method, path, body string
	// header holds request headers as the event carries them (lower-case
	// names, values exactly as sent: API Gateway joins repeated lines with
	// commas).
	header map[string]string
	// key signs the request when it is sent (nil: unsigned): a signature
	// lives 300 s, longer than a case waits but not than the whole run.
	key ed25519.PrivateKey
	// status is the status the response must have (0: respond checks it).
	status int
	// replayed is whether the response must carry X-A2AWire-Replayed: true.
	replayed bool
	// sameAs is the 1-based number of an earlier invocation of the same
	// function whose response body this one must repeat byte for byte (a
	// replay).
	sameAs int
	// check inspects the decoded JSON body of a fixture agent's answer.
	check func(t *testing.T, body map[string]any)
	// respond, when set, inspects the whole API Gateway response instead
	// of status, replayed and check.
	respond func(t *testing.T, out events.APIGatewayV2HTTPResponse)
	// event, when set, is sent instead of an API Gateway request (a
	// trigger's or a custom resource's event), and checkRaw inspects the
	// raw response.
	event    func(t *testing.T) any
	checkRaw func(t *testing.T, raw []byte)
}

// name is how failures and logs name inv.
func (inv invocation) name() string {
	if inv.what != "" {
		return inv.what
	}
	return inv.method + " " + inv.path
}

// smokeTable is the DynamoDB Local table one function's main is pointed at.
type smokeTable struct {
	name     string
	endpoint string
	store    store.Store
}

// local is the package's one DynamoDB Local: each function gets its own
// table on it, so the functions' cases cannot see each other's writes.
var local *dynamolocal.Server

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
}

// TestEmulator builds every function for the host and invokes each under the
// emulator with the invocations derived from the route table (see
// derive_test.go) followed by the function's hand-written ones
// (cases_test.go), through one warm runtime. The binaries are built like
// `make build` builds them for Lambda (CGO_ENABLED=0, -tags lambda.norpc,
// -trimpath) but for this machine's architecture, since the emulator runs
// them natively.
func TestEmulator(t *testing.T) {
	root, err := repo.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	rie := filepath.Join(root, ".tools", "aws-lambda-rie")
	if _, err := os.Stat(rie); err != nil {
		t.Fatalf("Lambda runtime interface emulator not found (%v): run make tools", err)
	}
	folders, err := repo.Functions(root)
	if err != nil {
		t.Fatal(err)
	}
	// Every folder is a deployed function, and every function the table
	// names has a folder: the table is what the cases come from.
	if names := routes.Functions(); !slices.Equal(folders, names) {
		t.Fatalf("functions/ folders %v != route table functions %v: every Lambda main runs under the emulator, from the table", folders, names)
	}
	// Every function's invocations, worked out before anything starts, so
	// a function the table gives no way to invoke fails at once.
	plans := map[string][]invocation{}
	for _, name := range folders {
		invs, err := derive(name)
		if err != nil {
			t.Error(err)
			continue
		}
		if len(invs) == 0 && handWritten[name] == nil {
			t.Errorf("function %s has no route, no trigger and no hand-written case: nothing would run its main", name)
		}
		plans[name] = invs
	}
	if t.Failed() {
		t.FailNow()
	}
	bins := buildAll(t, root, folders)
	for _, name := range folders {
		// One function at a time: on a loaded machine two mains sharing
		// DynamoDB Local made a world write outlast its budget (503), and
		// the invocations take seconds in all next to the build.
		t.Run(name, func(t *testing.T) {
			var (
				env []string
				tab *smokeTable
			)
			if routes.TableAccess(name) != routes.NoTable {
				tab = newTable(t, name)
				env = tableEnv(tab)
			}
			invs := plans[name]
			if extra := handWritten[name]; extra != nil {
				// Hand-written ones first: they expect the seeded state,
				// which the derived requests may change (a leave, a webhook).
				invs = append(extra(t, tab), invs...)
			}
			em := start(t, rie, bins[name], routes.Config(name), append(sampleEnv(routes.Config(name)), env...))
			var bodies []string
			for i, inv := range invs {
				body := em.invoke(t, inv)
				bodies = append(bodies, body)
				if inv.sameAs > 0 && body != bodies[inv.sameAs-1] {
					t.Errorf("invoke %d: body %s, want invoke %d's %s", i+1, body, inv.sameAs, bodies[inv.sameAs-1])
				}
				report := em.waitReport(t, i+1)
				cold := initDuration.FindStringSubmatch(report)
				switch {
				case i == 0 && cold == nil:
					t.Errorf("first invoke: no Init Duration in %q", report)
				case i == 0:
					// The REPORT line's Init Duration only times the emulator
					// handing the init to its core, which starts the runtime
					// asynchronously; its "INIT REPORT" log line times what
					// Lambda bills as init: bootstrap start to its first
					// /runtime/invocation/next.
					rt := runtimeInit.FindStringSubmatch(em.out.String())
					if rt == nil {
						t.Errorf("first invoke: no INIT REPORT line from the emulator")
						break
					}
					t.Logf("%s: init %s ms (bootstrap start to first /next; REPORT says Init Duration %s ms) on %s/%s",
						name, rt[1], cold[1], runtime.GOOS, runtime.GOARCH)
				case cold != nil:
					t.Errorf("invoke %d initialized the runtime again: %q", i+1, report)
				}
				if d := duration.FindStringSubmatch(report); d != nil {
					t.Logf("%s: invoke %d %s -> Duration %s ms", name, i+1, inv.name(), d[1])
				}
			}
		})
	}
	// The functions that read the network's signing key, started with it
	// in the forms a Secrets Manager secret hands over.
	for _, name := range folders {
		if _, ok := routes.Config(name).Env[function.NetworkKeyEnv]; ok {
			t.Run(name+"/signing-key-secret", func(t *testing.T) { checkSigningKeyForms(t, rie, bins[name], name, plans[name]) })
		}
	}
}

// checkSigningKeyForms starts a key-using function with NETWORK_SIGNING_KEY
// as a dynamic reference without a JSON key resolves a key/value secret
// (the whole SecretString, a JSON object) and checks that it starts and
// answers its first invocation with the key taken; then with a JSON object
// it cannot pick the seed from, and checks that it still starts and
// answers, saying it runs without the key: never an init crash.
func checkSigningKeyForms(t *testing.T, rie, bin, name string, invs []invocation) {
	seed := base64.StdEncoding.EncodeToString(smokeNetwork.Seed())
	for _, c := range []struct {
		form    string
		value   string
		refused bool
	}{
		{"key/value secret, member seed", `{"seed":"` + seed + `"}`, false},
		{"key/value secret, one member of another name", `{"a2awire-network": "` + seed + `"}`, false},
		{"key/value secret, no member to pick", `{"user":"x","password":"y"}`, true},
	} {
		t.Run(c.form, func(t *testing.T) {
			var env []string
			var tab *smokeTable
			if routes.TableAccess(name) != routes.NoTable {
				tab = newTable(t, name)
				env = tableEnv(tab)
			}
			first := invs
			if extra := handWritten[name]; extra != nil {
				first = append(extra(t, tab), first...)
			}
			if len(first) == 0 {
				t.Fatalf("%s: no invocation to run", name)
			}
			env = append(append(sampleEnv(routes.Config(name)), env...), function.NetworkKeyEnv+"="+c.value)
			em := start(t, rie, bin, routes.Config(name), env)
			em.invoke(t, first[0])
			report := em.waitReport(t, 1)
			out := em.out.String()
			if strings.Contains(out, "Runtime.ExitError") || strings.Contains(report, "Runtime.ExitError") {
				t.Errorf("%s exited at init with %s", name, c.form)
			}
			if refused := strings.Contains(out, "network signing key refused"); refused != c.refused {
				t.Errorf("%s with %s: key refused %v, want %v", name, c.form, refused, c.refused)
			}
		})
	}
}

// newTable creates a fresh table for one function on the package's DynamoDB
// Local with the real schema (dynamo.CreateTable), holding the lobby owned
// by smokeOwner that smokeMember and derivedMember have joined and the
// agent smokeAgent registered with smokeOwner's key, so every route naming
// a world or an agent reaches one.
func newTable(t *testing.T, function string) *smokeTable {
	t.Helper()
	client, name := dynamolocal.NewTable(t, local)
	tab := &smokeTable{name: name, endpoint: local.Endpoint(), store: dynamo.New(client, name)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := world.New(tab.store)
	if _, _, err := w.PutWorld(ctx, world.Manifest{ID: sampleWorld, Name: "Lobby"}, smokePub(smokeOwner)); err != nil {
		t.Fatalf("%s: create the lobby: %v", function, err)
	}
	for _, k := range []ed25519.PrivateKey{smokeMember, derivedMember} {
		if _, _, err := w.Join(ctx, sampleWorld, smokePub(k), nil); err != nil {
			t.Fatalf("%s: join the lobby: %v", function, err)
		}
	}
	if _, _, err := registry.New(tab.store).Register(ctx, registry.Agent{Name: smokeAgent, Description: "the smoke test's agent",
		Endpoint: "https://smoke-agent.example/invoke", Capabilities: []string{"smoke"}, PublicKey: smokePub(smokeOwner)}); err != nil {
		t.Fatalf("%s: register %s: %v", function, smokeAgent, err)
	}
	return tab
}

// tableEnv points a main at tab: TABLE_NAME as the deploy sets it, and the
// SDK's own endpoint, region and credential variables, which
// config.LoadDefaultConfig reads, so the main runs unchanged.
func tableEnv(tab *smokeTable) []string {
	return []string{
		"TABLE_NAME=" + tab.name,
		"AWS_ENDPOINT_URL_DYNAMODB=" + tab.endpoint,
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=" + dynamo.LocalKey(), // the key whose database the table is in
		"AWS_SECRET_ACCESS_KEY=local",
	}
}

var (
	initDuration = regexp.MustCompile(`Init Duration: ([0-9.]+) ms`)
	runtimeInit  = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)
	duration     = regexp.MustCompile(`\tDuration: ([0-9.]+) ms`)
)

// buildAll compiles every function for the host in one go build, which
// links the binaries in parallel, and returns each one's path. The
// bootstrap's name is the function's folder, as in build/<name>/bootstrap.
//
// The go build links into linkCache, which outlives the run: go build
// relinks a binary only when what it was linked from changed (it compares
// the build ID inside the existing file with the one it would write), and
// linking 43 functions costs about 30 CPU-seconds, a tenth of make test's
// CPU on 2 cores. Each run copies the binaries it tests out of the cache
// while it holds the cache's lock, so a concurrent run of other code,
// relinking them, cannot swap a binary under it.
func buildAll(t *testing.T, root string, names []string) map[string]string {
	t.Helper()
	cache, unlock := linkCache(t)
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-tags", "lambda.norpc", "-o", cache + string(filepath.Separator)}
	for _, name := range names {
		args = append(args, "./functions/"+name)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	began := time.Now()
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build the functions: %v\n%s", err, msg)
	}
	t.Logf("built %d functions for %s/%s in %v (linked into %s, or up to date there)", len(names), runtime.GOOS, runtime.GOARCH, time.Since(began).Round(time.Millisecond), cache)
	dir := t.TempDir()
	bins := map[string]string{}
	for _, name := range names {
		// The emulator runs a file named bootstrap, as Lambda does.
		d := filepath.Join(dir, name+".d")
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		bins[name] = filepath.Join(d, "bootstrap")
		if err := copyFile(filepath.Join(cache, name), bins[name]); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if fi, err := os.Stat(bins[name]); err != nil {
			t.Fatal(err)
		} else if fi.Size() > maxBootstrapBytes {
			t.Errorf("%s: bootstrap is %d bytes, over %d: something the function does not need is linked in", name, fi.Size(), maxBootstrapBytes)
		}
	}
	return bins
}

// linkCache is the folder buildAll links into, under the user's cache
// folder beside Go's own build cache, locked for this run until unlock. A
// machine with no cache folder links into a temporary one, every time.
func linkCache(t *testing.T) (dir string, unlock func()) {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Logf("no user cache folder (%v): linking every function afresh", err)
		return t.TempDir(), func() {}
	}
	dir = filepath.Join(base, "a2awire", "smoke-functions", runtime.GOOS+"-"+runtime.GOARCH)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		t.Fatalf("lock %s: %v", dir, err)
	}
	return dir, func() { lock.Close() } // closing the file releases the lock
}

// copyFile copies the executable from to a new file to.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// maxBootstrapBytes bounds a function's binary, as make build does for
// linux/arm64 (MAX_BOOTSTRAP_BYTES): a Lambda's binary carries only its
// own code, so past it something leaked in. This build is the host's
// architecture, whose binaries are within a few percent of arm64's; make
// test links the functions once, here, rather than twice.
const maxBootstrapBytes = 12_000_000

// emulator is one running aws-lambda-rie with its function.
type emulator struct {
	url string
	out *capture.Buffer
}

// start runs the emulator on two free loopback ports (its invoke endpoint
// and the runtime API it gives the bootstrap), so parallel runs and a
// developer's own emulator on the default :8080/:9001 do not collide, and
// stops it and the function when the test ends.
func start(t *testing.T, rie, bootstrap string, fn routes.Function, env []string) *emulator {
	t.Helper()
	ports := freePorts(t, 2)
	out := &capture.Buffer{}
	cmd := exec.Command(rie,
		"--runtime-interface-emulator-address", "127.0.0.1:"+ports[0],
		"--runtime-api-address", "127.0.0.1:"+ports[1],
		bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	// The function's environment is what Lambda would set, not the test's:
	// no AWS credentials or developer settings leak in. LOG_LEVEL is the
	// emulator's own (its --log-level), kept out of the command line.
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"LOG_LEVEL=info",
		"AWS_REGION=us-east-1",
		"AWS_LAMBDA_FUNCTION_NAME=" + fn.Name,
		fmt.Sprintf("AWS_LAMBDA_FUNCTION_MEMORY_SIZE=%d", fn.MemoryMB),
		fmt.Sprintf("AWS_LAMBDA_FUNCTION_TIMEOUT=%d", fn.TimeoutSeconds),
	}
	// The function's static env from the route table, then the case's own.
	for k, v := range fn.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group: stopping the test stops the function process the
	// emulator started too, even if the emulator has to be killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = stopTimeout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", rie, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(stopTimeout):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("emulator output:\n%s", out.String())
		}
	})

	addr := "127.0.0.1:" + ports[0]
	deadline := time.Now().Add(startTimeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			break
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("emulator exited before listening: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("emulator not listening on %s after %v\n%s", addr, startTimeout, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &emulator{url: "http://" + addr + "/2015-03-31/functions/function/invocations", out: out}
}

// invoke sends inv's event (the API Gateway v2 request, signed when inv
// has a key, or its own event), checks the Lambda response the function's
// entry returns and returns its body.
func (e *emulator) invoke(t *testing.T, inv invocation) string {
	t.Helper()
	var event any
	if inv.event != nil {
		event = inv.event(t)
	} else {
		event = signedEvent(t, inv)
	}
	payload, err := json.Marshal(event)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), invokeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("invoke %s: %v", inv.name(), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("emulator answered %s to %s: %s", resp.Status, inv.name(), raw)
	}
	if inv.event != nil {
		inv.checkRaw(t, raw)
		return string(raw)
	}
	var out events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: not an API Gateway v2 response: %v: %s", inv.name(), err, raw)
	}
	if out.IsBase64Encoded {
		t.Errorf("%s: JSON body came base64-encoded", inv.name())
	}
	// JSON, or a JSON-based media type (the key directory's +json).
	ct := out.Headers["Content-Type"]
	if mt, _, _ := strings.Cut(ct, ";"); mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		t.Errorf("%s: Content-Type %q", inv.name(), ct)
	}
	if inv.respond != nil {
		inv.respond(t, out)
		return out.Body
	}
	if out.StatusCode != inv.status {
		t.Errorf("%s: status %d, want %d; body %s", inv.name(), out.StatusCode, inv.status, out.Body)
	}
	var decoded map[string]any
	if err := json.Unmarshal([]byte(out.Body), &decoded); err != nil {
		t.Fatalf("%s: body is not a JSON object: %v: %s", inv.name(), err, out.Body)
	}
	if got := header(out, protocol.ReplayedHeader); (got == "true") != inv.replayed {
		t.Errorf("%s (task id %q): %s = %q, want replayed %v", inv.name(), inv.header["x-a2awire-task-id"],
			protocol.ReplayedHeader, got, inv.replayed)
	}
	inv.check(t, decoded)
	return out.Body
}

// signedEvent is inv's API Gateway event, signed by inv.key when it has one
// (AWN-Ed25519 over the method, path, host and body, as a client signs).
func signedEvent(t *testing.T, inv invocation) events.APIGatewayV2HTTPRequest {
	t.Helper()
	ev := apiEvent(inv)
	if inv.key == nil {
		return ev
	}
	s, err := auth.NewSigner(inv.key)
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.Headers(inv.method, &url.URL{Path: inv.path}, ev.Headers["host"], []byte(inv.body))
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range h {
		ev.Headers[strings.ToLower(name)] = v[0]
	}
	return ev
}

// header is a response header's value, matched case-insensitively as HTTP
// does (the adapter writes Go's canonical names).
func header(resp events.APIGatewayV2HTTPResponse, name string) string {
	for k, v := range resp.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	for k, v := range resp.MultiValueHeaders {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return strings.Join(v, ",")
		}
	}
	return ""
}

// apiEvent is the event API Gateway's HTTP API sends for inv on the route
// of the table it matches, with its path parameters (`ANY <path>` when
// none; payload format 2.0).
func apiEvent(inv invocation) events.APIGatewayV2HTTPRequest {
	now := time.Now().UTC()
	routeKey := "ANY " + inv.path
	var params map[string]string
	if r, p, ok := routes.Match(inv.method, inv.path); ok {
		routeKey, params = r.Key(), p
	}
	headers := map[string]string{"host": "example.execute-api.us-east-1.amazonaws.com", "user-agent": "a2awire-smoke"}
	if inv.body != "" {
		headers["content-type"] = "application/json"
		headers["content-length"] = fmt.Sprint(len(inv.body))
	}
	maps.Copy(headers, inv.header)
	return events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       routeKey,
		RawPath:        inv.path,
		Headers:        headers,
		PathParameters: params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     routeKey,
			AccountID:    "000000000000",
			Stage:        "$default",
			RequestID:    fmt.Sprintf("smoke-%d", now.UnixNano()),
			APIID:        "example",
			DomainName:   "example.execute-api.us-east-1.amazonaws.com",
			DomainPrefix: "example",
			Time:         now.Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    inv.method,
				Path:      inv.path,
				Protocol:  "HTTP/1.1",
				SourceIP:  "127.0.0.1",
				UserAgent: "a2awire-smoke",
			},
		},
		Body: inv.body,
	}
}

// waitReport waits for the emulator's n-th REPORT line, which it prints
// after the response, and returns it.
func (e *emulator) waitReport(t *testing.T, n int) string {
	t.Helper()
	deadline := time.Now().Add(reportTimeout)
	for {
		var reports []string
		for _, line := range strings.Split(e.out.String(), "\n") {
			if strings.HasPrefix(line, "REPORT RequestId:") {
				reports = append(reports, line)
			}
		}
		if len(reports) >= n {
			return reports[n-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no REPORT line for invoke %d after %v", n, reportTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func checkMetadata(t *testing.T, body map[string]any, agent, capability string) {
	t.Helper()
	md, _ := body["metadata"].(map[string]any)
	if md["agent"] != agent || md["capability"] != capability {
		t.Errorf("metadata %v, want agent %s capability %s", body["metadata"], agent, capability)
	}
	if d, ok := md["duration_ms"].(float64); !ok || d < 0 || d != float64(int64(d)) {
		t.Errorf("metadata.duration_ms %v is not an integer >= 0", md["duration_ms"])
	}
}

func checkError(code string) func(*testing.T, map[string]any) {
	return func(t *testing.T, body map[string]any) {
		t.Helper()
		if body["error"] != code {
			t.Errorf("error %v, want %s", body["error"], code)
		}
		if msg, _ := body["message"].(string); msg == "" {
			t.Errorf("error without message: %v", body)
		}
	}
}

// freePorts reserves n distinct loopback ports by listening on port 0, then
// frees them for the emulator. Another process could take one in between;
// the emulator then fails to start and says so.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var ports []string
	var listeners []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listeners = append(listeners, l)
		_, port, _ := net.SplitHostPort(l.Addr().String())
		ports = append(ports, port)
	}
	for _, l := range listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			t.Fatal(err)
		}
	}
	return ports
}
