// Package webhook is the one way a webhook's templates (webhooks.<name>.text
// and .id in the config) are parsed and run over a JSON body: config
// validates with Parse, and the API renders with Render, so a template that
// loads is a template that runs the same way. It must not import the
// runtime packages: config imports it.
package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/template"
)

// Template is a parsed webhook template. Its zero value is not usable;
// Parse makes one. It is safe for concurrent use.
type Template struct {
	t *template.Template
}

// Funcs are the functions a template may call besides text/template's
// built-ins (index, len, print, printf, eq, and, or, ...):
//
//   - json: the compact JSON of a value (an object, an array, a string
//     quoted), for showing a part of the body whole: {{json .labels}}.
//   - join: the elements of an array written with %v, separated by sep:
//     {{join .tags ", "}}.
//
// Numbers in the body are kept as written (json.Number): {{.build}} is
// "12345678901", never "1.2345678901e+10"; compare them as text, {{if eq
// (print .count) "0"}}.
var Funcs = template.FuncMap{
	"json": func(v any) (string, error) {
		data, err := json.Marshal(v)
		return string(data), err
	},
	"join": func(v []any, sep string) string {
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = fmt.Sprint(e)
		}
		return strings.Join(parts, sep)
	},
}

// Parse parses src, named name in errors ("webhooks.ci.text"), with
// Funcs and the option missingkey=error: a key the body lacks is an error
// when the template runs ({{index . "key"}} and {{with}} read an
// optional key without one). The error is text/template's, which says
// the line and column within src.
func Parse(name, src string) (*Template, error) {
	t, err := template.New(name).Funcs(Funcs).Option("missingkey=error").Parse(src)
	if err != nil {
		return nil, err
	}
	return &Template{t: t}, nil
}

// ErrNotJSON is what Decode wraps when a body is not one JSON value.
var ErrNotJSON = errors.New("the body is not one JSON value")

// Decode reads a body for Render: one JSON value (an object, usually),
// numbers as json.Number. Anything else, or more than one value, is an
// error wrapping ErrNotJSON.
func Decode(body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: something follows the first JSON value", ErrNotJSON)
	}
	return v, nil
}

// maxOutput bounds what one Render writes, whatever the template does
// (a range over a huge array): a caller cuts its result much shorter.
const maxOutput = 4 << 20

// ErrTooLong is what Render returns when a template writes more than
// maxOutput bytes.
var ErrTooLong = fmt.Errorf("the template wrote more than %d bytes", maxOutput)

// Render runs t over data (Decode's result) and returns what it wrote.
// A failure — a missing key, a value of the wrong type for a function, an
// index out of range — is returned as text/template's error, which names
// the template and where in it the failure is; the output written before
// it is discarded.
func (t *Template) Render(data any) (string, error) {
	var b limitedBuilder
	if err := t.t.Execute(&b, data); err != nil {
		if b.over {
			return "", ErrTooLong
		}
		return "", err
	}
	return b.String(), nil
}

// limitedBuilder is a strings.Builder that refuses to grow past
// maxOutput.
type limitedBuilder struct {
	strings.Builder
	over bool
}

func (b *limitedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxOutput {
		b.over = true
		return 0, ErrTooLong
	}
	return b.Builder.Write(p)
}
