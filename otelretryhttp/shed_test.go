package otelretryhttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/inbound"
	"github.com/seed2409de8f/retryhttp/otelretryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
)

// TestObserveLoadShedder: a shedder with one slot, held, refuses a request
// and lets a health check pass; the metrics read its counters at
// collection.
func TestObserveLoadShedder(t *testing.T) {
	m := newMeter(t)
	s := inbound.NewLoadShedder(inbound.LoadShedderOptions{
		Limit:    1,
		MustPass: func(r *http.Request) bool { return r.URL.Path == "/healthz" },
	})
	reg, err := otelretryhttp.ObserveLoadShedder(s, m.mp, attribute.String("shedder", "api"))
	require.NoError(t, err)
	started, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(inbound.Deadline(s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(started)
			<-release
		}
	}))))
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	held := make(chan int, 1)
	go func() {
		code, _ := get(t, tr, srv.URL+"/hold")
		held <- code
	}()
	<-started
	code, err := get(t, tr, srv.URL+"/")
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	code, err = get(t, tr, srv.URL+"/healthz")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	// A caller whose time is up: refused for its deadline.
	late, err := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	require.NoError(t, err)
	late.Header.Set(retryhttp.DeadlineHeader, "0")
	res, err := tr.RoundTrip(late)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)

	assert.Equal(t, map[string]string{
		otelretryhttp.ShedAdmittedName + "{shedder=api}": "2",
		otelretryhttp.ShedRefusedName + "{shedder=api}":  "2",
		otelretryhttp.ShedLateName + "{shedder=api}":     "1",
		otelretryhttp.ShedLimitName + "{shedder=api}":    "1",
		otelretryhttp.ShedInFlightName + "{shedder=api}": "1",
		otelretryhttp.ShedQueuedName + "{shedder=api}":   "0",
	}, m.collect(t))

	close(release)
	assert.Equal(t, http.StatusOK, <-held)
	require.NoError(t, reg.Unregister())
	assert.Empty(t, m.collect(t), "nothing after Unregister")
}

func TestObserveLoadShedderNil(t *testing.T) {
	_, err := otelretryhttp.ObserveLoadShedder(nil, newMeter(t).mp)
	assert.ErrorContains(t, err, "nil")
}
