// Package phrasebook is the translator fixture's offline fallback: a small
// phrase dictionary of English, Spanish, French and German (phrases.tsv,
// a few hundred common words and phrases per language) applied word by word.
//
// It exists so that a2awire-translator answers without any upstream and so
// that buyers can test fallback behaviour; it is not a translator. Every
// character that is not part of a known word or phrase, including
// punctuation, whitespace, digits and unknown words, is copied unchanged, and
// the case of each translated word follows its source (Hello, → Hola,).
package phrasebook

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Book is a parsed phrase dictionary. It is immutable, so one Book serves
// any number of concurrent translations.
type Book struct {
	langs []string
	// rows[i][l] lists row i's forms in language langs[l]; the first is the
	// preferred translation into that language.
	rows [][][]string
	// index[l] holds language langs[l]'s forms sorted by key (the form in
	// lower case with typographic apostrophes folded to '), one per key: a
	// sorted slice rather than a map, so that the built-in book is static
	// data the program starts with instead of one built at every cold start.
	index [][]form
	// maxWords[l] is the longest phrase, in words, of language langs[l].
	maxWords []int
}

// form is one dictionary spelling: its key, the row it belongs to and how
// the dictionary writes it (to tell proper and German nouns, written with a
// capital, from words capitalised only because they start a sentence).
type form struct {
	key      string
	row      int
	spelling string
}

// find looks key up in one language's index.
func find(index []form, key string) (form, bool) {
	i, ok := slices.BinarySearchFunc(index, key, func(f form, k string) int { return strings.Compare(f.key, k) })
	if !ok {
		return form{}, false
	}
	return index[i], true
}

// Default returns the built-in dictionary: phrases.tsv, compiled into
// phrases_gen.go (go generate; a test keeps the two equal), so that a cold
// start does not parse it (about 1.5 ms, 5,000 allocations).
func Default() *Book {
	b := builtin
	return &b
}

//go:generate go test -run TestBuiltinIsPhrasesTSV -update

// Parse reads a dictionary: "#" lines are comments, the first other line
// names the languages, each further line holds one entry's forms in those
// languages, separated by tabs, with alternatives separated by "|". The
// first row to use a form (by key) is the one it translates from.
func Parse(tsv string) (*Book, error) {
	b := &Book{}
	var seen []map[string]bool
	for n, line := range strings.Split(tsv, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cells := strings.Split(line, "\t")
		if b.langs == nil {
			b.langs = cells
			b.index = make([][]form, len(cells))
			b.maxWords = make([]int, len(cells))
			for range cells {
				seen = append(seen, map[string]bool{})
			}
			continue
		}
		if len(cells) != len(b.langs) {
			return nil, fmt.Errorf("phrasebook: line %d has %d cells, want %d", n+1, len(cells), len(b.langs))
		}
		row := make([][]string, len(cells))
		for l, cell := range cells {
			for alt := range strings.SplitSeq(cell, "|") {
				alt = strings.TrimSpace(alt)
				if alt == "" {
					return nil, fmt.Errorf("phrasebook: line %d: empty %s form", n+1, b.langs[l])
				}
				row[l] = append(row[l], alt)
				if k := key(alt); !seen[l][k] {
					seen[l][k] = true
					b.index[l] = append(b.index[l], form{key: k, row: len(b.rows), spelling: alt})
				}
				b.maxWords[l] = max(b.maxWords[l], len(strings.Fields(alt)))
			}
		}
		b.rows = append(b.rows, row)
	}
	if len(b.langs) < 2 || len(b.rows) == 0 {
		return nil, fmt.Errorf("phrasebook: no languages or no entries")
	}
	for _, index := range b.index {
		slices.SortFunc(index, func(a, b form) int { return strings.Compare(a.key, b.key) })
	}
	return b, nil
}

// Languages lists the dictionary's languages (ISO 639-1 codes).
func (b *Book) Languages() []string { return append([]string(nil), b.langs...) }

// Entries is the number of dictionary rows.
func (b *Book) Entries() int { return len(b.rows) }

// Supports reports whether the book translates from one language to
// another: both are in the book and they differ. Every row holds all
// languages, so any pair of them translates directly, without a pivot.
func (b *Book) Supports(from, to string) bool {
	return from != to && b.lang(from) >= 0 && b.lang(to) >= 0
}

func (b *Book) lang(code string) int {
	for i, l := range b.langs {
		if l == code {
			return i
		}
	}
	return -1
}

