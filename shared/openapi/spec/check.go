package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	verrors "github.com/pb33f/libopenapi-validator/errors"
)

// Checker validates a document and traffic against it with an
// independent OpenAPI 3.1 implementation (pb33f's libopenapi and
// libopenapi-validator), so the document is checked by code that did not
// write it.
type Checker struct {
	v validator.Validator
}

// NewChecker parses doc.
func NewChecker(doc []byte) (*Checker, error) {
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi: parse: %w", err)
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		return nil, fmt.Errorf("openapi: build model: %w", errors.Join(errs...))
	}
	return &Checker{v: v}, nil
}

// Document checks the document against the OpenAPI 3.1 schema.
func (c *Checker) Document() error {
	if ok, errs := c.v.ValidateDocument(); !ok {
		return joinErrors(errs)
	}
	return nil
}

// Exchange is one recorded request and its answer.
type Exchange struct {
	Method, URL string
	Header      http.Header
	Body        []byte
	Status      int
	RespHeader  http.Header
	RespBody    []byte
}

// Check validates the answer of x against the document, and its request
// too when the answer is a success: a request the server refused was
// often meant to break the document's rules (an unsigned call for a 401,
// a malformed body for a 400), and its answer is what is checked.
func (c *Checker) Check(x Exchange) error {
	req, err := http.NewRequest(x.Method, x.URL, bytes.NewReader(x.Body))
	if err != nil {
		return fmt.Errorf("openapi: rebuild request: %w", err)
	}
	req.Header = x.Header.Clone()
	resp := &http.Response{StatusCode: x.Status, Header: x.RespHeader.Clone(), Body: io.NopCloser(bytes.NewReader(x.RespBody)), Request: req}
	var errs []*verrors.ValidationError
	if x.Status < 400 {
		_, errs = c.v.ValidateHttpRequestResponse(req, resp)
	} else {
		_, errs = c.v.ValidateHttpResponse(req, resp)
	}
	if len(errs) > 0 {
		return joinErrors(errs)
	}
	return nil
}

func joinErrors(errs []*verrors.ValidationError) error {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n\t%s: %s", e.Message, e.Reason)
		for _, s := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n\t\t%s at %s", s.Reason, s.FieldPath)
		}
	}
	return errors.New(strings.TrimPrefix(b.String(), "\n\t"))
}
