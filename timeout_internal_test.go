package retryhttp

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// answer is a base transport that answers every request with body.
type answer struct{ body io.ReadCloser }

func (a answer) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 503, Body: a.body, ContentLength: -1, Request: req}, nil
}

// Regression: closing a discarded body rearmed for its drain left the
// attempt's timer pending for a whole attempt timeout.
func TestDiscardStopsRearmedTimer(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	require.NoError(t, err)
	res, err := sendWithTimeout(realClock{}, answer{io.NopCloser(strings.NewReader("down"))}, req, time.Hour)
	require.NoError(t, err)
	b, ok := res.Body.(*cancelBody)
	require.True(t, ok)

	discard(res)

	assert.False(t, b.timer.Stop(), "the timer was already stopped by Close")
}

// Regression: an empty body (HEAD, 204, 304) kept its attempt's context
// alive until the caller closed it, which many callers never do.
func TestEmptyBodyReleasesAttemptAtOnce(t *testing.T) {
	req, err := http.NewRequest(http.MethodHead, "http://example.test/", nil)
	require.NoError(t, err)
	var sent *http.Request
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent = r
		return &http.Response{StatusCode: 204, Body: http.NoBody, Request: r}, nil
	})
	res, err := sendWithTimeout(realClock{}, base, req, time.Hour)
	require.NoError(t, err)

	assert.Equal(t, http.NoBody, res.Body, "the body is not wrapped")
	assert.Error(t, sent.Context().Err(), "the attempt's context is released")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
