package retryhttp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/respbody"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checksumServer answers 503 to every request and records the SHA-256 and
// length of each request body it receives.
type checksumServer struct {
	*testkit.CountingServer
	mu   sync.Mutex
	sums [][sha256.Size]byte
	lens []int
}

func newChecksumServer(t *testing.T, status int) *checksumServer {
	t.Helper()
	s := &checksumServer{}
	s.CountingServer = testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.sums = append(s.sums, sha256.Sum256(b))
		s.lens = append(s.lens, len(b))
		s.mu.Unlock()
		w.WriteHeader(status)
	})
	return s
}

func (s *checksumServer) received() ([][sha256.Size]byte, []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][sha256.Size]byte(nil), s.sums...), append([]int(nil), s.lens...)
}

func TestBodyArrivesIntactOnEveryAttempt(t *testing.T) {
	const limit = 64 << 10
	tests := []struct {
		name     string
		giveBody func(b []byte) io.Reader
		giveSize int
		wantGet  bool // whether http.NewRequest sets GetBody
	}{
		{
			name:     "GetBody from bytes.Reader",
			giveBody: func(b []byte) io.Reader { return bytes.NewReader(b) },
			giveSize: 256 << 10, wantGet: true,
		},
		{
			name:     "no GetBody, buffered",
			giveBody: func(b []byte) io.Reader { return &testkit.CloseBody{Reader: bytes.NewReader(b)} },
			giveSize: 40 << 10,
		},
		{
			name:     "no GetBody, exactly the buffer limit",
			giveBody: func(b []byte) io.Reader { return &testkit.CloseBody{Reader: bytes.NewReader(b)} },
			giveSize: limit,
		},
		{
			name:     "no GetBody, read in tiny pieces",
			giveBody: func(b []byte) io.Reader { return &testkit.CloseBody{Reader: iotest.OneByteReader(bytes.NewReader(b))} },
			giveSize: 5000,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newChecksumServer(t, 503)
			tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithBodyBufferLimit(limit))
			data := testkit.Payload(tt.giveSize)
			req := testkit.NewRequest(t, http.MethodPost, srv.URL, tt.giveBody(data))
			require.Equal(t, tt.wantGet, req.GetBody != nil)
			req.Header.Set("Idempotency-Key", "upload-1")

			res, err := tr.RoundTrip(req)
			require.NoError(t, err)
			testkit.ReadAll(t, res)

			sums, lens := srv.received()
			assert.Equal(t, 503, res.StatusCode)
			assert.Equal(t, testkit.Repeat(len(data), 4), lens)
			assert.Equal(t, testkit.Repeat(sha256.Sum256(data), 4), sums, "byte-identical on every attempt")
		})
	}
}

func TestBodyOverBufferLimitIsStreamedOnce(t *testing.T) {
	srv := newChecksumServer(t, 503)
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithBodyBufferLimit(1024))
	data := testkit.Payload(64<<10 + 1)
	body := &testkit.CloseBody{Reader: bytes.NewReader(data)}
	req := testkit.NewRequest(t, http.MethodPut, srv.URL, body)

	res, err := tr.RoundTrip(req)
	require.NoError(t, err)
	testkit.ReadAll(t, res)

	sums, lens := srv.received()
	assert.Equal(t, 503, res.StatusCode, "the response of the single attempt")
	assert.Equal(t, []int{len(data)}, lens, "sent once, not retried")
	assert.Equal(t, [][sha256.Size]byte{sha256.Sum256(data)}, sums, "whole and unchanged")
	assert.Eventually(t, body.Closed.Load, 5*time.Second, time.Millisecond)
}

func TestBodyOneByteOverLimitIsNotRetried(t *testing.T) {
	srv := newChecksumServer(t, 503)
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithBodyBufferLimit(10))
	data := []byte("0123456789X")

	res, err := tr.RoundTrip(testkit.NewRequest(t, http.MethodPut, srv.URL, &testkit.CloseBody{Reader: bytes.NewReader(data)}))
	require.NoError(t, err)
	testkit.ReadAll(t, res)

	sums, _ := srv.received()
	assert.Equal(t, [][sha256.Size]byte{sha256.Sum256(data)}, sums)
}

