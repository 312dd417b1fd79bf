// Package jsonwalk reads a JSON document against a schema written as code:
// objects whose keys are checked (unknown and repeated keys are problems),
// arrays, and scalars of the expected type and range, each problem reported
// with the key path where it is (such as destinations[2].backoff.base), so
// that one pass reports every problem. Package retryhttp's destinations
// file (destination_file.go) is its user: the schema and the types it
// fills are there.
package jsonwalk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Walker reads JSON values, reporting each problem it finds to Report; the
// value read is then the zero value. Report must be set.
type Walker struct {
	// Report receives the key path of a problem and its description.
	Report func(path, problem string)
}

// add reports the problem at path.
func (p *Walker) add(path, format string, args ...any) {
	p.Report(path, fmt.Sprintf(format, args...))
}

// SyntaxError describes a JSON syntax error with its line and column.
func SyntaxError(data []byte, err error) string {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	// Offset counts the bytes read, the offending one included.
	before := data[:min(max(int(se.Offset)-1, 0), len(data))]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d: %s", line, col, se.Error())
}

// Object calls each for every key of the JSON object v, in order, after
// checking that the key is one of known and is not repeated.
func (p *Walker) Object(v json.RawMessage, path string, known []string, each func(key string, v json.RawMessage, path string)) {
	if Type(v) != "object" {
		p.add(pathOr(path), "must be an object, got %s", Describe(v))
		return
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	_, _ = dec.Token() // '{'; v is valid JSON
	seen := map[string]bool{}
	for dec.More() {
		tok, _ := dec.Token()
		key, _ := tok.(string)
		var val json.RawMessage
		_ = dec.Decode(&val)
		keyPath := Join(path, key)
		switch {
		case !slices.Contains(known, key):
			p.add(keyPath, "unknown key (known keys: %s)", strings.Join(known, ", "))
		case seen[key]:
			p.add(keyPath, "repeated key")
		case string(val) == "null":
			// absent
		default:
			each(key, val, keyPath)
		}
		seen[key] = true
	}
}

// Array calls each for every element of the JSON array v.
func (p *Walker) Array(v json.RawMessage, path string, each func(v json.RawMessage, path string)) {
	var elems []json.RawMessage
	if Type(v) != "array" || json.Unmarshal(v, &elems) != nil {
		p.add(path, "must be an array, got %s", Describe(v))
		return
	}
	for i, e := range elems {
		each(e, fmt.Sprintf("%s[%d]", path, i))
	}
}

// Str reads a string.
func (p *Walker) Str(v json.RawMessage, path string) string {
	var s string
	if Type(v) != "string" || json.Unmarshal(v, &s) != nil {
		p.add(path, "must be a string, got %s", Describe(v))
	}
	return s
}

// Boolean reads true or false.
func (p *Walker) Boolean(v json.RawMessage, path string) bool {
	var b bool
	if Type(v) != "boolean" || json.Unmarshal(v, &b) != nil {
		p.add(path, "must be true or false, got %s", Describe(v))
	}
	return b
}

// Integer reads a whole number, and reports whether it could.
func (p *Walker) Integer(v json.RawMessage, path string) (int, bool) {
	n, err := strconv.Atoi(string(v))
	if err != nil {
		p.add(path, "must be a whole number, got %s", Describe(v))
		return 0, false
	}
	return n, true
}

// PositiveInt reads a whole number above zero.
func (p *Walker) PositiveInt(v json.RawMessage, path string) int {
	n, ok := p.Integer(v, path)
	if ok && n <= 0 {
		p.add(path, "must be a positive whole number, got %s", Describe(v))
	}
	return n
}

// Number reads a finite number, and reports whether it could.
func (p *Walker) Number(v json.RawMessage, path string) (float64, bool) {
	if Type(v) != "number" {
		p.add(path, "must be a number, got %s", Describe(v))
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		p.add(path, "must be a finite number, got %s", Describe(v))
		return 0, false
	}
	return f, true
}

// Positive reads a number above zero.
func (p *Walker) Positive(v json.RawMessage, path string) float64 {
	f, ok := p.Number(v, path)
	if ok && !(f > 0) {
		p.add(path, "must be a positive number, got %s", Describe(v))
	}
	return f
}

// Duration reads a Go duration string ("250ms"), and reports whether it
// could.
func (p *Walker) Duration(v json.RawMessage, path string) (time.Duration, bool) {
	if Type(v) != "string" {
		p.add(path, `must be a duration string such as "250ms" or "2s", got %s`, Describe(v))
		return 0, false
	}
	s := p.Str(v, path)
	d, err := time.ParseDuration(s)
	if err != nil {
		p.add(path, `must be a duration such as "250ms" or "2s", got %s`, Describe(v))
		return 0, false
	}
	return d, true
}

// PositiveDuration reads a duration above zero.
func (p *Walker) PositiveDuration(v json.RawMessage, path string) time.Duration {
	d, ok := p.Duration(v, path)
	if ok && d <= 0 {
		p.add(path, "must be a positive duration, got %s", Describe(v))
	}
	return d
}

// Type returns the type of the JSON value v: "object", "array",
// "string", "number", "boolean" or "null".
func Type(v json.RawMessage) string {
	if len(v) == 0 {
		return ""
	}
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// Describe spells the JSON value v for an error: a scalar as it is written
// (cut after 40 bytes), a container by its type.
func Describe(v json.RawMessage) string {
	switch Type(v) {
	case "object":
		return "an object"
	case "array":
		return "an array"
	}
	if len(v) > 40 {
		return string(v[:37]) + "..."
	}
	return string(v)
}

// Join returns the path of key inside the object at path.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// pathOr names path, or the top level of the document.
func pathOr(path string) string {
	if path == "" {
		return "top level"
	}
	return path
}
