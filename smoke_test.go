package retryhttp_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/require"
)

func TestSmoke(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			w.WriteHeader(503)
			return
		}
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	tr := retryhttp.New(retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }))
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 200, res.StatusCode)
	require.EqualValues(t, 3, n.Load())
}