func TestBodyReadErrorIsErrBufferingBody(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(200))
	tr := testkit.NewTransport(t, testkit.NoDelay)
	errRead := errors.New("disk on fire")
	body := &testkit.CloseBody{Reader: io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(errRead))}

	res, err := tr.RoundTrip(testkit.NewRequest(t, http.MethodPut, srv.URL, body))

	assert.Nil(t, res)
	assert.ErrorIs(t, err, retryhttp.ErrBufferingBody)
	assert.ErrorIs(t, err, errRead)
	assert.Eventually(t, body.Closed.Load, 5*time.Second, time.Millisecond, "the caller's body is closed")
	assert.LessOrEqual(t, srv.Attempts.Load(), int64(1), "not retried")
}

func TestGetBodyErrorIsErrSeekingBody(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(503))
	tr := testkit.NewTransport(t, testkit.NoDelay)
	errGet := errors.New("cannot rewind")
	req := testkit.NewRequest(t, http.MethodPut, srv.URL, strings.NewReader("payload"))
	req.GetBody = func() (io.ReadCloser, error) { return nil, errGet }

	res, err := tr.RoundTrip(req)

	assert.Nil(t, res)
	assert.ErrorIs(t, err, retryhttp.ErrSeekingBody)
	assert.ErrorIs(t, err, errGet)
	assert.Equal(t, int64(1), srv.Attempts.Load(), "the retry was not sent")
}

func TestWithPreventRetryWithBody(t *testing.T) {
	tests := []struct {
		name     string
		giveBody io.Reader
		want     int64
	}{
		{name: "body", giveBody: strings.NewReader("payload"), want: 1},
		{name: "body without GetBody", giveBody: &testkit.CloseBody{Reader: strings.NewReader("payload")}, want: 1},
		{name: "no body", giveBody: nil, want: 4},
		{name: "http.NoBody", giveBody: http.NoBody, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, testkit.Always(503))
			tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithPreventRetryWithBody(true))

			res, err := tr.RoundTrip(testkit.NewRequest(t, http.MethodPut, srv.URL, tt.giveBody))
			require.NoError(t, err)
			testkit.ReadAll(t, res)

			assert.Equal(t, 503, res.StatusCode)
			assert.Equal(t, tt.want, srv.Attempts.Load())
		})
	}
}

func TestCallerRequestUnchanged(t *testing.T) {
	tests := []struct {
		name        string
		giveOptions []retryhttp.Option
		giveBody    func() io.Reader
	}{
		{name: "no body", giveBody: func() io.Reader { return nil }},
		{name: "GetBody", giveBody: func() io.Reader { return strings.NewReader("payload") }},
		{name: "buffered", giveBody: func() io.Reader { return &testkit.CloseBody{Reader: strings.NewReader("payload")} }},
		{
			name:        "streamed once",
			giveOptions: []retryhttp.Option{retryhttp.WithBodyBufferLimit(3)},
			giveBody:    func() io.Reader { return &testkit.CloseBody{Reader: strings.NewReader("payload")} },
		},
		{
			name:        "attempt timeout",
			giveOptions: []retryhttp.Option{retryhttp.WithAttemptTimeout(time.Minute)},
			giveBody:    func() io.Reader { return strings.NewReader("payload") },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, testkit.StatusThen(503, 2))
			tr := testkit.NewTransport(t, append([]retryhttp.Option{testkit.NoDelay}, tt.giveOptions...)...)
			ctx, cancel := context.WithCancel(retryhttp.SetMaxRetries(context.Background(), 3))
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/p?q=1", tt.giveBody())
			require.NoError(t, err)
			req.Header.Set("Idempotency-Key", "k")
			req.Header.Set("X-Custom", "v")
			req.Trailer = http.Header{"X-Trailer": nil}
			before := testkit.Snapshot(req)

			res, err := tr.RoundTrip(req)
			require.NoError(t, err)
			testkit.ReadAll(t, res)

			after := testkit.Snapshot(req)
			assert.True(t, before.Ctx == after.Ctx, "context unchanged")
			assert.True(t, before.Body == after.Body, "body unchanged")
			before.Ctx, after.Ctx, before.Body, after.Body = nil, nil, nil, nil
			assert.Equal(t, before, after)
			assert.Positive(t, srv.Attempts.Load())
		})
	}
}

