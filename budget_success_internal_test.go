package retryhttp

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSuccessInlineSameAnswer checks success, decided inline below 400,
// against its definition (failure.go) over every status class.
func TestSuccessInlineSameAnswer(t *testing.T) {
	assert.False(t, success(nil))
	for _, code := range []int{-1, 0, 100, 101, 200, 204, 301, 304, 399, 400, 404, 429, 499, 500, 503, 599, 600} {
		for _, retryAfter := range []string{"", "1"} {
			res := &http.Response{StatusCode: code, Header: http.Header{}}
			if retryAfter != "" {
				res.Header.Set("Retry-After", retryAfter)
			}
			want := !failedStatus(code) && (answered(code) || retryAfter == "")
			assert.Equal(t, want, success(res), "%d, Retry-After %q", code, retryAfter)
		}
	}
}
