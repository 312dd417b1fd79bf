package retryhttp

import (
	"errors"
	"net/http"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestJudge(t *testing.T) {
	get, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	res := func(code int) *http.Response { return &http.Response{StatusCode: code, Header: http.Header{}} }
	s := settings{maxRetries: 2, shouldRetry: DefaultShouldRetryFn}
	off := settings{maxRetries: 0, shouldRetry: func(Attempt) bool { panic("asked with retries off") }}
	cases := []struct {
		name       string
		s          settings
		a          Attempt
		replayable bool
		sent       int
		want       StopReason
	}{
		{"101 passes through", s, Attempt{Req: get, Res: res(101)}, true, 1, StopSuccess},
		{"200 settles", s, Attempt{Req: get, Res: res(200)}, true, 1, StopSuccess},
		{"404 not retried", s, Attempt{Req: get, Res: res(404)}, true, 1, StopNotRetryable},
		{"503 worth another", s, Attempt{Req: get, Res: res(503)}, true, 1, 0},
		{"503 on the last retry", s, Attempt{Req: get, Res: res(503)}, true, 3, StopRetriesExhausted},
		{"503 not replayable", s, Attempt{Req: get, Res: res(503)}, false, 1, StopBodyNotReplayable},
		{"404 not replayable: not retried anyway", s, Attempt{Req: get, Res: res(404)}, false, 1, StopNotRetryable},
		{"retries off: policy not asked", off, Attempt{Req: get, Res: res(503)}, true, 1, StopNotRetryable},
		{"reset worth another", s, Attempt{Req: get, Err: syscall.ECONNRESET}, true, 2, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, c.s.judge(&c.a, replayBody(c.replayable), c.sent))
		})
	}
}

// replayBody returns the replay of a request whose body can be sent again,
// or of one whose body cannot.
func replayBody(replayable bool) *replay {
	if replayable {
		return &replay{mode: replayNoBody}
	}
	return &replay{mode: replayOnce}
}

func TestMarkGiveUp(t *testing.T) {
	last := errors.New("last")
	assert.ErrorIs(t, markGiveUp(StopRetriesExhausted, 3, last), ErrRetriesExhausted)
	assert.ErrorIs(t, markGiveUp(StopRetriesExhausted, 3, last), last)
	assert.NoError(t, markGiveUp(StopRetriesExhausted, 3, nil), "a last response stays unmarked")
	assert.ErrorIs(t, markGiveUp(StopBudgetRefused, 2, last), ErrRetryBudgetExhausted)
	assert.NoError(t, markGiveUp(StopBudgetRefused, 2, nil))
	assert.ErrorIs(t, markGiveUp(StopCircuitOpen, 2, last), ErrCircuitOpen)
	for _, why := range []StopReason{StopSuccess, StopNotRetryable, StopDelayTooLong, StopDeadline, StopCanceled} {
		assert.Equal(t, last, markGiveUp(why, 2, last), why.String())
	}
}