func TestCallerBodyClosed(t *testing.T) {
	refused := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		require.NoError(t, ln.Close())
		return "http://" + ln.Addr().String()
	}
	served := func(h testkit.HandlerFn) func(t *testing.T) string {
		return func(t *testing.T) string { return testkit.NewCountingServer(t, h).URL }
	}
	withGetBody := func(getBodyErr error) func() (*http.Request, *testkit.CloseBody) {
		return func() (*http.Request, *testkit.CloseBody) {
			req, _ := http.NewRequest(http.MethodPut, "http://placeholder", strings.NewReader("payload"))
			body := &testkit.CloseBody{Reader: req.Body}
			req.Body = body
			if getBodyErr != nil {
				req.GetBody = func() (io.ReadCloser, error) { return nil, getBodyErr }
			}
			return req, body
		}
	}
	withoutGetBody := func(r io.Reader) func() (*http.Request, *testkit.CloseBody) {
		return func() (*http.Request, *testkit.CloseBody) {
			body := &testkit.CloseBody{Reader: r}
			req, _ := http.NewRequest(http.MethodPut, "http://placeholder", body)
			return req, body
		}
	}
	tests := []struct {
		name        string
		giveOptions []retryhttp.Option
		giveURL     func(t *testing.T) string
		giveReq     func() (*http.Request, *testkit.CloseBody)
		giveCancel  bool
		wantErr     bool
	}{
		{name: "GetBody, success", giveURL: served(testkit.Always(200)), giveReq: withGetBody(nil)},
		{name: "GetBody, retried", giveURL: served(testkit.Always(503)), giveReq: withGetBody(nil)},
		{name: "GetBody fails", giveURL: served(testkit.Always(503)), giveReq: withGetBody(errors.New("x")), wantErr: true},
		{name: "GetBody, refused", giveURL: refused, giveReq: withGetBody(nil), wantErr: true},
		{name: "buffered, retried", giveURL: served(testkit.Always(503)), giveReq: withoutGetBody(strings.NewReader("payload"))},
		{name: "buffered, refused", giveURL: refused, giveReq: withoutGetBody(strings.NewReader("payload")), wantErr: true},
		{
			name: "streamed once", giveOptions: []retryhttp.Option{retryhttp.WithBodyBufferLimit(2)},
			giveURL: served(testkit.Always(503)), giveReq: withoutGetBody(strings.NewReader("payload")),
		},
		{
			name: "read error", giveURL: served(testkit.Always(200)),
			giveReq: withoutGetBody(iotest.ErrReader(errors.New("x"))), wantErr: true,
		},
		{
			name: "no retries", giveOptions: []retryhttp.Option{retryhttp.WithMaxRetries(0)},
			giveURL: served(testkit.Always(503)), giveReq: withoutGetBody(strings.NewReader("payload")),
		},
		{
			name: "prevent retry with body", giveOptions: []retryhttp.Option{retryhttp.WithPreventRetryWithBody(true)},
			giveURL: served(testkit.Always(503)), giveReq: withoutGetBody(strings.NewReader("payload")),
		},
		{
			name: "attempt timeout", giveOptions: []retryhttp.Option{retryhttp.WithAttemptTimeout(time.Minute)},
			giveURL: served(testkit.Always(503)), giveReq: withGetBody(nil),
		},
		{
			name: "cancelled context, buffered", giveURL: served(testkit.Always(200)),
			giveReq: withoutGetBody(strings.NewReader("payload")), giveCancel: true, wantErr: true,
		},
		{
			name: "cancelled context, GetBody", giveURL: served(testkit.Always(200)),
			giveReq: withGetBody(nil), giveCancel: true, wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := testkit.NewTransport(t, append([]retryhttp.Option{testkit.NoDelay}, tt.giveOptions...)...)
			req, body := tt.giveReq()
			u, err := req.URL.Parse(tt.giveURL(t))
			require.NoError(t, err)
			req.URL, req.Host = u, ""
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.giveCancel {
				cancel()
			}

			res, err := tr.RoundTrip(req.WithContext(ctx))
			if tt.wantErr {
				assert.Error(t, err)
				assert.Nil(t, res)
			} else if assert.NoError(t, err) {
				testkit.ReadAll(t, res)
			}

			// net/http may close a request body from its write loop, after
			// RoundTrip returns.
			assert.Eventually(t, body.Closed.Load, 5*time.Second, time.Millisecond, "the caller's body is closed")
		})
	}
}