// Stats counts what a translation found.
type Stats struct {
	// Words is the number of source words.
	Words int
	// Unknown is how many of them the dictionary did not know (kept as is).
	Unknown int
}

// Translate translates text word by word, preferring the longest phrase the
// dictionary knows at each word. It returns the text unchanged when the pair
// is not supported (callers check Supports first).
func (b *Book) Translate(text, from, to string) (string, Stats) {
	var st Stats
	if !b.Supports(from, to) {
		return text, st
	}
	src := b.lang(from)
	index, target, maxWords := b.index[src], b.lang(to), b.maxWords[src]
	toks := tokenize(text)
	var out strings.Builder
	out.Grow(len(text))
	sentenceStart := true
	for i := 0; i < len(toks); {
		t := toks[i]
		if !t.word {
			out.WriteString(t.text)
			if strings.ContainsAny(t.text, ".!?\n") {
				sentenceStart = true
			}
			i++
			continue
		}
		n, f, ok := longestMatch(toks, i, maxWords, index)
		if !ok {
			st.Words++
			st.Unknown++
			out.WriteString(t.text)
			sentenceStart = false
			i++
			continue
		}
		var src strings.Builder
		for j := i; j < i+2*n-1; j++ {
			src.WriteString(toks[j].text)
		}
		st.Words += n
		out.WriteString(applyCase(b.rows[f.row][target][0], t.text, src.String(), f.spelling, sentenceStart))
		sentenceStart = false
		i += 2*n - 1
	}
	return out.String(), st
}

// longestMatch finds the longest phrase of up to maxWords words starting at
// toks[i] whose words are separated by whitespace only. It returns the number
// of words matched.
func longestMatch(toks []token, i, maxWords int, index []form) (int, form, bool) {
	words := []string{key(toks[i].text)}
	for j := i + 1; len(words) < maxWords && j+1 < len(toks); j += 2 {
		if !isSpace(toks[j].text) || !toks[j+1].word {
			break
		}
		words = append(words, key(toks[j+1].text))
	}
	for n := len(words); n > 0; n-- {
		if f, ok := find(index, strings.Join(words[:n], " ")); ok {
			return n, f, true
		}
	}
	return 0, form{}, false
}

// applyCase gives translation the case of its source: ALL CAPS stays all
// caps; a capitalised source capitalises the translation, unless the
// dictionary itself writes the source with a capital (a German noun, "I",
// a day) and it is not at the start of a sentence, where the capital says
// nothing; otherwise the translation is written as the dictionary writes it.
func applyCase(translation, firstWord, source, spelling string, sentenceStart bool) string {
	switch {
	case isAllCaps(source):
		return strings.ToUpper(translation)
	case startsUpper(firstWord) && (sentenceStart || !startsUpper(spelling)):
		r, size := utf8.DecodeRuneInString(translation)
		return string(unicode.ToTitle(r)) + translation[size:]
	}
	return translation
}

func startsUpper(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsUpper(r) || unicode.IsTitle(r)
}

// isAllCaps reports whether s has at least two letters and no lower-case
// one; a single capital ("I", "A") is capitalisation, not shouting.
func isAllCaps(s string) bool {
	letters := 0
	for _, r := range s {
		if unicode.IsLetter(r) {
			if unicode.IsLower(r) {
				return false
			}
			letters++
		}
	}
	return letters > 1
}

// key is the lookup form of a word or phrase.
func key(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, "’", "'"))
}

func isSpace(s string) bool {
	for _, r := range s {
		if !unicode.IsSpace(r) {
			return false
		}
	}
	return s != ""
}

// token is a word or a run of anything else.
type token struct {
	text string
	word bool
}

// tokenize splits text into alternating runs of words and non-words, so that
// concatenating the tokens gives text back. A word is a run of letters and
// combining marks; an apostrophe or hyphen between two letters joins them
// (don't, aujourd'hui, peut-être).
func tokenize(text string) []token {
	var toks []token
	start, inWord := 0, false
	for i, r := range text {
		w := isWordRune(r)
		if !w && inWord && isJoiner(r) {
			_, size := utf8.DecodeRuneInString(text[i:])
			next, _ := utf8.DecodeRuneInString(text[i+size:])
			w = isWordRune(next)
		}
		if i > 0 && w != inWord {
			toks = append(toks, token{text: text[start:i], word: inWord})
			start = i
		}
		inWord = w
	}
	if start < len(text) {
		toks = append(toks, token{text: text[start:], word: inWord})
	}
	return toks
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsMark(r) }

func isJoiner(r rune) bool { return r == '\'' || r == '’' || r == '-' }
