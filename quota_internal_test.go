package retryhttp

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/seed2409de8f/retryhttp/internal/quota"
)

// The wait of a 429's retry whose quota the process's book paces is cut
// to the turn the book reckons: here a client alone spent a window of 50
// that began as its first request went (0.3 s past a second), and the
// server states its turn as the epoch second after it (0.7 s late); a
// send too many met the 429. DefaultDelayFn would wait the stated
// second, or a third more; the book lets the retry go at the turn. A
// Retry-After, or another status, keeps the wait.
func TestQuotaTurnCap(t *testing.T) {
	t.Cleanup(ForgetQuotas)
	start := time.Unix(1_800_000_000, 300_000_000)
	clock := newStepClock(start)
	tr := New(WithClock(clock))
	req := mustRequest("http://quota-turn-cap.test/v1/items")
	k, route := quotaKey(req, ""), routeOf(req)
	header := func(r int) http.Header {
		return http.Header{"X-Ratelimit-Limit": {"50"}, "X-Ratelimit-Remaining": {fmt.Sprint(r)},
			"X-Ratelimit-Reset": {fmt.Sprint(start.Add(2*time.Second).Unix() + 1)}}
	}
	processQuotas.Done(quota.Open(k, route, start), quota.Read(header(49), start, quota.XRateLimit, 0, false), false, start)
	for r := 48; r >= 0; r-- {
		tk, hold := processQuotas.Reserve(k, route, start, time.Minute, nil)
		if !assert.Nil(t, hold, "r=%d", r) {
			return
		}
		processQuotas.Done(tk, quota.Read(header(r), start, quota.XRateLimit, 0, false), false, start)
	}
	at := start.Add(500 * time.Millisecond)
	clock.Advance(500 * time.Millisecond)
	res := &http.Response{StatusCode: http.StatusTooManyRequests, Header: header(0), Request: req}
	_, hold := processQuotas.Reserve(k, route, at, time.Minute, nil)
	assert.NotNil(t, hold, "the window is spent")
	processQuotas.Done(quota.Open(k, route, at), quota.Read(res.Header, at, quota.XRateLimit, 0, false), true, at)

	q := &quotaSend{on: true, asked: true}
	capped := func(req *http.Request, res *http.Response, d time.Duration, paced bool) time.Duration {
		t.Helper()
		d, p := tr.quotaTurnCap(req, q, res, d)
		assert.Equal(t, paced, p, "paced: the book holds the retry to the turn")
		return d
	}
	stated := 2200 * time.Millisecond // to the second stated
	assert.Equal(t, 1500*time.Millisecond, capped(req, res, stated+stated/3, true), "the turn, not the second stated")
	assert.Equal(t, time.Second, capped(req, res, time.Second, true), "a shorter wait is kept")
	res.Header.Set("Retry-After", "3")
	assert.Equal(t, 3*time.Second, capped(req, res, 3*time.Second, false), "Retry-After is waited in full")
	res.Header.Del("Retry-After")
	res.StatusCode = http.StatusServiceUnavailable
	assert.Equal(t, 3*time.Second, capped(req, res, 3*time.Second, false), "not a 429")

	// A turn the book did not find sooner: the one the 429 states, not
	// later (DefaultDelayFn's third more), nor sooner.
	req2 := mustRequest("http://quota-turn-cap-2.test/v1/items")
	k2 := quotaKey(req2, "")
	fresh := http.Header{"Ratelimit": {`"q";r=9;t=2`}, "Ratelimit-Policy": {`"q";q=10;w=2`}}
	processQuotas.Done(quota.Open(k2, route, at), quota.Read(fresh, at, quota.IETF, 0, false), false, at)
	ietf := http.Header{"Ratelimit": {`"q";r=0;t=2`}, "Ratelimit-Policy": {`"q";q=10;w=2`}}
	processQuotas.Done(quota.Open(k2, route, at), quota.Read(ietf, at, quota.IETF, 0, false), true, at)
	res2 := &http.Response{StatusCode: http.StatusTooManyRequests, Header: ietf, Request: req2}
	if _, found, ok := processQuotas.TurnIn(k2, route, at); assert.True(t, ok) {
		assert.False(t, found)
	}
	assert.Equal(t, 2*time.Second, capped(req2, res2, 2*time.Second+2*time.Second/3, true), "the turn stated")
	assert.Equal(t, 1500*time.Millisecond, capped(req2, res2, 1500*time.Millisecond, true))

	// A 429 of a host whose quota the book does not know: not paced.
	req3 := mustRequest("http://quota-turn-cap-3.test/v1/items")
	res3 := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": nil}, Request: req3}
	delete(res3.Header, "Retry-After")
	assert.Equal(t, time.Second, capped(req3, res3, time.Second, false))
}