// Regression: WithBodyBufferLimit(math.MaxInt64) overflowed the read bound
// (limit+1) and sent an empty body.
func TestBodyBufferLimitMaxInt64KeepsBody(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := testkit.NewCountingServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(503)
		}
	})
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithBodyBufferLimit(math.MaxInt64))

	req, err := http.NewRequest(http.MethodPut, srv.URL, io.NopCloser(strings.NewReader("hello world")))
	require.NoError(t, err)
	require.Nil(t, req.GetBody)
	res, err := tr.RoundTrip(req)
	require.NoError(t, err)
	testkit.ReadAll(t, res)

	assert.Equal(t, []string{"hello world", "hello world"}, got)
}

// Regression: a discarded chunked body of exactly 64 KiB was read to the
// bound but not to its end, so every such response cost its connection.
func TestDiscardedChunkedBodyOfExactlyMaxDrainKeepsConnection(t *testing.T) {
	chunk := bytes.Repeat([]byte("x"), respbody.MaxDrain)
	srv := testkit.NewCountingServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n%2 == 1 {
			w.WriteHeader(503)
			_, _ = w.Write(chunk[:1])
			_ = http.NewResponseController(w).Flush() // chunked from here on
			_, _ = w.Write(chunk[1:])
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	tr := testkit.NewTransport(t, testkit.NoDelay, testkit.UnlimitedBudget)
	client := &http.Client{Transport: tr}

	for range 10 {
		res, err := client.Get(srv.URL)
		require.NoError(t, err)
		assert.Equal(t, "ok", testkit.ReadAll(t, res))
	}
	assert.Equal(t, int64(20), srv.Attempts.Load())
	assert.LessOrEqual(t, srv.Conns.Load(), int64(2), "drained to the end: the connection is reused")
}

// Bodies without GetBody are streamed to the first attempt as they come,
// with a copy kept for retries (teebody.go). The tests below write such a
// body through an io.Pipe, in steps that wait for the server: a transport
// that read the body before sending would wait forever, so each test
// bounds its wait and fails instead.

// pipeBody is a body written step by step by the test: its type hides the
// pipe, so http.NewRequest sets no GetBody. It counts its Close calls.
type pipeBody struct {
	*io.PipeReader
	closes chan struct{}
}

func newPipeBody() (*pipeBody, *io.PipeWriter) {
	r, w := io.Pipe()
	return &pipeBody{PipeReader: r, closes: make(chan struct{}, 8)}, w
}

func (b *pipeBody) Close() error {
	b.closes <- struct{}{}
	return b.PipeReader.Close()
}

// closedOnce asserts that the caller's body was closed exactly once.
func (b *pipeBody) closedOnce(t *testing.T) {
	t.Helper()
	select {
	case <-b.closes:
	case <-time.After(5 * time.Second):
		t.Fatal("the caller's body was never closed")
	}
	select {
	case <-b.closes:
		t.Error("the caller's body was closed twice")
	case <-time.After(10 * time.Millisecond):
	}
}

// waitFor waits for c, failing the test after a few seconds.
func waitFor(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not within 5s (was the body read to its end before it was sent?)", what)
	}
}

// echoAfterFirst reads the first 5 bytes of the body, closes gotFirst,
// then echoes the whole body once it ends.
func echoAfterFirst(gotFirst chan struct{}) testkit.HandlerFn {
	return func(_ int64, w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 5)
		_, _ = io.ReadFull(r.Body, buf)
		close(gotFirst)
		rest, _ := io.ReadAll(r.Body)
		_, _ = w.Write(append(buf, rest...))
	}
}

// writeAfterFirst writes "first", waits for the server to have read it
// (gotFirst closed), then writes rest and ends the body.
func writeAfterFirst(w *io.PipeWriter, gotFirst <-chan struct{}, rest string) {
	_, _ = io.WriteString(w, "first")
	<-gotFirst
	_, _ = io.WriteString(w, rest)
	w.Close()
}

