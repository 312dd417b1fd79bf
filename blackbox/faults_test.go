package blackbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// The fault matrix: every fault below, produced for real on loopback by a
// rawServer (or by dialing a closed port), for each kind of request. The
// expected number of attempts of each case follows from the rules of
// docs/default.md; docs/reliability.md lists the cases.

// requestKind is one way of sending a request, as the policy tells them
// apart: idempotent or not, with no body, a body with GetBody (replayed from
// GetBody) or a body without (buffered by the transport). A GET with a body
// is left out: it is rare, and its method decides like a PUT's.
type requestKind struct {
	name    string
	method  string
	body    bool
	getBody bool
}

// The kinds, in the order of faultCase.wantAttempts.
var requestKinds = [...]requestKind{
	{name: "GET", method: http.MethodGet},
	{name: "PUT with GetBody", method: http.MethodPut, body: true, getBody: true},
	{name: "PUT without GetBody", method: http.MethodPut, body: true},
	{name: "POST", method: http.MethodPost},
	{name: "POST with GetBody", method: http.MethodPost, body: true, getBody: true},
	{name: "POST without GetBody", method: http.MethodPost, body: true},
}

// newRequest builds the request of kind k, carrying body if it has one.
func (k requestKind) newRequest(t *testing.T, ctx context.Context, url string, body []byte) *http.Request {
	t.Helper()
	var r io.Reader
	switch {
	case k.body && k.getBody:
		r = bytes.NewReader(body)
	case k.body:
		r = &testkit.CloseBody{Reader: bytes.NewReader(body)}
	}
	req, err := http.NewRequestWithContext(ctx, k.method, url, r)
	require.NoError(t, err)
	require.Equal(t, k.getBody, req.GetBody != nil)
	return req
}

const (
	matrixAttemptTimeout = 300 * time.Millisecond
	matrixDeadline       = 10 * time.Second
	// deadlineTolerance is how long past its deadline a call may return:
	// generous, for the race detector on two cores.
	deadlineTolerance = time.Second
	every             = math.MaxInt64 // faultCase.failures: every attempt
)

// okBody is the body of the normal answer, which must reach the caller intact.
var okBody = testkit.Payload(8 << 10)

// trickled is the body a trickling reply sends, one byte at a time.
var trickled = testkit.Payload(20)

// outcome checks what the caller got when the last attempt met the fault.
type outcome func(t *testing.T, res *http.Response, err error)

// wantErr expects an error matching target, and no response.
func wantErr(target error) outcome {
	return func(t *testing.T, res *http.Response, err error) {
		assert.Nil(t, res)
		assert.ErrorIs(t, err, target)
	}
}

// wantErrOneOf expects an error matching one of targets, and no response:
// which one depends on when the client reads what the server sent.
func wantErrOneOf(targets ...error) outcome {
	return func(t *testing.T, res *http.Response, err error) {
		assert.Nil(t, res)
		for _, target := range targets {
			if errors.Is(err, target) {
				return
			}
		}
		t.Errorf("error %v matches none of %v", err, targets)
	}
}

// wantBody expects a response with status and body, intact.
func wantBody(status int, body []byte) outcome {
	return func(t *testing.T, res *http.Response, err error) {
		require.NoError(t, err)
		assert.Equal(t, status, res.StatusCode)
		assert.Equal(t, sha256.Sum256(body), sha256.Sum256([]byte(testkit.ReadAll(t, res))), "response body intact")
	}
}

// wantBodyCut expects a response with status whose body cannot be read to
// the end: the caller sees the error the server caused.
func wantBodyCut(status int) outcome {
	return func(t *testing.T, res *http.Response, err error) {
		require.NoError(t, err)
		defer res.Body.Close()
		assert.Equal(t, status, res.StatusCode)
		_, err = io.ReadAll(res.Body)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	}
}

