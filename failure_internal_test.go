package retryhttp

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/seed2409de8f/retryhttp/internal/breaker"
	"github.com/stretchr/testify/assert"
)

// TestFailureAnswers pins the five answers to "is this outcome a failure?"
// (failure.go) for each status: the policy's and the stop reasons' answered,
// the breaker's and Pushback's failedStatus, and the budget's success, which
// also fails a 4xx carrying Retry-After.
func TestFailureAnswers(t *testing.T) {
	tests := []struct {
		code       int
		retryAfter bool
		answered   bool // policy, stop reasons
		failed     bool // breaker, Pushback
		success    bool // budget
	}{
		{http.StatusSwitchingProtocols, false, true, false, true},
		{http.StatusOK, false, true, false, true},
		{http.StatusOK, true, true, false, true},
		{http.StatusFound, false, true, false, true},
		{http.StatusBadRequest, false, false, false, true},
		{http.StatusNotFound, false, false, false, true},
		{http.StatusConflict, true, false, false, false},
		{http.StatusTooManyRequests, false, false, true, false},
		{http.StatusInternalServerError, false, false, true, false},
		{http.StatusServiceUnavailable, true, false, true, false},
		{599, false, false, true, false},
	}
	for _, tt := range tests {
		res := &http.Response{StatusCode: tt.code, Header: http.Header{}}
		if tt.retryAfter {
			res.Header.Set("Retry-After", "1")
		}
		req, _ := http.NewRequest(http.MethodGet, "http://example.com/", nil)
		assert.Equal(t, tt.answered, answered(tt.code), "answered(%d)", tt.code)
		assert.Equal(t, tt.failed, failedStatus(tt.code), "failedStatus(%d)", tt.code)
		assert.Equal(t, tt.success, success(res), "success(%d, Retry-After %v)", tt.code, tt.retryAfter)
		wantStop := StopNotRetryable
		if tt.answered {
			wantStop = StopSuccess
		}
		assert.Equal(t, wantStop, settled(req, res, nil), "settled(%d)", tt.code)
		wantSample := breaker.Success
		if tt.failed {
			wantSample = breaker.Failure
		}
		assert.Equal(t, wantSample, sample(context.Background(), res, nil), "sample(%d)", tt.code)
	}
	assert.False(t, success(nil), "no response: the budget's failure")
	assert.Equal(t, breaker.Failure, sample(context.Background(), nil, errors.New("reset")), "an error fails the breaker's sample")
}