func TestStreamedBodyReachesServerBeforeItEnds(t *testing.T) {
	gotFirst := make(chan struct{})
	srv := testkit.NewCountingServer(t, echoAfterFirst(gotFirst))
	tr := testkit.NewTransport(t, testkit.NoDelay)
	body, w := newPipeBody()
	req, err := http.NewRequest(http.MethodPost, srv.URL, body)
	require.NoError(t, err)

	go writeAfterFirst(w, gotFirst, ", then the rest")
	res, err := tr.RoundTrip(req)
	require.NoError(t, err)

	waitFor(t, gotFirst, "first bytes at the server")
	assert.Equal(t, "first, then the rest", testkit.ReadAll(t, res))
	body.closedOnce(t)
}

func TestFullDuplexBodyWaitsForResponseHeaders(t *testing.T) {
	// An HTTP/2 bidirectional stream: the server answers at once and
	// echoes the body as it comes.
	srv := testkit.StartServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		buf := make([]byte, 64)
		for {
			n, err := r.Body.Read(buf)
			_, _ = w.Write(buf[:n])
			_ = http.NewResponseController(w).Flush()
			if err != nil {
				return
			}
		}
	}, true, nil)
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithTransport(srv.Client().Transport))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body, w := newPipeBody()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, body)
	require.NoError(t, err)

	// The body's writer waits for the response headers, as a
	// bidirectional stream does: RoundTrip must return before the body
	// ends.
	res, err := tr.RoundTrip(req)
	require.NoError(t, err)
	defer res.Body.Close()
	for _, msg := range []string{"ping", "pong"} {
		_, err := io.WriteString(w, msg)
		require.NoError(t, err)
		got := make([]byte, len(msg))
		_, err = io.ReadFull(res.Body, got)
		require.NoError(t, err)
		assert.Equal(t, msg, string(got), "echoed while the body is open")
	}
	require.NoError(t, w.Close())
	rest, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Empty(t, rest)
	body.closedOnce(t)
}

func TestStreamedBodyRetriedWhole(t *testing.T) {
	srv := newChecksumServer(t, 503)
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithMaxRetries(2))
	body, w := newPipeBody()
	req, err := http.NewRequest(http.MethodPut, srv.URL, body)
	require.NoError(t, err)
	data := testkit.Payload(100 << 10)
	go func() {
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 7<<10)
			_, _ = w.Write(rest[:n])
			rest = rest[n:]
		}
		w.Close()
	}()

	res, err := tr.RoundTrip(req)
	require.NoError(t, err)
	testkit.ReadAll(t, res)

	sums, lens := srv.received()
	assert.Equal(t, testkit.Repeat(len(data), 3), lens, "the whole body on every attempt")
	assert.Equal(t, testkit.Repeat(sha256.Sum256(data), 3), sums)
	body.closedOnce(t)
}

func TestStreamedBodyContinuesAfterLostConnection(t *testing.T) {
	// Attempt 1 is cut after the server read the first half: the retry
	// sends that half from the copy, then the rest from the caller's body,
	// which the writer sends only after the cut.
	cut := make(chan struct{})
	var got []byte
	srv := testkit.NewCountingServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			buf := make([]byte, 4)
			_, _ = io.ReadFull(r.Body, buf)
			conn, _, err := http.NewResponseController(w).Hijack()
			require.NoError(t, err)
			require.NoError(t, conn.(*net.TCPConn).SetLinger(0))
			conn.Close() // a reset
			close(cut)
			return
		}
		got, _ = io.ReadAll(r.Body)
		_, _ = io.WriteString(w, "ok")
	})
	tr := testkit.NewTransport(t, testkit.NoDelay)
	body, w := newPipeBody()
	req, err := http.NewRequest(http.MethodPut, srv.URL, body)
	require.NoError(t, err)
	go func() {
		_, _ = io.WriteString(w, "head")
		<-cut
		_, _ = io.WriteString(w, "+tail")
		w.Close()
	}()

	res, err := tr.RoundTrip(req)
	require.NoError(t, err)

	assert.Equal(t, "ok", testkit.ReadAll(t, res))
	assert.Equal(t, "head+tail", string(got), "the copy, then the rest")
	assert.EqualValues(t, 2, srv.Attempts.Load())
	body.closedOnce(t)
}

