package main

import (
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed2409de8f/retryhttp/internal/quota"
	"github.com/seed2409de8f/retryhttp/internal/retryafter"
)

// t0 is the fake clock's start in the advertiser's tests.
var t0 = time.Unix(1_800_000_000, 0)

// TestAdvertiserWindow checks the fixed window on a fake clock: its quota
// per window, the reset to the window's turn, and a new quota at the turn.
func TestAdvertiserWindow(t *testing.T) {
	q := defaultQuotaSetup(false)
	a := newAdvertiser(q, quotaCase{dialect: "draft-11"}, t0)
	at := t0.Add(100 * time.Millisecond)
	for i := range q.limit {
		st := a.admit(at)
		require.True(t, st.ok, "request %d", i+1)
		assert.Equal(t, q.limit-1-i, st.remaining)
		assert.Equal(t, 1900*time.Millisecond, st.reset)
	}
	st := a.admit(at)
	assert.Equal(t, quotaState{ok: false, remaining: 0, reset: 1900 * time.Millisecond, next: 1900 * time.Millisecond}, st)
	st = a.admit(t0.Add(1999 * time.Millisecond))
	assert.False(t, st.ok, "the window has not turned")
	assert.Equal(t, time.Millisecond, st.next)
	st = a.admit(t0.Add(q.window))
	assert.Equal(t, quotaState{ok: true, remaining: q.limit - 1, reset: q.window}, st, "the window turned")
	assert.EqualValues(t, q.limit+1, a.served.Load())
	assert.EqualValues(t, 2, a.refused.Load())
	assert.Equal(t, at, a.first())
}

// TestAdvertiserBucket checks the token bucket on a fake clock: its tokens
// at once, the refill at limit per window, the reset to a full bucket, and
// the wait for the next token.
func TestAdvertiserBucket(t *testing.T) {
	q := defaultQuotaSetup(false) // 50 tokens, 25 a second
	a := newAdvertiser(q, quotaCase{dialect: "draft-11", bucket: true}, t0)
	for i := range q.limit {
		st := a.admit(t0)
		require.True(t, st.ok, "token %d", i+1)
		assert.Equal(t, q.limit-1-i, st.remaining)
	}
	st := a.admit(t0)
	assert.Equal(t, quotaState{ok: false, remaining: 0, reset: 2 * time.Second, next: 40 * time.Millisecond}, st,
		"empty: a token in 1/25s, full in 2s")
	st = a.admit(t0.Add(40 * time.Millisecond))
	assert.True(t, st.ok, "a token refilled")
	assert.Equal(t, 0, st.remaining)
	// 960ms later: 24 tokens refilled, one taken.
	st = a.admit(t0.Add(time.Second))
	assert.True(t, st.ok)
	assert.Equal(t, 23, st.remaining)
	assert.InDelta(t, float64(1080*time.Millisecond), float64(st.reset), float64(time.Millisecond), "27 tokens to refill at 25/s")
	assert.Zero(t, st.next)
	// A clock that steps back refills nothing; a long idle fills the
	// bucket, no more.
	st = a.admit(t0.Add(500 * time.Millisecond))
	assert.Equal(t, 22, st.remaining)
	st = a.admit(t0.Add(time.Hour))
	assert.Equal(t, q.limit-1, st.remaining)
	assert.InDelta(t, float64(40*time.Millisecond), float64(st.reset), float64(time.Millisecond))
	assert.EqualValues(t, q.limit+4, a.served.Load())
	assert.EqualValues(t, 1, a.refused.Load())
}

// TestAdvertiserHeaders writes each dialect's fields for a 200 and for the
// 429 of a spent quota, of both shapes, and reads them back as the
// transport does: its quota reader (internal/quota) finds the remaining
// count and the reset; its DelayFn (internal/retryafter) reads a pause
// from the 429; Retry-After is on the 429s of the cases that have it.
func TestAdvertiserHeaders(t *testing.T) {
	q := defaultQuotaSetup(false)
	for _, c := range allQuotaCases() {
		t.Run(c.dialect+" "+c.server(), func(t *testing.T) {
			a := newAdvertiser(q, c, t0)
			at := t0.Add(500 * time.Millisecond)
			ok := a.admit(at)
			require.True(t, ok.ok)
			h := http.Header{}
			a.header(h, ok, at)
			obs := quota.Read(h, at, quota.IETF|quota.XRateLimit|quota.LLM, 0, false)
			require.Len(t, obs, 1, "%v", h)
			assert.EqualValues(t, q.limit-1, obs[0].Remaining)
			assert.Empty(t, h.Get("Retry-After"), "a 200 states no pause")

			for range q.limit {
				a.admit(at)
			}
			spent := a.admit(at)
			require.False(t, spent.ok)
			h = http.Header{}
			a.header(h, spent, at)
			obs = quota.Read(h, at, quota.IETF|quota.XRateLimit|quota.LLM, 0, false)
			require.Len(t, obs, 1, "%v", h)
			assert.Zero(t, obs[0].Remaining)
			require.True(t, obs[0].HasReset, "%v", h)
			// Whole seconds, rounded up (an epoch: a second more);
			// milliseconds in the LLM fields.
			assert.GreaterOrEqual(t, obs[0].Reset, spent.reset.Round(time.Millisecond), "%v", h)
			assert.LessOrEqual(t, obs[0].Reset, spent.reset+2*time.Second, "%v", h)

			res := &http.Response{StatusCode: http.StatusTooManyRequests, Header: h}
			d, found := retryafter.RateLimitReset(res, func() time.Time { return at })
			assert.True(t, found, "the DelayFn reads the 429's pause: %v", h)
			assert.Positive(t, d)
			if !c.retryAfter {
				assert.Empty(t, h.Get("Retry-After"))
				return
			}
			want := 2 // the window turns in 1.5s
			if c.bucket {
				want = 1 // a token in 40ms
			}
			assert.Equal(t, strconv.Itoa(want), h.Get("Retry-After"))
		})
	}
}

// TestAdvertiserLoopback serves a bucket of 5 tokens (refilling 5 per
// 100s: none in the test's time) stating its quota in draft-11 with
// Retry-After over it, on loopback: 5 GETs are served, the sixth is a 429
// with the fields and Retry-After, and the counts agree.
func TestAdvertiserLoopback(t *testing.T) {
	q := quotaSetup{limit: 5, window: 100 * time.Second}
	a := newAdvertiser(q, quotaCase{dialect: "draft-11", bucket: true, retryAfter: true}, time.Now())
	srv, err := startServer(a.serve, time.Now(), time.Second, 1)
	require.NoError(t, err)
	defer srv.close()
	c := &http.Client{Transport: newBase(), Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	for i := range q.limit + 1 {
		res, err := c.Get(srv.URL + "v1/batch")
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if i < q.limit {
			assert.Equal(t, http.StatusOK, res.StatusCode, "request %d", i+1)
			assert.Equal(t, `"default";q=5;w=100`, res.Header.Get("RateLimit-Policy"))
			continue
		}
		assert.Equal(t, http.StatusTooManyRequests, res.StatusCode)
		assert.Regexp(t, `^"default";r=0;t=(99|100)$`, res.Header.Get("RateLimit"))
		assert.Equal(t, "20", res.Header.Get("Retry-After"), "a token in 20s")
	}
	srv.close()
	assert.EqualValues(t, q.limit, a.served.Load())
	assert.EqualValues(t, 1, a.refused.Load())
	assert.False(t, a.first().IsZero())
}
