package conform_test

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// trackedFiles returns the files of the checkout at root that git tracks or
// would track (new files not yet added count; ignored ones such as bin/ do
// not), relative to root, regular files only.
func trackedFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v (this test needs the git checkout)", root, err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, f))
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, a symlink (node_modules), a submodule
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("git ls-files in %s lists nothing", root)
	}
	return files
}

// outsideDoc matches a citation of the design document the project was
// written from, which is not in the repository. It is spelled with a
// character class so that this file does not match itself.
var outsideDoc = regexp.MustCompile(`\bD[E]SIGN\b`)

// outsideWord is the word outsideDoc matches, spelled in two pieces for
// the same reason.
var outsideWord = []byte("D" + "ESIGN")

// TestRepositoryStandsAlone keeps every committed file self-contained: a
// reader of the repository has no design document beside the checkout, so
// code, comments, test messages and docs state the rule in the project's own
// words (or point at docs/) rather than cite one.
func TestRepositoryStandsAlone(t *testing.T) {
	root := repoRoot(t)
	for _, f := range trackedFiles(t, root) {
		raw, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(raw, 0) >= 0 {
			continue // binary
		}
		// A line the pattern matches holds the word itself, so a file
		// without it has no such line: one scan of the file in assembly
		// instead of the pattern over each line, which under -race cost
		// seconds over the whole repository.
		if !bytes.Contains(raw, outsideWord) {
			continue
		}
		for n, line := range strings.Split(string(raw), "\n") {
			if outsideDoc.MatchString(line) {
				t.Errorf("%s:%d cites a design document the repository does not contain; say it in the project's own words: %s",
					f, n+1, strings.TrimSpace(line))
			}
		}
	}
}

// mdLink is an inline Markdown link or image: [text](target) or
// [text](target "title").
var mdLink = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)

// urlScheme starts a link that leaves the repository (https:, mailto:).
var urlScheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// TestDocLinks checks that every relative link in the committed Markdown
// files (README.md, docs/*.md, bench/README.md…) names a file or folder of
// the repository, and that a #fragment names a heading of the Markdown file
// it points at, so moving a section cannot strand its references.
func TestDocLinks(t *testing.T) {
	root := repoRoot(t)
	tracked := trackedFiles(t, root)
	anchors := map[string]map[string]bool{} // Markdown file → its heading anchors
	var md []string
	for _, f := range tracked {
		if strings.HasSuffix(f, ".md") && !strings.Contains(f, "testdata/") {
			md = append(md, f)
		}
	}
	links := 0
	for _, f := range md {
		for _, l := range markdownLinks(t, root, f) {
			target := l.target
			if urlScheme.MatchString(target) {
				continue // http:, https:, mailto:
			}
			links++
			file, frag, _ := strings.Cut(target, "#")
			resolved := f
			if file != "" {
				resolved = path.Clean(path.Join(path.Dir(f), file))
				if strings.HasPrefix(resolved, "../") || resolved == ".." {
					t.Errorf("%s:%d: link %q leaves the repository", f, l.line, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(resolved))); err != nil {
					t.Errorf("%s:%d: link %q names %s, which does not exist", f, l.line, target, resolved)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(resolved, ".md") {
				t.Errorf("%s:%d: link %q has a fragment but %s is not Markdown", f, l.line, target, resolved)
				continue
			}
			if anchors[resolved] == nil {
				anchors[resolved] = headingAnchors(t, root, resolved)
			}
			if !anchors[resolved][frag] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", f, l.line, target, resolved, frag)
			}
		}
	}
	// README.md links the docs; finding none means this test parsed nothing.
	if links == 0 {
		t.Fatalf("no relative links found in %d Markdown files", len(md))
	}
	t.Logf("%d relative links checked in %d Markdown files", links, len(md))
}

// link is one relative or absolute link target of a Markdown file.
type link struct {
	target string
	line   int
}

// markdownLinks returns the inline links of a Markdown file outside code
// fences and code spans.
func markdownLinks(t *testing.T, root, file string) []link {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		t.Fatal(err)
	}
	var links []link
	fence := false
	for n, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			links = append(links, link{target: m[1], line: n + 1})
		}
	}
	return links
}

// stripCodeSpans removes `code` spans from a line, where brackets and
// parentheses are code, not links.
func stripCodeSpans(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown file: lower case, letters, digits, spaces, hyphens and
// underscores kept, spaces turned into hyphens, and -1, -2… on repeats.
func headingAnchors(t *testing.T, root, file string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if k := seen[a]; k > 0 {
			anchors[a+"-"+strconv.Itoa(k)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}
