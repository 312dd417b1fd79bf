package jsonwalk

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// walk reads doc as an object of known keys "n" (a positive whole number),
// "d" (a duration) and "list" (an array of strings), and returns the
// problems reported, one "path: problem" per line.
func walk(doc string) string {
	var got []string
	w := &Walker{Report: func(path, problem string) { got = append(got, path+": "+problem) }}
	w.Object(json.RawMessage(doc), "", []string{"n", "d", "list"}, func(key string, v json.RawMessage, path string) {
		switch key {
		case "n":
			w.PositiveInt(v, path)
		case "d":
			w.Duration(v, path)
		case "list":
			w.Array(v, path, func(v json.RawMessage, path string) { w.Str(v, path) })
		}
	})
	return strings.Join(got, "\n")
}

func TestWalkerReportsEveryProblemAtItsPath(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{`{"n": 3, "d": "2s", "list": ["a"]}`, ""},
		{`{"n": null}`, ""},
		{`[1]`, "top level: must be an object, got an array"},
		{`{"x": 1}`, "x: unknown key (known keys: n, d, list)"},
		{`{"n": 1, "n": 2}`, "n: repeated key"},
		{`{"n": 0, "d": 5}`, "n: must be a positive whole number, got 0\nd: must be a duration string such as \"250ms\" or \"2s\", got 5"},
		{`{"list": ["a", 7]}`, "list[1]: must be a string, got 7"},
		{`{"d": "` + strings.Repeat("9", 50) + `"}`, `d: must be a duration such as "250ms" or "2s", got "` + strings.Repeat("9", 36) + "..."},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, walk(tt.give), "%s", tt.give)
	}
}

func TestSyntaxErrorNamesLineAndColumn(t *testing.T) {
	data := []byte("{\n  \"n\": 1,\n  }")
	var v any
	err := json.Unmarshal(data, &v)
	assert.Equal(t, "line 3, column 3: invalid character '}' looking for beginning of object key string", SyntaxError(data, err))
	assert.Equal(t, "other", SyntaxError(data, fmt.Errorf("json: other")))
}