// faultCase is one row of the matrix.
type faultCase struct {
	name string
	// fault is how the server answers the first failures requests (nil
	// with refuse); later ones get 200 and okBody.
	fault    testkit.Reply
	refuse   bool // the first failures dials go to a closed port
	failures int64
	// noAttemptTimeout removes the attempt timeout; deadline replaces the
	// caller's deadline.
	noAttemptTimeout bool
	deadline         time.Duration
	// wantAttempts is the number of attempts for each of requestKinds,
	// from the rule of docs/default.md named in the comment of the row.
	wantAttempts [len(requestKinds)]int64
	// wantLast checks the outcome when the last attempt met the fault.
	wantLast outcome
}

var (
	idemOnly = func(n int64) [len(requestKinds)]int64 { return [...]int64{n, n, n, 1, 1, 1} }
	allKinds = func(n int64) [len(requestKinds)]int64 { return [...]int64{n, n, n, n, n, n} }
)

var faultCases = []faultCase{
	// Rule 3: a dial error proves nothing was sent: any method.
	{name: "refused once", refuse: true, failures: 1, wantAttempts: allKinds(2)},
	{name: "refused always", refuse: true, failures: every, wantAttempts: allKinds(4), wantLast: wantErr(syscall.ECONNREFUSED)},
	// Rule 5: the server may have acted: only requests guessed idempotent.
	{name: "reset before the response", fault: testkit.ReplyReset, failures: 1, wantAttempts: idemOnly(2), wantLast: wantErr(syscall.ECONNRESET)},
	{name: "reset before the response, always", fault: testkit.ReplyReset, failures: every, wantAttempts: idemOnly(4), wantLast: wantErr(syscall.ECONNRESET)},
	{
		name: "reset mid-headers", fault: testkit.ReplyResetMidHeader, failures: 1, wantAttempts: idemOnly(2),
		wantLast: wantErrOneOf(syscall.ECONNRESET, io.ErrUnexpectedEOF), // net/http reports a cut header as an unexpected EOF
	},
	{name: "closed mid-headers", fault: testkit.ReplyCloseMidHeader, failures: 1, wantAttempts: idemOnly(2), wantLast: wantErr(io.ErrUnexpectedEOF)},
	// The response was handed over: nothing is retried after that; the
	// caller reads the error (step 4 of the loop: a 200 is an answer).
	{name: "200 body cut", fault: testkit.ReplyCutBody(200), failures: every, wantAttempts: allKinds(1), wantLast: wantBodyCut(200)},
	// Rule 10: a 503 is retried only when idempotent; its cut body is
	// drained and dropped, or handed over as it is.
	{name: "503 body cut", fault: testkit.ReplyCutBody(503), failures: 1, wantAttempts: idemOnly(2), wantLast: wantBodyCut(503)},
	// Rule 4: the attempt timeout is a timeout: only idempotent requests.
	{name: "never answers", fault: testkit.ReplyNever, failures: 1, wantAttempts: idemOnly(2), wantLast: wantErr(retryhttp.ErrAttemptTimeout)},
	{name: "never answers, always", fault: testkit.ReplyNever, failures: every, wantAttempts: idemOnly(4), wantLast: wantErr(retryhttp.ErrAttemptTimeout)},
	// Rule 1: the caller's own deadline is never retried, and the call
	// returns at that deadline.
	{
		name: "never answers, caller deadline", fault: testkit.ReplyNever, failures: every, noAttemptTimeout: true,
		deadline: 300 * time.Millisecond, wantAttempts: allKinds(1), wantLast: wantErr(context.DeadlineExceeded),
	},
	{
		name: "slow headers within the attempt timeout", fault: testkit.ReplySlowHeaders(time.Millisecond, okBody),
		failures: every, wantAttempts: allKinds(1), wantLast: wantBody(200, okBody),
	},
	{name: "slow headers past the attempt timeout", fault: testkit.ReplySlowHeaders(25*time.Millisecond, okBody), failures: 1, wantAttempts: idemOnly(2), wantLast: wantErr(retryhttp.ErrAttemptTimeout)},
	// The attempt timeout does not cut a body handed over.
	{
		name: "200 body trickles past the attempt timeout", fault: testkit.ReplyTrickle(200, trickled, 25*time.Millisecond),
		failures: every, wantAttempts: allKinds(1), wantLast: wantBody(200, trickled),
	},
	// Rule 10, and a discarded body that trickles is cut by one more
	// attempt timeout.
	{name: "503 body trickles", fault: testkit.ReplyTrickle(503, trickled, 25*time.Millisecond), failures: 1, wantAttempts: idemOnly(2), wantLast: wantBody(503, trickled)},
}

