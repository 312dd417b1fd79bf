package retryhttp

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOuterAttempt(t *testing.T) {
	tests := []struct {
		give string
		want int
	}{
		{"attempt=1; max=3", 1},
		{"attempt=2; max=3", 2},
		{"max=3; attempt=3", 3},
		{"  attempt=2 ;max=3", 2},
		{"ATTEMPT=2; max=3", 2},
		{"attempt=2", 2},
		{"", 0},
		{"max=3", 0},
		{"attempt=; max=3", 0},
		{"attempt=x; max=3", 0},
		{"attempt=0; max=3", 0},
		{"attempt=-2; max=3", 0},
		{"attempt=+2; max=3", 2},
		{"attempt=99999999999999999999999; max=3", 0},
		{"attempt=2000000; max=3", 0},
		{"attempt=2;" + strings.Repeat(" ", 100), 0},
		{"attempt = 2", 0},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			assert.Equal(t, tt.want, outerAttempt(tt.give))
		})
	}
}

func TestOuterRetry(t *testing.T) {
	tests := []struct {
		name string
		give http.Header
		want bool
	}{
		{"none", http.Header{}, false},
		{"first attempt", http.Header{"Amz-Sdk-Request": {"attempt=1; max=3"}}, false},
		{"second attempt", http.Header{"Amz-Sdk-Request": {"attempt=2; max=3"}}, true},
		{"two values", http.Header{"Amz-Sdk-Request": {"attempt=2; max=3", "attempt=1; max=3"}}, false},
		{"nil value", http.Header{"Amz-Sdk-Request": nil}, false},
		{"not canonical: not read", http.Header{"amz-sdk-request": {"attempt=2; max=3"}}, false},
		{"beside a key, a name as long", http.Header{"Amz-Sdk-Request": {"attempt=2; max=3"}, "Idempotency-Key": {"k"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := scanHeader(tt.give)
			assert.Equal(t, tt.want, f.outerRetry)
		})
	}
}

func TestKeyForCarriesOuterInvocationID(t *testing.T) {
	const id = "0d7e1a4c-3b0f-4c53-9d0e-8f1b2a3c4d5e"
	tests := []struct {
		name string
		give []string
		same bool
	}{
		{"a UUID", []string{id}, true},
		{"in upper case: the same UUID", []string{strings.ToUpper(id)}, true},
		{"braced", []string{"{" + id + "}"}, false},
		{"urn", []string{"urn:uuid:" + id}, false},
		{"not a UUID", []string{strings.Repeat("x", 36)}, false},
		{"two values", []string{id, id}, false},
		{"empty", []string{""}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &http.Request{Header: http.Header{"Amz-Sdk-Invocation-Id": tt.give}}
			key, err := keyFor(req)
			assert.NoError(t, err)
			assert.Equal(t, tt.same, key.String() == id, "key %s", key)
		})
	}
}