func TestStreamedBodyOverLimitSaysWhyNotRetried(t *testing.T) {
	// A PUT whose connection is reset after the server read it is worth a
	// retry; its body outgrew the limit, so none is sent, and the error
	// says why.
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		require.NoError(t, err)
		require.NoError(t, conn.(*net.TCPConn).SetLinger(0))
		conn.Close()
	})
	var why retryhttp.StopReason
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithBodyBufferLimit(16),
		retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) { why = d.Reason }}))
	body := &testkit.CloseBody{Reader: bytes.NewReader(testkit.Payload(64))}

	res, err := tr.RoundTrip(testkit.NewRequest(t, http.MethodPut, srv.URL, body))

	assert.Nil(t, res)
	assert.ErrorIs(t, err, retryhttp.ErrBodyNotReplayable)
	assert.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF),
		"the attempt's own error is reached too: %v", err)
	assert.Equal(t, retryhttp.StopBodyNotReplayable, why)
	assert.Equal(t, "body not replayable", why.String())
	assert.EqualValues(t, 1, srv.Attempts.Load())
	assert.Eventually(t, body.Closed.Load, 5*time.Second, time.Millisecond)
}

func TestStreamedBodyErrorMidReadEndsRequest(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(200))
	tr := testkit.NewTransport(t, testkit.NoDelay)
	body, w := newPipeBody()
	req, err := http.NewRequest(http.MethodPut, srv.URL, body)
	require.NoError(t, err)
	errDisk := errors.New("disk on fire")
	go func() {
		_, _ = io.WriteString(w, "partial")
		w.CloseWithError(errDisk)
	}()

	res, err := tr.RoundTrip(req)

	assert.Nil(t, res)
	assert.ErrorIs(t, err, retryhttp.ErrBufferingBody)
	assert.ErrorIs(t, err, errDisk)
	assert.LessOrEqual(t, srv.Attempts.Load(), int64(1), "not retried")
	body.closedOnce(t)
}

func TestReverseProxyStreamsUpload(t *testing.T) {
	// httputil.ReverseProxy's outbound request has no GetBody: its body is
	// the client's, read as it arrives.
	gotFirst := make(chan struct{})
	upstream := testkit.NewCountingServer(t, echoAfterFirst(gotFirst))
	target, err := url.Parse(upstream.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = testkit.NewTransport(t, testkit.NoDelay)
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	pr, pw := io.Pipe()
	go writeAfterFirst(pw, gotFirst, " and the rest")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	res, err := client.Post(front.URL, "text/plain", pr)
	require.NoError(t, err)

	waitFor(t, gotFirst, "first bytes at the upstream")
	assert.Equal(t, "first and the rest", testkit.ReadAll(t, res))
}

func TestStreamedBodyErrorOutcomeIsTheBaseTransports(t *testing.T) {
	// The caller's body fails while attempt 1 reads it. The base transport
	// that returns the read error ends the request with it; one that
	// swallows it and answers has its answer judged as any other, the body
	// no longer replayable: a 200 is a success, a 503 is not retried.
	errDisk := errors.New("disk on fire")
	for _, tt := range []struct {
		name    string
		status  int // 0: the base transport returns the read error
		wantWhy retryhttp.StopReason
	}{
		{"read error returned", 0, retryhttp.StopError},
		{"read error swallowed, 200", 200, retryhttp.StopSuccess},
		{"read error swallowed, 503", 503, retryhttp.StopBodyNotReplayable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var sent int
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				sent++
				_, err := io.ReadAll(r.Body)
				r.Body.Close()
				if tt.status == 0 {
					return nil, err
				}
				return &http.Response{StatusCode: tt.status, Body: http.NoBody, Request: r}, nil
			})
			var stop retryhttp.Decision
			tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithTransport(base),
				retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) { stop = d }}))
			body := &testkit.CloseBody{Reader: io.MultiReader(bytes.NewReader([]byte("partial")), iotest.ErrReader(errDisk))}

			res, err := tr.RoundTrip(testkit.NewRequest(t, http.MethodPut, "http://example.invalid/", body))

			assert.Equal(t, 1, sent, "not retried")
			assert.Equal(t, tt.wantWhy, stop.Reason)
			assert.Equal(t, 1, stop.Attempt.Count, "attempt 1 was sent")
			if tt.status == 0 {
				assert.Nil(t, res)
				assert.ErrorIs(t, err, retryhttp.ErrBufferingBody)
				assert.ErrorIs(t, err, errDisk)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.status, res.StatusCode, "the base transport's answer")
			res.Body.Close()
		})
	}
}