func TestFaultMatrix(t *testing.T) {
	for _, tt := range faultCases {
		t.Run(tt.name, func(t *testing.T) {
			// Runs after the cleanups of the subtests: nothing they
			// started may remain.
			ignore := goleak.IgnoreCurrent()
			t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
			for i, k := range requestKinds {
				t.Run(k.name, func(t *testing.T) {
					t.Parallel()
					runFaultCase(t, tt, k, tt.wantAttempts[i])
				})
			}
		})
	}
}

func runFaultCase(t *testing.T, tt faultCase, k requestKind, want int64) {
	srv := testkit.NewRawServer(t, func(n int64) testkit.Reply {
		if !tt.refuse && n <= tt.failures {
			return tt.fault
		}
		return testkit.ReplyWith(200, okBody)
	})
	var dials testkit.CountingTransport // counts dials, in attempts
	closed := testkit.RefusedAddr(t)
	dialer := &net.Dialer{}
	base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if n := dials.Attempts.Add(1); tt.refuse && n <= tt.failures {
			addr = closed
		}
		return dialer.DialContext(ctx, network, addr)
	}}
	t.Cleanup(base.CloseIdleConnections)
	counted := &testkit.CountingTransport{RoundTripper: base}
	options := []retryhttp.Option{retryhttp.WithTransport(counted), testkit.NoDelay}
	if !tt.noAttemptTimeout {
		options = append(options, retryhttp.WithAttemptTimeout(matrixAttemptTimeout))
	}
	tr := testkit.NewTransport(t, options...)

	deadline := matrixDeadline
	if tt.deadline > 0 {
		deadline = tt.deadline
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var sent []byte
	if k.body {
		sent = testkit.Payload(16 << 10)
	}
	req := k.newRequest(t, ctx, srv.URL(), sent)
	before := testkit.Snapshot(req)

	start := time.Now()
	res, err := tr.RoundTrip(req)
	elapsed := time.Since(start)
	if int64(want) <= tt.failures {
		tt.wantLast(t, res, err)
	} else {
		wantBody(200, okBody)(t, res, err)
	}
	if err != nil {
		assert.Equal(t, want == 1+retryhttp.DefaultMaxRetries, errors.Is(err, retryhttp.ErrRetriesExhausted),
			"joined with ErrRetriesExhausted exactly when the retries ran out: %v", err)
	}
	tr.CloseIdleConnections()
	srv.Close() // waits for the server's goroutines: its counts are final

	assert.Less(t, elapsed, deadline+deadlineTolerance, "never past the deadline")
	assert.Equal(t, want, counted.Attempts.Load(), "attempts")
	wantRequests := want // every attempt reaches the server, but refused ones
	if tt.refuse {
		wantRequests -= min(want, tt.failures)
	}
	sums := srv.Received()
	assert.Len(t, sums, int(wantRequests), "requests the server read")
	for i, sum := range sums {
		assert.Equal(t, sha256.Sum256(sent), sum, "request body of attempt %d byte-identical", i+1)
	}
	assert.LessOrEqual(t, srv.Conns.Load(), max(wantRequests, 1), "at most one connection per request")
	assertUnchanged(t, before, req)
}

// assertUnchanged checks that req is as it was when before was taken.
func assertUnchanged(t *testing.T, before testkit.RequestSnapshot, req *http.Request) {
	t.Helper()
	after := testkit.Snapshot(req)
	assert.True(t, before.Ctx == after.Ctx, "context unchanged")
	assert.True(t, before.Body == after.Body, "body unchanged")
	before.Ctx, after.Ctx, before.Body, after.Body = nil, nil, nil, nil
	assert.Equal(t, before, after, "request unchanged")
}
