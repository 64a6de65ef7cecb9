package routes

import (
	"maps"
	"strings"
	"testing"
)

// referenceMatch is Match as it was before the table's patterns were
// pre-split and candidates scored without allocating: every candidate
// split and matched with its parameters. The fast Match must agree with it
// on every request.
func referenceMatch(method, path string) (Route, map[string]string, bool) {
	segs := referenceSplit(path)
	var (
		best       Route
		bestParams map[string]string
		bestScore  = -1
	)
	for _, r := range table {
		if r.Method != "ANY" && r.Method != method {
			continue
		}
		params, score, ok := referenceSegments(referenceSplit(r.Path), segs)
		if !ok {
			continue
		}
		score *= 2
		if r.Method != "ANY" {
			score++
		}
		if score > bestScore {
			best, bestParams, bestScore = r, params, score
		}
	}
	return best, bestParams, bestScore >= 0
}

// referenceSplit is how paths were split before Match split them in place.
func referenceSplit(path string) []string {
	path = strings.TrimPrefix(path, "/")
	if path == "" {
		return nil
	}
	return strings.Split(path, "/")
}

func referenceSegments(pattern, segs []string) (map[string]string, int, bool) {
	params := map[string]string{}
	score := 0
	for i, p := range pattern {
		if name, ok := strings.CutSuffix(strings.TrimPrefix(p, "{"), "+}"); ok && strings.HasPrefix(p, "{") {
			if i == len(pattern)-1 && len(segs) > i {
				params[name] = strings.Join(segs[i:], "/")
				return params, score, true
			}
			return nil, 0, false
		}
		if i >= len(segs) {
			return nil, 0, false
		}
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			if segs[i] == "" {
				return nil, 0, false
			}
			params[p[1:len(p)-1]] = segs[i]
			score++
			continue
		}
		if p != segs[i] {
			return nil, 0, false
		}
		score += 1 << 10
	}
	if len(segs) != len(pattern) {
		return nil, 0, false
	}
	return params, score, true
}

// requestPaths are paths around every route of the table: the route with
// its parameters filled, empty, cut short, extended, with a trailing
// slash, and a few that match nothing.
func requestPaths() []string {
	paths := []string{"", "/", "//", "/nope", "/v0", "/v0/worlds", "/v0/worlds/", "/v0/worlds//join", "/agents", "/agents//invoke", "/a/b/c/d/e"}
	fill := func(p, with string) string {
		segs := referenceSplit(p)
		for i, s := range segs {
			if strings.HasPrefix(s, "{") {
				segs[i] = with
			}
		}
		return "/" + strings.Join(segs, "/")
	}
	for _, r := range table {
		for _, v := range []string{"x", "", "a%2Fb", "lobby", "{world}"} {
			p := fill(r.Path, v)
			paths = append(paths, p, p+"/", p+"/more", p+"/more/and/more", strings.TrimSuffix(p, "/"+referenceSplit(p)[max(len(referenceSplit(p))-1, 0)]))
		}
		paths = append(paths, r.Path)
	}
	return paths
}

// TestMatchAgreesWithReference: for every method and every path around the
// table's routes, Match picks the same route with the same parameters as
// the straightforward implementation.
func TestMatchAgreesWithReference(t *testing.T) {
	n := 0
	for _, method := range []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "ANY"} {
		for _, path := range requestPaths() {
			got, gotParams, gotOK := Match(method, path)
			want, wantParams, wantOK := referenceMatch(method, path)
			if gotOK != wantOK || got.Key() != want.Key() || !maps.Equal(gotParams, wantParams) || (gotOK && gotParams == nil) {
				t.Errorf("Match(%q, %q) = %v %v %v, want %v %v %v", method, path, got.Key(), gotParams, gotOK, want.Key(), wantParams, wantOK)
			}
			if gotOK {
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no path matched any route: the table of paths is wrong")
	}
}

// TestMatchPatternAgreesWithReference: MatchPattern on patterns of every
// kind (literal, parameter, greedy) gives the reference's parameters and
// score.
func TestMatchPatternAgreesWithReference(t *testing.T) {
	patterns := []string{"/", "/a", "/a/b", "/a/{id}", "/a/{rest+}", "/a/{id}/c", "/{x}/{y}", "/{all+}", "/a/{rest+}/c", "/{+}", "/a/{id"}
	for _, r := range table {
		patterns = append(patterns, r.Path)
	}
	for _, pat := range patterns {
		for _, path := range append(requestPaths(), "/a", "/a/b", "/a/1/c", "/a/1/2/3", "/a/", "/b/c") {
			gotParams, gotScore, gotOK := MatchPattern(pat, path)
			wantParams, wantScore, wantOK := referenceSegments(referenceSplit(pat), referenceSplit(path))
			if gotOK != wantOK || gotScore != wantScore || !maps.Equal(gotParams, wantParams) || (gotParams == nil) != (wantParams == nil) {
				t.Errorf("MatchPattern(%q, %q) = %v %d %v, want %v %d %v", pat, path, gotParams, gotScore, gotOK, wantParams, wantScore, wantOK)
			}
		}
	}
}

// FuzzMatch: on any method and path, Match agrees with the reference.
func FuzzMatch(f *testing.F) {
	for _, p := range requestPaths() {
		f.Add("GET", p)
		f.Add("POST", p)
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		got, gotParams, gotOK := Match(method, path)
		want, wantParams, wantOK := referenceMatch(method, path)
		if gotOK != wantOK || got.Key() != want.Key() || !maps.Equal(gotParams, wantParams) {
			t.Fatalf("Match(%q, %q) = %v %v %v, want %v %v %v", method, path, got.Key(), gotParams, gotOK, want.Key(), wantParams, wantOK)
		}
	})
}

// BenchmarkMatch is one request's route lookup (the punctual ping).
func BenchmarkMatch(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := Match("POST", "/agents/a2awire-punctual/invoke"); !ok {
			b.Fatal("no match")
		}
	}
}
