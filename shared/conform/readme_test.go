package conform_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The documentation's "Build your first provider" (docs/protocol.md) must
// work when pasted into an empty folder, and nothing but a test keeps prose
// from rotting. So this test reads the documents' own text — README.md and
// every docs/*.md — and does what a reader does: every code fence preceded by
// a marker line
//
//	<!-- readme-test: sh -->       commands, run in order
//	<!-- readme-test: main.go -->  a file, written into the current folder
//
// is acted on in document order, each document starting afresh in a
// temporary folder beside a symlink named a2awire that points at this
// checkout (the walk-through tells the reader to start next to the clone).
// The only liberty taken is the port: the documents' 127.0.0.1:9000 becomes
// a free loopback port. `go run .` is run as `go build` plus starting the
// binary, so that the test can stop it; the awn in `…/awn conform …` is this
// checkout's cmd/awn.
const readmeMarker = "<!-- readme-test: "

// minExampleBlocks is how many marked blocks the documents held when the
// README was split into docs/: moving or deleting a marker must not quietly
// make the test run less. Raise it when you add an example.
const minExampleBlocks = 5

// readmeAddr is the address the documents' providers listen on.
const readmeAddr = "127.0.0.1:9000"

func TestDocExamples(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	root := repoRoot(t)
	var blocks []block
	for _, doc := range docFiles(t, root) {
		blocks = append(blocks, readmeBlocks(t, root, doc)...)
	}
	if len(blocks) < minExampleBlocks {
		t.Fatalf("README.md and docs/*.md hold %d %s…--> blocks, want at least %d: an example lost its marker or was dropped",
			len(blocks), readmeMarker, minExampleBlocks)
	}

	tmp := t.TempDir()
	if err := os.Symlink(root, filepath.Join(tmp, "a2awire")); err != nil {
		t.Fatal(err)
	}
	r := &reader{
		t:    t,
		ctx:  ctx,
		dir:  tmp,
		tmp:  tmp,
		addr: freeAddr(t),
		// The reader's environment: the module proxy and checksum database
		// configured (go mod tidy downloads the test dependencies of the
		// packages it imports, e.g. bbolt's, once). Only a go.work around
		// the checkout must not leak in.
		env: append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local"),
	}
	r.awn = filepath.Join(tmp, "awn-bin")
	r.goCmd(root, "build", "-o", r.awn, "github.com/a2awire/a2awire/cmd/awn")

	for i, b := range blocks {
		if i == 0 || b.file != blocks[i-1].file {
			// A new document: a reader starts it from the folder beside
			// the clone, with nothing running.
			r.stop()
			r.dir = tmp
		}
		switch {
		case b.role == "sh":
			r.commands(b)
		case strings.HasSuffix(b.role, ".go"):
			r.writeGo(b)
		default:
			t.Fatalf("%s line %d: unknown readme-test role %q (want sh or <file>.go)", b.file, b.line, b.role)
		}
	}
	r.stop()

	t.Logf("%d example blocks executed", len(blocks))

	// Without these, deleting the markers would make the test pass by
	// doing nothing.
	if r.files < 2 || len(r.conforms) < 2 {
		t.Fatalf("docs: %d Go files and %d awn conform runs found; want the stateless and the stateful provider, each checked",
			r.files, len(r.conforms))
	}
	if !strings.Contains(r.conforms[len(r.conforms)-1], "--stateful") {
		t.Fatalf("docs: the last awn conform run (%s) does not check the stateful provider with --stateful", r.conforms[len(r.conforms)-1])
	}
}

// repoRoot is the checkout this test runs in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// docFiles returns the project's documents, relative to root: README.md,
// then docs/*.md in name order.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatalf("%s has no docs/*.md", root)
	}
	files := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

// block is one marked code fence of a document.
type block struct {
	file string // relative to the repository root
	role string // "sh" or a file name
	line int    // of the first line of code
	text string
}

// readmeBlocks returns the marked fences of one document in document order;
// a document may have none.
func readmeBlocks(t *testing.T, root, file string) []block {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	var blocks []block
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, readmeMarker) {
			continue
		}
		role := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(l, readmeMarker), "-->"))
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			t.Fatalf("%s line %d: %s is not followed by a code fence", file, i+1, l)
		}
		b := block{file: file, role: role, line: i + 3}
		j := i + 2
		for ; j < len(lines) && !strings.HasPrefix(lines[j], "```"); j++ {
			b.text += lines[j] + "\n"
		}
		if j == len(lines) {
			t.Fatalf("%s line %d: the fence after %s is never closed", file, i+2, l)
		}
		blocks = append(blocks, b)
		i = j
	}
	return blocks
}

// reader plays the documents' reader.
type reader struct {
	t        *testing.T
	ctx      context.Context
	env      []string
	tmp      string // holds the a2awire symlink and the reader's folders
	dir      string // the reader's current folder
	addr     string // replaces readmeAddr
	awn      string
	files    int
	conforms []string
	summary  string // the last line of the last awn conform
	server   *exec.Cmd
	exited   chan error
	builds   int
}

var (
	mkdirCD = regexp.MustCompile(`^mkdir ([\w.-]+) && cd ([\w.-]+)$`)
	// shownSummary is a comment showing what the awn conform line above it
	// prints last; it must be what awn really printed.
	shownSummary = regexp.MustCompile(`^# … (\d+ passed, \d+ failed, \d+ skipped)$`)
)

