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
	"strings"
	"sync"
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
