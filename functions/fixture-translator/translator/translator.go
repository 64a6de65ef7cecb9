// Package translator is the a2awire-translator fixture: a provider with an
// upstream dependency, so buyers can see both a model-backed
// answer and a degraded one.
//
// When an OpenAI-compatible chat endpoint is configured and answers in time,
// the translation comes from it (metadata.engine "llm", with tokens_used and
// model). Otherwise the built-in phrasebook answers word by word
// (metadata.engine "fallback"). The error split follows the protocol: a pair
// nobody can serve is the buyer's problem (400 invalid_input) when there is
// no LLM, and the upstream's (502 upstream_error) when the LLM failed.
package translator

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/a2awire/a2awire/functions/fixture-translator/llm"
	"github.com/a2awire/a2awire/functions/fixture-translator/phrasebook"
	"github.com/a2awire/a2awire/shared/ident"
	"github.com/a2awire/a2awire/shared/protocol"
)

// Name is the fixture's registered agent name.
const Name = "a2awire-translator"

// Environment variables of the fixture's Lambda (read by EnvConfig).
const (
	EnvURL    = "TRANSLATOR_LLM_URL"
	EnvAPIKey = "TRANSLATOR_LLM_API_KEY"
	EnvModel  = "TRANSLATOR_LLM_MODEL"
)

// Engines reported in metadata.engine.
const (
	EngineLLM      = "llm"
	EngineFallback = "fallback"
)

// DefaultSourceLang is source_lang when the input has none.
const DefaultSourceLang = "en"

// EnvConfig reads the LLM settings from the environment; an empty
// TRANSLATOR_LLM_URL means no LLM. Both the Lambda main and the local
// harness use it, so they agree on the variables.
func EnvConfig(getenv func(string) string) llm.Config {
	return llm.Config{
		URL:    strings.TrimSpace(getenv(EnvURL)),
		APIKey: strings.TrimSpace(getenv(EnvAPIKey)),
		Model:  strings.TrimSpace(getenv(EnvModel)),
	}
}

// translator holds the fixture's dependencies.
type translator struct {
	llm  *llm.Client // nil when no LLM is configured
	book *phrasebook.Book
	log  *slog.Logger
}

// New returns the fixture's HTTP handler. cfg configures the LLM (the zero
// Config means none); hc is the HTTP client for it (nil for the default).
func New(log *slog.Logger, cfg llm.Config, hc *http.Client) *protocol.Provider {
	t := &translator{book: phrasebook.Default(), log: log}
	if cfg.Enabled() {
		t.llm = llm.New(cfg, hc)
	}
	p := protocol.NewProvider(Name, protocol.WithLogger(log))
	protocol.Handle(p, "translation", t.translate)
	return p
}

// Input is translation's input.
type Input struct {
	Text       *string `json:"text"`
	TargetLang string  `json:"target_lang"`
	SourceLang string  `json:"source_lang"`
}

// Output is translation's output.
type Output struct {
	Translation string `json:"translation"`
	SourceLang  string `json:"source_lang"`
	TargetLang  string `json:"target_lang"`
}

// Classes of a language tag's subtags (package ident: no regular
// expression to compile at a cold start).
var (
	langLetters  = ident.Of("A-Za-z")
	langAlphanum = ident.Of("A-Za-z0-9")
)

// maxLangTag bounds a language tag (BCP 47's longest practical tags are 35
// characters), so the tags error messages repeat stay short.
const maxLangTag = 35

// isLangTag accepts BCP 47-style tags such as "en", "pt-BR" or "zh-Hant"
// of at most maxLangTag bytes.
func isLangTag(s string) bool { return len(s) <= maxLangTag && langTagShape(s) }

// langTagShape is ^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$ written out, which
// the tests hold it to.
func langTagShape(s string) bool {
	primary, rest, more := strings.Cut(s, "-")
	if len(primary) < 2 || len(primary) > 3 || !langLetters.All(primary) {
		return false
	}
	for more {
		var sub string
		sub, rest, more = strings.Cut(rest, "-")
		if len(sub) < 1 || len(sub) > 8 || !langAlphanum.All(sub) {
			return false
		}
	}
	return true
}

func (t *translator) translate(ctx context.Context, in Input) (Output, error) {
	if in.Text == nil {
		return Output{}, protocol.Errorf(protocol.InvalidInput, "input.text is required and must be a string")
	}
	if strings.TrimSpace(*in.Text) == "" {
		return Output{}, protocol.Errorf(protocol.InvalidInput, "input.text has nothing to translate")
	}
	if in.SourceLang == "" {
		in.SourceLang = DefaultSourceLang
	}
	if !isLangTag(in.TargetLang) {
		return Output{}, protocol.Errorf(protocol.InvalidInput, "input.target_lang is required and must be a language code such as \"es\"")
	}
	if !isLangTag(in.SourceLang) {
		return Output{}, protocol.Errorf(protocol.InvalidInput, "input.source_lang must be a language code such as \"en\"")
	}
	if strings.EqualFold(in.SourceLang, in.TargetLang) {
		return Output{}, protocol.Errorf(protocol.InvalidInput, "input.source_lang and input.target_lang are the same (%s)", in.TargetLang)
	}
	out := Output{SourceLang: in.SourceLang, TargetLang: in.TargetLang}
	from, to := primary(in.SourceLang), primary(in.TargetLang)
	canFallBack := t.book.Supports(from, to)

	if t.llm != nil {
		c, err := t.llm.Complete(ctx, prompt(*in.Text, in.SourceLang, in.TargetLang))
		if err == nil {
			protocol.SetMetadata(ctx, "engine", EngineLLM)
			protocol.SetMetadata(ctx, "tokens_used", c.TotalTokens)
			protocol.SetMetadata(ctx, "model", c.Model)
			out.Translation = c.Content
			return out, nil
		}
		if !canFallBack {
			return Output{}, &protocol.Error{
				Code:    protocol.Upstream,
				Message: fmt.Sprintf("the translation service failed and the built-in dictionary does not cover %s→%s", from, to),
				Err:     err,
			}
		}
		t.log.WarnContext(ctx, "llm failed; using the fallback dictionary", "err", err)
		protocol.SetMetadata(ctx, "fallback_reason", "llm_failed")
	} else if !canFallBack {
		return Output{}, protocol.Errorf(protocol.InvalidInput,
			"language pair %s→%s is not supported; without a model this agent translates between %s",
			in.SourceLang, in.TargetLang, strings.Join(t.book.Languages(), ", "))
	}

	text, st := t.book.Translate(*in.Text, from, to)
	protocol.SetMetadata(ctx, "engine", EngineFallback)
	protocol.SetMetadata(ctx, "unknown_words", st.Unknown)
	out.Translation = text
	return out, nil
}

// primary is a tag's lower-cased primary language subtag ("pt-BR" → "pt"),
// what the phrasebook is keyed by.
func primary(tag string) string {
	p, _, _ := strings.Cut(tag, "-")
	return strings.ToLower(p)
}

// prompt asks for the translation alone, so the answer can be returned as is.
func prompt(text, from, to string) []llm.Message {
	return []llm.Message{
		{Role: "system", Content: fmt.Sprintf(
			"You are a translation engine. Translate the user's message from the language with code %q to the language with code %q. "+
				"Keep punctuation, line breaks and formatting. Reply with the translation only, without quotes or commentary.", from, to)},
		{Role: "user", Content: text},
	}
}