// commands runs a sh block line by line. Only the commands the documents may
// tell a reader to type are understood; anything else fails the test, so
// that they cannot grow a step this test silently skips.
func (r *reader) commands(b block) {
	t := r.t
	for n, line := range joinContinued(b.text) {
		where := fmt.Sprintf("%s line %d (%s)", b.file, b.line+n, line)
		if m := shownSummary.FindStringSubmatch(line); m != nil {
			if m[1] != r.summary {
				t.Fatalf("%s: awn conform printed %q", where, r.summary)
			}
			continue
		}
		args, err := shellWords(line)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if len(args) == 0 {
			continue // blank or comment
		}
		cmd := strings.Join(args, " ")
		switch m := mkdirCD.FindStringSubmatch(cmd); {
		case m != nil && m[1] == m[2]:
			r.dir = filepath.Join(r.dir, m[1])
			if err := os.Mkdir(r.dir, 0o755); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		case len(args) >= 2 && args[0] == "go" && (args[1] == "mod" || args[1] == "get"):
			r.goCmd(r.dir, args[1:]...)
		case cmd == "go run ." || cmd == "go run . &":
			r.start(where)
		case filepath.Base(args[0]) == "awn" && len(args) > 1 && args[1] == "conform":
			r.conform(where, args[1:])
		default:
			t.Fatalf("%s: this test does not know how to run %q; teach it, or leave the line out of a readme-test block", where, cmd)
		}
	}
}

// writeGo writes a Go file into the current folder, on the test's port.
func (r *reader) writeGo(b block) {
	if n := strings.Count(b.text, readmeAddr); n != 1 {
		r.t.Fatalf("%s line %d: %s names %s %d times; the test moves exactly one listen address to a free port", b.file, b.line, b.role, readmeAddr, n)
	}
	src := strings.Replace(b.text, readmeAddr, r.addr, 1)
	if err := os.WriteFile(filepath.Join(r.dir, b.role), []byte(src), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.files++
}

// goCmd runs the go command in dir and fails the test with its output.
func (r *reader) goCmd(dir string, args ...string) {
	r.t.Helper()
	start := time.Now()
	cmd := exec.CommandContext(r.ctx, "go", args...)
	cmd.Dir, cmd.Env = dir, r.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	r.t.Logf("go %s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
}

// start builds the current folder's program, starts it (stopping the one
// before) and waits until it accepts connections.
func (r *reader) start(where string) {
	t := r.t
	r.stop()
	r.builds++
	bin := filepath.Join(r.tmp, fmt.Sprintf("provider-%d", r.builds))
	r.goCmd(r.dir, "build", "-o", bin, ".")
	var out bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Dir, cmd.Stdout, cmd.Stderr = r.dir, &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	r.server, r.exited = cmd, make(chan error, 1)
	go func() { r.exited <- cmd.Wait() }()
	t.Cleanup(r.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", r.addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case err := <-r.exited:
			r.server = nil
			t.Fatalf("%s: the provider exited before listening on %s: %v\n%s", where, r.addr, err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the provider did not listen on %s within 30 s\n%s", where, r.addr, out.String())
		}
	}
}

// stop kills the running provider, if any.
func (r *reader) stop() {
	if r.server == nil {
		return
	}
	_ = r.server.Process.Kill()
	<-r.exited
	r.server = nil
}

var conformSummary = regexp.MustCompile(`(?m)^((\d+) passed, 0 failed, 0 skipped)$`)

// conform runs a document's awn conform line and wants every item to pass.
func (r *reader) conform(where string, args []string) {
	t := r.t
	if r.server == nil {
		t.Fatalf("%s: no provider is running (the document must start it with go run . first)", where)
	}
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, readmeAddr, r.addr)
	}
	cmd := exec.CommandContext(r.ctx, r.awn, args...)
	cmd.Dir, cmd.Env = r.dir, r.env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		t.Fatalf("%s: awn exited %d:\n%s", where, exit.ExitCode(), out)
	case err != nil:
		t.Fatalf("%s: %v", where, err)
	}
	m := conformSummary.FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s: want every item to pass, got:\n%s", where, out)
	}
	t.Logf("%s: %s", where, m[1])
	r.summary = string(m[1])
	r.conforms = append(r.conforms, strings.Join(args, " "))
}

// joinContinued splits a shell block into logical lines, joining lines
// that end in a backslash with the next.
func joinContinued(text string) []string {
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasSuffix(l, `\`) {
			cur.WriteString(strings.TrimSuffix(l, `\`))
			continue
		}
		cur.WriteString(l)
		lines = append(lines, strings.TrimSpace(cur.String()))
		cur.Reset()
	}
	if cur.Len() > 0 {
		lines = append(lines, strings.TrimSpace(cur.String()))
	}
	return lines
}

// shellWords splits one shell line the way sh does for the documents' simple
// commands: words separated by blanks, '…' and "…" quoting, # starting a
// comment at the beginning of a word.
func shellWords(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		case c == '#' && !inWord:
			return words, nil
		case c == '\'' || c == '"':
			j := strings.IndexByte(line[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated %c quote", c)
			}
			q := line[i+1 : i+1+j]
			if c == '"' && strings.ContainsAny(q, "$`\\") {
				return nil, errors.New(`"…" with $, ` + "`" + ` or \ is beyond this test's shell`)
			}
			w.WriteString(q)
			inWord = true
			i += j + 1
		case c == '$' || c == '`' || c == '\\' || c == '|' || c == ';' || c == '<' || c == '>':
			return nil, fmt.Errorf("%q is beyond this test's shell", c)
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
